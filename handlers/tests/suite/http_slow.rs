//! FAULTS.md section B (slow and abusive clients) and the graceful stop,
//! on both backends, with timeouts shortened to fractions of a second
//! (`short_config`). B5 is in `http_flood.rs`, B6 in `http_sigpipe.rs`.

use crate::support;

use std::io::Write;
use std::os::fd::AsRawFd;
use std::thread;
use std::time::{Duration, Instant};

use percore_test_kit::http::*;
use percore_test_kit::*;
use support::http::*;

/// Writes `bytes` one at a time, `gap` apart, from another thread, until
/// done or the server closes.
fn trickle(client: &Client, bytes: &'static [u8], gap: Duration) -> thread::JoinHandle<()> {
    let mut stream = client.stream.try_clone().expect("clone the socket");
    thread::spawn(move || {
        for b in bytes {
            if stream.write_all(std::slice::from_ref(b)).is_err() {
                return;
            }
            thread::sleep(gap);
        }
    })
}

backend_tests! {
    parallel;
    /// B1: slowloris. A head sent one byte per 100 ms (never ending: it
    /// has no blank line) never lets a per-read timer fire; the head
    /// deadline is total: 408 + close, not before 800 ms.
    fn b1_slowloris_gets_408_at_the_head_deadline(backend) {
        let server = TestServer::echo_with(backend, short_config());
        let mut c = Client::connect(server.addr);
        let started = Instant::now();
        let writer = trickle(&c, b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", Duration::from_millis(100));
        let r = c.response();
        let elapsed = started.elapsed();
        assert_eq!(r.status, 408);
        assert_eq!(r.body, b"Request Timeout: request head timed out\n");
        assert!(r.closes());
        assert!(elapsed >= Duration::from_millis(700), "408 after {elapsed:?}");
        c.expect_eof();
        writer.join().expect("writer");
    }

    /// B2: an idle keep-alive connection is closed at the idle timeout
    /// without a byte (no 408); so is a new connection that never speaks.
    fn b2_idle_connections_close_silently(backend) {
        let server = TestServer::echo_with(backend, short_config());
        // Each wait is timed from before the server's clock can start (the
        // request sent, the connection made), so it is a lower bound.
        let mut c = Client::connect(server.addr);
        let started = Instant::now();
        assert_eq!(c.roundtrip(&get("/")).status, 200);
        c.expect_eof();
        let idle = started.elapsed();
        assert!(idle >= Duration::from_millis(400), "{idle:?}");

        let started = Instant::now();
        let mut silent = Client::connect(server.addr);
        silent.expect_eof();
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(600), "{waited:?}");
    }

    /// B1, B2 with the defaults' order of timeouts (idle longer than the
    /// head timeout): the connection's one timer fires first at the
    /// first-request head deadline it was armed with, then must still fire
    /// at the later deadline of a silent client: the idle close, and a 408
    /// for a head begun after a pause. (The pause is under an idle timeout
    /// of a minute there, so a slow machine cannot turn it into an idle
    /// close.) Waits are timed from before the server's clock starts.
    fn timeouts_fire_after_the_timer_moved_later(backend) {
        let mut config = short_config();
        config.head_timeout = Duration::from_millis(300);
        config.idle_timeout = Duration::from_millis(1200);
        let server = TestServer::echo_with(backend, config);

        let mut c = Client::connect(server.addr);
        let started = Instant::now();
        assert_eq!(c.roundtrip(&get("/")).status, 200);
        c.expect_eof();
        let idle = started.elapsed();
        assert!(idle >= Duration::from_millis(1000), "{idle:?}");

        config.idle_timeout = Duration::from_secs(60);
        let server = TestServer::echo_with(backend, config);
        let mut c = Client::connect(server.addr);
        assert_eq!(c.roundtrip(&get("/")).status, 200);
        thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n");
        let r = c.response();
        let elapsed = started.elapsed();
        assert_eq!(r.status, 408);
        assert!(elapsed >= Duration::from_millis(250), "408 after {elapsed:?}");
    }

    /// A head that arrives a byte per write gets the verdict it gets whole:
    /// a valid one is answered and the connection stays usable; a request
    /// line that grows past its limit without ending gets 414. (The parse
    /// is retried only when the head may have ended or has doubled; that
    /// the retries stay few is counted in the unit tests.)
    fn trickled_heads_get_the_verdicts_of_whole_ones(backend) {
        let server = TestServer::echo(backend);
        let mut c = Client::connect(server.addr);
        let mut head = b"GET /slow HTTP/1.1\r\nHost: t\r\n".to_vec();
        for i in 0..20 {
            head.extend_from_slice(format!("X-{i}: {}\r\n", "v".repeat(100)).as_bytes());
        }
        head.extend_from_slice(b"\r\n");
        for b in &head {
            c.send(std::slice::from_ref(b));
        }
        let r = c.response();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, HELLO);
        assert_eq!(c.roundtrip(&get("/")).status, 200);

        let mut c = Client::connect(server.addr);
        for b in b"GET /".iter().chain(&[b'a'; 20_000]) {
            if c.try_send(std::slice::from_ref(b)).is_err() {
                break;
            }
        }
        let r = c.response();
        assert_eq!(r.status, 414);
        assert!(r.closes());
    }

    /// B3: slow body (R.U.D.Y.). One body byte per 100 ms (10 s for the
    /// body): 408 + close at the body deadline, not before it, while
    /// another connection is served. (Its pauses are under an idle timeout
    /// of a minute, so a slow machine cannot close it.)
    fn b3_slow_body_gets_408_and_others_are_served(backend) {
        let mut config = short_config();
        config.idle_timeout = Duration::from_secs(60);
        let server = TestServer::echo_with(backend, config);
        let mut slow = Client::connect(server.addr);
        let started = Instant::now();
        slow.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n");
        let writer = trickle(&slow, &[b'x'; 100], Duration::from_millis(100));
        let mut other = Client::connect(server.addr);
        for _ in 0..5 {
            assert_eq!(other.roundtrip(&get("/")).body, HELLO);
            thread::sleep(Duration::from_millis(50));
        }
        let r = slow.response();
        let elapsed = started.elapsed();
        assert_eq!(r.status, 408);
        assert_eq!(r.body, b"Request Timeout: request body timed out\n");
        assert!(r.closes());
        assert!(elapsed >= Duration::from_millis(700), "{elapsed:?}");
        slow.expect_eof();
        writer.join().expect("writer");
    }

    /// B4: a client that never reads a large echo: the server's writes
    /// stall on the full socket buffers and the write timeout resets the
    /// connection; the response never arrives whole, and the reset frees
    /// the queued output at once: the client reads what its own buffer
    /// held, then the reset (not the end of a trickle).
    fn b4_slow_reader_is_closed_at_the_write_timeout(backend) {
        let mut config = short_config();
        config.limits.max_body = 16 << 20;
        let server = TestServer::echo_with(backend, config);
        let mut c = Client::connect(server.addr);
        set_rcvbuf(&c, 4096);
        let body = vec![b'z'; 8 << 20];
        let stats_wait = Instant::now();
        c.send(&post("/", "a/b", &body));
        // The server read the body and is stuck writing 8 MiB to a client
        // that reads nothing: it must give up on its own.
        wait_until(Duration::from_secs(60), "the server to close the stalled connection", || {
            server.stats().active == 0
        }, |done| *done);
        assert!(stats_wait.elapsed() >= Duration::from_millis(300), "{:?}", stats_wait.elapsed());
        // The close is a reset: the kernel dropped the unsent output
        // instead of trickling it out to the slow reader. A reader gets
        // the bytes already in its buffer, then `ECONNRESET`; after a FIN
        // it would get the end of stream instead.
        let mut got = 0;
        let mut piece = vec![0; 64 << 10];
        let reset = loop {
            match std::io::Read::read(&mut c.stream, &mut piece) {
                Ok(0) => break false,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                Err(e) => panic!("read after {got} bytes: {e}"),
            }
        };
        assert!(got < body.len(), "the response was cut short, got {got} bytes");
        assert!(reset, "closed with a FIN after {got} bytes, not reset");
        assert_eq!(one(server.addr, &get("/")).body, HELLO);
    }

    /// B7: a full request then `shutdown(SHUT_WR)`: still answered (all
    /// pipelined requests), then closed.
    fn b7_half_close_after_requests(backend) {
        let server = TestServer::echo(backend);
        let mut c = Client::connect(server.addr);
        c.send(&get("/1"));
        c.send(&post("/2", "t/x", b"two"));
        c.shutdown_write();
        assert_eq!(c.response().body, HELLO);
        assert_eq!(c.response().body, b"two");
        c.expect_eof();
    }

    /// B8: the 1000th response on a connection carries `Connection: close`
    /// and the server closes after it; a 1001st request gets nothing.
    fn b8_request_cap(backend) {
        let mut config = Config::default();
        config.linger_timeout = Duration::from_millis(300);
        let server = TestServer::echo_with(backend, config);
        let mut c = Client::connect(server.addr);
        for i in 1..=1000 {
            let r = c.roundtrip(&get("/"));
            assert_eq!(r.status, 200);
            assert_eq!(r.closes(), i == 1000, "request {i}");
        }
        let _ = c.try_send(&get("/1001"));
        c.expect_eof();
        assert_eq!(server.stats().requests, 1000);
    }

    /// A 24 MiB answer to a client that reads at most 64 KiB every 20 ms
    /// (about 8 s in all) goes out whole although the write timeout is
    /// 3 s: the timeout runs from the write's last progress, not its
    /// start. The reader pauses 20 ms, far from the 3 s a loaded machine
    /// would have to stall it for; the other timeouts are a minute.
    fn a_slow_steady_reader_gets_a_large_answer(backend) {
        const WRITE_TIMEOUT: Duration = Duration::from_secs(3);
        let mut config = short_config();
        config.limits.max_body = 32 << 20;
        config.head_timeout = Duration::from_secs(60);
        config.body_timeout = Duration::from_secs(60);
        // The answer's end sits in the socket buffers once written, and
        // is read long after: not an idle connection.
        config.idle_timeout = Duration::from_secs(60);
        config.write_timeout = WRITE_TIMEOUT;
        let server = TestServer::echo_with(backend, config);
        let mut c = Client::connect(server.addr);
        let body = vec![b'z'; 24 << 20];
        let mut writer = c.stream.try_clone().expect("clone");
        let request = post("/", "t/x", &body);
        let sending = thread::spawn(move || writer.write_all(&request));
        let mut got = Vec::new();
        let mut piece = vec![0; 64 << 10];
        let started = Instant::now();
        let whole = |got: &[u8]| {
            let head = got.windows(4).position(|w| w == b"\r\n\r\n");
            head.is_some_and(|at| got.len() >= at + 4 + body.len())
        };
        while !whole(&got) {
            let n = std::io::Read::read(&mut c.stream, &mut piece)
                .unwrap_or_else(|e| panic!("{e} after {} bytes, {:?}", got.len(), started.elapsed()));
            assert!(n > 0, "closed after {} bytes, {:?}", got.len(), started.elapsed());
            got.extend_from_slice(&piece[..n]);
            thread::sleep(Duration::from_millis(20));
        }
        let took = started.elapsed();
        sending.join().expect("sender").expect("sent");
        assert!(got.ends_with(&body), "the whole body, {} bytes in all", got.len());
        // A lower bound: the write outlasted its timeout, so the timeout
        // cannot have run from the write's start.
        assert!(took > WRITE_TIMEOUT, "the answer took only {took:?}");
        assert_eq!(c.roundtrip(&get("/")).body, HELLO);
    }

    /// A client that streams without end after its closing answer (here
    /// a 413 for a body over the limit) is cut off at the linger timeout
    /// (300 ms), however fast it sends: the linger's deadline holds while
    /// its reads never wait. The stream would go on for two minutes (a
    /// hang guard): the verdict is that the server cut it.
    fn a_linger_ends_at_its_timeout_under_a_stream(backend) {
        let mut config = Config::default();
        config.linger_timeout = Duration::from_millis(300);
        config.limits.max_body = 1000;
        let server = TestServer::echo_with(backend, config);
        let mut c = Client::connect(server.addr);
        c.send(b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
        let mut stream = c.stream.try_clone().expect("clone");
        let started = Instant::now();
        let sender = thread::spawn(move || {
            let chunk = [b"4000\r\n".as_slice(), &[b'x'; 0x4000], b"\r\n"].concat();
            while started.elapsed() < Duration::from_secs(120) {
                if stream.write_all(&chunk).is_err() {
                    return Some(started.elapsed());
                }
            }
            None
        });
        assert_eq!(c.response().status, 413);
        let cut = sender.join().expect("sender");
        assert!(cut.is_some(), "still streaming after two minutes");
    }

    /// Timeouts of `Duration::MAX` mean "never", not an overflow panic in
    /// the deadline arithmetic.
    fn unbounded_timeouts_do_not_overflow(backend) {
        let mut config = Config::default();
        config.head_timeout = Duration::MAX;
        config.body_timeout = Duration::MAX;
        config.idle_timeout = Duration::MAX;
        config.write_timeout = Duration::MAX;
        config.linger_timeout = Duration::MAX;
        config.max_age = Duration::MAX;
        let server = TestServer::echo_with(backend, config);
        let mut c = Client::connect(server.addr);
        c.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nab");
        thread::sleep(Duration::from_millis(20));
        c.send(b"cd");
        assert_eq!(c.response().body, b"abcd");
        assert_eq!(c.roundtrip(&get("/")).body, HELLO);
        assert_eq!(server.stats().panics, 0);
    }

    /// A stopping server keeps an idle keep-alive connection open for
    /// `stop_grace` (here 300 ms) in case a request crossed the stop, then
    /// closes it and stops, not before the grace; with a grace of zero it
    /// closes it at once. Not at the idle timeout or the drain deadline:
    /// both are two minutes here, and the stop must end before them.
    fn stop_closes_idle_connections_after_the_grace(backend) {
        const LATER: Duration = Duration::from_secs(120);
        let ms = Duration::from_millis;
        for (grace, least) in [(ms(300), ms(250)), (ms(0), ms(0))] {
            let mut config = Config::default();
            config.stop_grace = grace;
            config.idle_timeout = LATER;
            let mut server = TestServer::echo_with_drain(backend, config, LATER);
            let mut clients: Vec<Client> = (0..3).map(|_| Client::connect(server.addr)).collect();
            for c in &mut clients {
                assert_eq!(c.roundtrip(&get("/")).status, 200);
            }
            let took = server.stop_within(Duration::from_secs(60)).expect("the server stopped before the drain deadline");
            assert!(took >= least, "grace {grace:?}: stop took {took:?}");
            for c in &mut clients {
                c.expect_eof();
            }
        }
    }

    /// A request sent on a kept-alive connection just after the stop
    /// began, as one that crossed the stop on the wire, is answered with
    /// `Connection: close`, and then the connection closes.
    fn a_request_right_after_the_stop_is_answered(backend) {
        // A grace of a minute: the pause below, long enough for the
        // connection to see the stop, cannot outlast it on a slow machine.
        let mut config = Config::default();
        config.stop_grace = Duration::from_secs(60);
        let mut server = TestServer::echo_with_drain(backend, config, Duration::from_secs(120));
        let mut c = Client::connect(server.addr);
        assert_eq!(c.roundtrip(&get("/before")).status, 200);
        server.begin_stop();
        thread::sleep(Duration::from_millis(500));
        let r = c.roundtrip(&post("/after", "text/plain", b"crossed"));
        assert_eq!((r.status, r.body.as_slice()), (200, &b"crossed"[..]));
        assert!(r.closes(), "answered with Connection: close");
        c.expect_eof();
        assert!(server.stop_within(Duration::from_secs(60)).is_some(), "the server stopped");
    }

    /// A request in flight when the stop begins is finished and answered
    /// with `Connection: close`.
    fn stop_finishes_the_request_in_flight(backend) {
        // Grace, drain and timeouts far past the pauses below, which only
        // order the events (request begun, stop, rest of the body).
        let mut config = Config::default();
        config.stop_grace = Duration::from_secs(60);
        let mut server = TestServer::echo_with_drain(backend, config, Duration::from_secs(120));
        let mut c = Client::connect(server.addr);
        assert_eq!(c.roundtrip(&get("/warm")).status, 200);
        c.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhello");
        thread::sleep(Duration::from_millis(50));
        server.begin_stop();
        thread::sleep(Duration::from_millis(100));
        c.send(b"world");
        let r = c.response();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"helloworld"[..]));
        assert!(r.closes(), "answered with Connection: close");
        c.expect_eof();
        assert!(server.stop_within(Duration::from_secs(60)).is_some(), "the server stopped");
    }
}

/// Shrinks the client's receive buffer so a large response stalls.
fn set_rcvbuf(c: &Client, bytes: libc::c_int) {
    // SAFETY: a valid socket fd and a pointer to a live c_int of the
    // length given.
    let rc = unsafe {
        libc::setsockopt(
            c.stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "setsockopt(SO_RCVBUF)");
}
