//! The fan-out proxy at a graceful stop, on both backends. A fan-out still
//! waiting on its upstreams near the drain deadline (2 s on the test
//! servers) is answered 503 by the HTTP layer, its branches cancelled, and
//! counted as `stopped`; one whose upstreams answer in time is answered as
//! usual, with `Connection: close`.

use crate::support;

use std::time::{Duration, Instant};

use percore_test_kit::http::*;
use percore_test_kit::upstream::{entries, eventually, Conn, Fake};
use percore_test_kit::*;
use support::fanout::{proxy_counted, proxy_counted_draining};

/// The test server's drain (see `TestServer::start`).
const DRAIN: Duration = Duration::from_secs(2);

backend_tests! {
    parallel;
    /// 1. A GET waits on an upstream that never answers (the proxy's own
    /// deadline, 10 s, is far past the drain's). 2. The stop begins. 3. The
    /// client gets a 503 saying the server is stopping, with `Connection:
    /// close`, at the cut-off (the drain deadline would close without an
    /// answer; not long after the stop, a lower bound), then the close.
    /// 4. The branch was
    /// cancelled (the upstream sees its connection closed), and the proxy
    /// counts the request as stopped, not failed. 5. The server stops.
    fn a_fan_out_waiting_at_the_drain_deadline_gets_503(backend) {
        let up = Fake::start(|mut c: Conn| {
            if c.read_request().is_some() {
                c.wait_close(Duration::from_secs(60));
            }
        });
        let (mut px, counters) =
            proxy_counted(backend, &[up.addr], |c| c.deadline = Duration::from_secs(10));
        let mut c = Client::connect(px.addr);
        // 1.
        c.send(&get("/slow"));
        assert!(eventually(Duration::from_secs(60), || up.requests().len() == 1), "the sub-request arrived");
        // 2.
        let stopped = Instant::now();
        px.begin_stop();
        // 3.
        let r = c.response();
        let answered = stopped.elapsed();
        assert_eq!(r.status, 503, "{:?}", String::from_utf8_lossy(&r.body));
        assert!(r.closes(), "{:?}", r.headers);
        assert_eq!(r.body, b"Service Unavailable: the server is stopping\n");
        assert!(answered >= DRAIN / 2, "answered after {answered:?}");
        c.expect_eof();
        drop(c);
        // 4.
        assert!(eventually(Duration::from_secs(60), || up.closed_by_peer() == 1), "the branch was cancelled");
        let stats = counters.get();
        assert_eq!((stats.requests, stats.stopped, stats.failed), (1, 1, 0), "{stats}");
        // 5.
        assert!(px.stop_within(Duration::from_secs(60)).is_some(), "the proxy stopped");
    }

    /// A fan-out whose upstream answers 300 ms after the stop began, long
    /// before the cut-off (the drain is two minutes here, so no slow
    /// machine brings the cut-off first), is answered as usual (200, one
    /// entry) and closes the connection; nothing counts as stopped.
    fn a_fan_out_answered_in_time_is_not_cut_off(backend) {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let rx = std::sync::Mutex::new(rx);
        let up = Fake::start(move |mut c: Conn| {
            if c.read_request().is_some() {
                // Answers once the test says the stop has begun.
                let _ = rx.lock().unwrap_or_else(|e| e.into_inner()).recv_timeout(Duration::from_secs(60));
                std::thread::sleep(Duration::from_millis(300));
                c.ok(b"late but in time");
                c.wait_close(Duration::from_secs(60));
            }
        });
        let (mut px, counters) = proxy_counted_draining(backend, &[up.addr], Duration::from_secs(120), |_| {});
        let mut c = Client::connect(px.addr);
        c.send(&get("/in-time"));
        assert!(eventually(Duration::from_secs(60), || up.requests().len() == 1), "the sub-request arrived");
        px.begin_stop();
        tx.send(()).expect("the upstream waits");
        let r = c.response();
        assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
        assert!(r.closes(), "the last answer of a stopping server closes");
        let e = entries(&r.body);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].2, "late but in time");
        c.expect_eof();
        drop(c);
        let stats = counters.get();
        assert_eq!((stats.requests, stats.stopped, stats.failed), (1, 0, 0), "{stats}");
        assert!(px.stop_within(Duration::from_secs(60)).is_some(), "the proxy stopped");
    }
}
