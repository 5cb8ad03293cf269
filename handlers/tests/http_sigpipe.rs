//! FAULTS B6: clients that reset mid-response. This test binary restores
//! the default `SIGPIPE` disposition (terminate) before any server runs,
//! as a C host embedding percore might, so a single send without
//! `MSG_NOSIGNAL` to a reset peer would kill the process and fail the run.
//! Its own file: the disposition is process-wide.

mod support;

use std::io::Read;
use std::time::Duration;

use percore_test_kit::http::*;
use percore_test_kit::*;
use support::http::*;

fn default_sigpipe() {
    // SAFETY: setting a signal's disposition to SIG_DFL has no memory
    // effects; `signal` is async-signal-safe and the handler is not Rust.
    let previous = unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    assert_ne!(previous, libc::SIG_ERR, "signal(SIGPIPE, SIG_DFL)");
}

backend_tests! {
    parallel;
    /// B6: 20 clients reset while a 4 MiB response is being written, and
    /// 20 right after sending a request. No SIGPIPE; the errors are
    /// counted; the server keeps serving and every receive buffer and
    /// operation comes back.
    fn b6_reset_mid_response(backend) {
        default_sigpipe();
        let mut config = Config::default();
        config.limits.max_body = 8 << 20;
        let server = TestServer::echo_with(backend, config);
        let body = vec![b'r'; 4 << 20];
        let request = post("/", "a/b", &body);
        for _ in 0..20 {
            let mut c = Client::connect(server.addr);
            c.send(&request);
            let mut first = [0u8; 1024];
            let n = c.stream.read(&mut first).expect("start of the response");
            assert!(first[..n].starts_with(b"HTTP/1.1 200 OK"));
            c.reset();
        }
        for _ in 0..20 {
            let mut c = Client::connect(server.addr);
            c.send(&get("/"));
            c.reset();
        }
        wait_until(Duration::from_secs(60), "every connection to end", || {
            server.stats().active == 0
        }, |done| *done);
        assert_eq!(one(server.addr, &get("/")).body, HELLO);
        wait_until(Duration::from_secs(60), "buffers and operations back", || {
            let s = server.stats();
            s.ring_buffers_out == 0 && s.in_flight <= 2
        }, |done| *done);
        let stats = server.stats();
        println!("{backend}: {stats}");
        assert!(stats.errors_io >= 1, "the resets surfaced as I/O errors");
        assert_eq!(stats.panics, 0);
    }
}
