//! Memory and connection floods, on both backends: FAULTS A3 (oversized
//! heads keep per-connection memory at the head limit), B5 (thousands of
//! idle connections; the server keeps serving and accepting) and C5 (a
//! client that pipelines requests and reads no answer is stopped by
//! backpressure).
//!
//! Both measure the process's peak RSS (`VmHWM`, reset through
//! `/proc/self/clear_refs`), so the tests of this file run one at a time.

use crate::support;

use std::io::{Read, Write};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use percore_test_kit::http::*;
use percore_test_kit::*;
use support::http::*;

/// A `/proc/self/status` field in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"))
}

/// Resets the peak RSS to the current RSS; returns the current RSS (KiB).
fn reset_peak() -> u64 {
    std::fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM");
    status_kib("VmRSS:")
}

backend_tests! {
    /// A3: 64 clients each send 2 MiB of header fields. Every one gets
    /// 431 and the close, and the process's peak RSS grows by far less than
    /// the 128 MiB a server that buffered the heads would need.
    fn a03_oversized_heads_keep_memory_bounded(backend) {
        let server = TestServer::echo(backend);
        let line = format!("X-Filler: {}\r\n", "f".repeat(100));
        let mut head = b"GET / HTTP/1.1\r\nHost: t\r\n".to_vec();
        while head.len() < 2 << 20 {
            head.extend_from_slice(line.as_bytes());
        }
        let head = Arc::new(head);
        let before = reset_peak();
        let clients: Vec<_> = (0..64)
            .map(|_| {
                let head = head.clone();
                let addr = server.addr;
                thread::spawn(move || {
                    let mut c = Client::connect(addr);
                    // The server answers after 32 KiB and then discards the
                    // rest while it lingers; the write may still fail if
                    // the linger ended first.
                    let _ = c.try_send(&head);
                    let _ = c.stream.shutdown(std::net::Shutdown::Write);
                    let r = c.response();
                    assert_eq!(r.status, 431);
                    assert!(r.closes());
                })
            })
            .collect();
        for client in clients {
            client.join().expect("client thread");
        }
        let grew = status_kib("VmHWM:").saturating_sub(before);
        println!("{backend}: peak RSS grew by {grew} KiB for 64 x 2 MiB heads");
        assert!(grew < 48 * 1024, "peak RSS grew by {grew} KiB");
        assert_eq!(one(server.addr, &get("/")).body, HELLO);
    }

    /// C5: a client pipelines 100,000 small requests and reads nothing.
    /// Once the answers fill the socket buffers the server stops taking
    /// requests (it neither reads nor queues more output), with the
    /// process's memory bounded; when the client reads, every request is
    /// answered, in order, and the connection is still usable.
    fn c05_pipelined_requests_without_reading_are_bounded(backend) {
        const REQUESTS: usize = 100_000;
        let mut config = Config::default();
        config.max_requests = u32::MAX;
        let server = TestServer::echo_with(backend, config);
        let mut c = Client::connect(server.addr);
        // A small receive buffer (no autotuning) makes the answers back up
        // after a few thousand, not after megabytes.
        let rcvbuf: libc::c_int = 64 * 1024;
        // SAFETY: a valid socket and a pointer to a c_int of the size given.
        let set = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&c.stream),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&rcvbuf as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(set, 0, "SO_RCVBUF: {}", std::io::Error::last_os_error());
        let requests = get("/").repeat(REQUESTS);
        let before = reset_peak();
        let mut writer = c.stream.try_clone().expect("clone");
        let sending = thread::spawn(move || writer.write_all(&requests));
        // Wait until the server has stopped answering for 300 ms. (A pause
        // of a loaded machine can end this early: fewer requests taken, a
        // smaller peak, never a wrong verdict.)
        let mut last = server.stats().requests;
        let mut still_since = Instant::now();
        let deadline = Instant::now() + Duration::from_secs(120);
        while still_since.elapsed() < Duration::from_millis(300) {
            assert!(Instant::now() < deadline, "the server never stopped taking requests");
            thread::sleep(Duration::from_millis(20));
            let now = server.stats().requests;
            if now != last {
                (last, still_since) = (now, Instant::now());
            }
        }
        let grew = status_kib("VmHWM:").saturating_sub(before);
        println!("{backend}: stopped after {last} of {REQUESTS} pipelined requests; peak RSS grew by {grew} KiB");
        assert!((last as usize) < REQUESTS / 2, "the server took {last} requests with no answer read");
        assert!(grew < 8 * 1024, "peak RSS grew by {grew} KiB");
        let first = c.response();
        assert_eq!((first.status, &first.body[..]), (200, HELLO));
        for i in 1..REQUESTS {
            let r = c.response();
            assert_eq!(r.status, 200, "response {i}");
        }
        sending.join().expect("writer thread").expect("every request sent");
        assert_eq!(c.roundtrip(&get("/after")).body, HELLO);
        assert_eq!(server.stats().requests as usize, REQUESTS + 1);
    }

    /// B5: 4000 idle connections. Existing and new connections are still
    /// served, accepting goes on, and the server's memory per idle
    /// connection stays small.
    fn b5_connection_flood(backend) {
        const IDLE: usize = 4000;
        let server = TestServer::echo(backend);
        let mut early = Client::connect(server.addr);
        assert_eq!(early.roundtrip(&get("/")).status, 200);

        let before = reset_peak();
        let idle: Vec<std::net::TcpStream> = (0..IDLE)
            .map(|i| {
                std::net::TcpStream::connect(server.addr)
                    .unwrap_or_else(|e| panic!("connection {i}: {e}"))
            })
            .collect();
        wait_until(Duration::from_secs(60), "every idle connection accepted", || {
            server.stats().active as usize > IDLE
        }, |done| *done);
        let grew = status_kib("VmHWM:").saturating_sub(before);
        let per_conn = grew * 1024 / IDLE as u64;
        println!("{backend}: {per_conn} bytes of peak RSS per idle connection");
        assert!(per_conn < 32 * 1024, "{per_conn} bytes per idle connection");

        assert_eq!(early.roundtrip(&get("/")).body, HELLO);
        assert_eq!(one(server.addr, &get("/new")).body, HELLO);
        assert!(server.stats().accepted as usize >= IDLE + 2);

        // The idle connections are still open and usable, too.
        let mut last = idle.last().expect("connections").try_clone().expect("clone");
        last.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        last.write_all(&get("/last")).expect("send");
        let mut buf = [0u8; 256];
        let n = last.read(&mut buf).expect("response");
        assert!(buf[..n].starts_with(b"HTTP/1.1 200 OK\r\n"));
        drop(idle);
    }
}
