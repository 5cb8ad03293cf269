//! Memory a burst leaves behind, on both backends: once the burst is
//! over and the core has been quiet for a moment, RSS comes back to
//! within a small bound of where it started, though the burst's clients
//! are too few (and, in the first test, still connected) for the core's
//! other give-back, after many connections closed, to run.
//!
//! - A burst of requests with about 27 KB of header fields each, on 100
//!   keep-alive connections at once: on io_uring, the buffer ring's
//!   buffers that the kernel wrote into stayed resident (10 MiB or more
//!   here); on epoll, the receive buffers the pool kept (3 MiB).
//! - 50 requests at once, two branches each, to a fan-out proxy whose
//!   upstream answers with bodies that never end: glibc's heap kept what
//!   the branches' response buffers freed, and the proxy's free lists
//!   what they kept.
//!
//! The tests read the process's RSS, so they run alone (`serial`), in a
//! binary of their own: what other tests of a shared binary leave in the
//! heap would move the start they are measured against.

mod support;

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use percore_test_kit::http::*;
use percore_test_kit::upstream::{Conn, Fake};
use percore_test_kit::*;
use support::fanout::proxy;
use support::http::*;

/// Connections of the header burst, which stay open: a core's
/// connection-based give-back waits for closes.
const CONNS: usize = 100;
/// Requests at once to the proxy: fewer than a core's connection-based
/// give-back waits for.
const REQUESTS: usize = 50;
/// Branches of each request to the proxy, all to its one upstream.
const WIDTH: usize = 2;
/// Rounds of header-heavy requests, each on every connection at once.
const ROUNDS: usize = 20;
/// What a header burst may leave resident: the receive buffers a pool
/// keeps, the stack and allocator caches of the test's threads; not the
/// burst's buffers (3 MiB on epoll, 10 MiB or more on io_uring).
const HEADERS_SLACK_KIB: u64 = 2048;

/// What the proxy's burst may leave resident: the above, and what glibc
/// keeps by its own rule, the free top of the core thread's heap (up to
/// twice the largest block freed, a response buffer of 2 MiB); not the
/// burst's buffers (30 to 140 MiB).
const PROXY_SLACK_KIB: u64 = 6 * 1024;

fn rss_kib() -> u64 {
    vm_rss_kib("self")
}

/// Waits (a minute at most: a hang detector) until RSS is back within
/// `slack` KiB of `before`; fails otherwise. Without a give-back, all of
/// the growth stays.
fn given_back(backend: Backend, before: u64, peak: u64, slack: u64) {
    let back = wait_until(
        Duration::from_secs(60),
        "the burst's memory given back",
        rss_kib,
        |now| now.saturating_sub(before) <= slack,
    );
    println!("{backend}: RSS {before} KiB before, {peak} KiB at the peak, {back} KiB after");
}

/// Request `round` of connection `i`: 60 fields of 440 bytes, and a body
/// that says whose it is.
fn heavy_request(round: usize, i: usize) -> (Vec<u8>, Vec<u8>) {
    let body = format!("{round}-{i}").into_bytes();
    let mut req = b"POST / HTTP/1.1\r\nHost: t\r\n".to_vec();
    for k in 0..60 {
        let value: String = (0..440)
            .map(|j| char::from(b'a' + ((k + j) % 26) as u8))
            .collect();
        write!(req, "X-Field-{k:02}: {value}\r\n").expect("into a Vec");
    }
    write!(req, "Content-Length: {}\r\n\r\n", body.len()).expect("into a Vec");
    req.extend_from_slice(&body);
    (req, body)
}

/// Sends request `round` on every connection, then checks every answer:
/// the body echoed (a head with a byte lost would have been refused).
fn heavy_round(clients: &mut [Client], round: usize) {
    let requests: Vec<_> = (0..clients.len())
        .map(|i| heavy_request(round, i))
        .collect();
    for (c, (req, _)) in clients.iter_mut().zip(&requests) {
        c.send(req);
    }
    for (i, (c, (_, body))) in clients.iter_mut().zip(&requests).enumerate() {
        let r = c.response();
        assert!(
            r.status == 200 && r.body == *body,
            "round {round}, client {i}: {}",
            r.status
        );
    }
}

/// What the endless upstream sends, again and again.
static CHUNK: [u8; 16384] = [b'x'; 16384];

/// Body bytes each answer sends before it waits for the others: close
/// to the proxy's limit, so that every branch holds about 1 MiB at once,
/// whatever the machine's speed.
const BEFORE_WAIT: usize = 900 * 1024;

/// How many answers have sent [`BEFORE_WAIT`], and how many must have
/// before they go on.
#[derive(Default)]
struct Gate {
    waiting: AtomicUsize,
    opens_at: AtomicUsize,
}

impl Gate {
    /// Counts this answer in and waits until the gate opens (a minute at
    /// most: a hang detector).
    fn wait(&self) {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let give_up = Instant::now() + Duration::from_secs(60);
        while self.waiting.load(Ordering::SeqCst) < self.opens_at.load(Ordering::SeqCst)
            && Instant::now() < give_up
        {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// An upstream whose answers never end, by turns chunked and
/// close-delimited; each writes [`BEFORE_WAIT`] bytes of body, waits at
/// `gate`, then writes on until the proxy closes the connection.
fn endless(mut c: Conn, gate: &Gate) {
    if c.read_request().is_none() {
        return;
    }
    let chunked = c.index % 2 == 0;
    let framing = if chunked {
        "Transfer-Encoding: chunked"
    } else {
        "Connection: close"
    };
    c.send(format!("HTTP/1.1 200 OK\r\n{framing}\r\n\r\n").as_bytes());
    let mut sent = 0;
    loop {
        let wrote = if chunked {
            c.stream
                .write_all(format!("{:x}\r\n", CHUNK.len()).as_bytes())
                .and_then(|()| c.stream.write_all(&CHUNK))
                .and_then(|()| c.stream.write_all(b"\r\n"))
        } else {
            c.stream.write_all(&CHUNK)
        };
        if wrote.is_err() {
            return;
        }
        sent += CHUNK.len();
        if sent == BEFORE_WAIT {
            gate.wait();
        }
    }
}

backend_tests! {
    fn a_header_heavy_burst_leaves_no_receive_buffer_resident(backend) {
        // Connections idle through the wait, which closing them at the
        // idle timeout would end (and with it the test's point).
        let mut config = Config::default();
        config.idle_timeout = Duration::from_secs(600);
        let server = TestServer::echo_with(backend, config);
        // Warm: the core's first buffers and tables are not the burst's.
        for _ in 0..50 {
            assert_eq!(one(server.addr, &post("/", "text/plain", b"abc")).body, b"abc");
        }
        let before = rss_kib();
        let mut clients: Vec<Client> = (0..CONNS).map(|_| Client::connect(server.addr)).collect();
        for round in 0..ROUNDS {
            heavy_round(&mut clients, round);
        }
        let peak = rss_kib();
        // The clients stay connected: only the quiet core gives back.
        given_back(backend, before, peak, HEADERS_SLACK_KIB);
        // The buffers given back serve again, every byte intact.
        heavy_round(&mut clients, ROUNDS);
    }

    fn endless_upstream_bodies_leave_no_memory_behind(backend) {
        let gate = Arc::new(Gate::default());
        let upstream = Fake::start({
            let gate = gate.clone();
            move |c| endless(c, &gate)
        });
        // No ejection: every request must reach the endless upstream.
        let server = proxy(backend, &[upstream.addr], |c| {
            c.width = WIDTH;
            c.ejection.consecutive_failures = 0;
        });
        let fan_out = |n: usize| {
            gate.opens_at.fetch_add(n * WIDTH, Ordering::SeqCst);
            let threads: Vec<_> = (0..n)
                .map(|i| {
                    let addr = server.addr;
                    std::thread::spawn(move || {
                        let r = one(addr, &get(&format!("/{i}")));
                        assert_eq!(r.status, 502, "request {i}");
                    })
                })
                .collect();
            for t in threads {
                t.join().expect("a client thread");
            }
        };
        // Warm: the proxy's first connections, lists and threads.
        fan_out(3);
        let before = rss_kib();
        fan_out(REQUESTS);
        let peak = rss_kib();
        given_back(backend, before, peak, PROXY_SLACK_KIB);
    }
}
