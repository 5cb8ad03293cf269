//! Outlier ejection (FAULTS F8) in the fan-out proxy, on both backends,
//! with scripted fake upstreams: traffic shifts away from an upstream that
//! fails requests in a row and comes back after the ejection time; at most
//! 10 % of the upstreams (at least one) are ejected at once; 503 when all
//! are (the 5xx answers that led there counted as such); a wide request
//! counts once per upstream, however many of its branches went there; and
//! an upstream that answers again after an ejection is logged as back.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use percore_handlers::proxy::Config as ProxyConfig;
use percore_test_kit::http::*;
use percore_test_kit::log_capture;
use percore_test_kit::upstream::{entries, Conn, Fake};
use percore_test_kit::*;
use support::fanout::{proxy, proxy_counted};

/// A fake that answers every request with 500.
fn failing() -> Fake {
    Fake::start(|mut c: Conn| {
        while c.read_request().is_some() {
            c.send(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nfail");
        }
    })
}

/// The first ejection's length in these tests.
const EJECTION: Duration = Duration::from_millis(500);

/// Ejection shortened for the tests: 5 failed requests in a row eject for
/// [`EJECTION`] (×n, at most 2 s); one branch per request.
fn short_ejection(c: &mut ProxyConfig) {
    c.width = 1;
    c.ejection.consecutive_failures = 5;
    c.ejection.base_time = EJECTION;
    c.ejection.max_time = Duration::from_secs(2);
}

/// One GET through `client`; returns (status, upstream of the single entry,
/// or the plain-text body).
fn one_get(client: &mut Client) -> (u16, String) {
    let r = client.roundtrip(&get("/"));
    if r.status == 200 {
        (200, entries(&r.body)[0].0.clone())
    } else {
        (r.status, String::from_utf8_lossy(&r.body).into_owned())
    }
}

/// Sends GETs (at most `max`) until `bad` has seen `count` requests;
/// returns the instant before the GET that brought it there, which is no
/// later than the start of the ejection that GET's failure caused.
fn until_requests(client: &mut Client, bad: &Fake, count: usize, max: usize) -> Instant {
    for _ in 0..max {
        let before = Instant::now();
        assert_eq!(one_get(client).0, 200);
        let seen = bad.requests().len();
        if seen >= count {
            assert_eq!(seen, count, "requests to the failing upstream");
            return before;
        }
    }
    panic!(
        "the failing upstream saw {} requests, not {count}",
        bad.requests().len()
    );
}

/// Ejection far longer than any test: every request after the one that
/// ejected an upstream falls inside it, however slow the machine.
fn long_ejection(c: &mut ProxyConfig) {
    short_ejection(c);
    c.ejection.base_time = Duration::from_secs(60);
    c.ejection.max_time = Duration::from_secs(60);
}

backend_tests! {
    parallel;
    /// F8: an upstream answering 500 is ejected after 5 in a row: the
    /// traffic shifts to the healthy one (an ejection longer than the
    /// test); with the shortened ejection it comes back after the
    /// ejection time, and a second run of failures ejects it for twice as
    /// long, as its WARN says (waits are lower bounds: a slow machine only
    /// makes them longer).
    fn f8_ejection_shifts_traffic(backend) {
        log_capture::install();
        let (bad, ok) = (failing(), Fake::answering_ok());
        let px = proxy(backend, &[bad.addr, ok.addr], long_ejection);
        let mut client = Client::connect(px.addr);
        // Round-robin: the requests alternate until the 5th to `bad`
        // ejects it.
        until_requests(&mut client, &bad, 5, 10);
        for i in 0..10 {
            assert_eq!(one_get(&mut client), (200, ok.addr.to_string()), "request {i} while ejected");
        }
        assert_eq!(bad.requests().len(), 5, "nothing sent to the ejected upstream");
        drop(px);

        let mark = log_capture::mark();
        let (bad, ok) = (failing(), Fake::answering_ok());
        let px = proxy(backend, &[bad.addr, ok.addr], short_ejection);
        let mut client = Client::connect(px.addr);
        until_requests(&mut client, &bad, 5, 10);
        // Back once it ends; its 5th failure in this run ejects it again.
        std::thread::sleep(EJECTION + Duration::from_millis(50));
        until_requests(&mut client, &bad, 10, 12);
        let ejected = |time: &str| {
            let what = format!("upstream {} ejected for {time} after 5 failed requests in a row", bad.addr);
            mark.lines_with(&[&what]).len()
        };
        assert_eq!((ejected("500ms"), ejected("1s")), (1, 1), "ejected for 500 ms, then twice as long");
        std::thread::sleep(2 * EJECTION + Duration::from_millis(50));
        let before = bad.requests().len();
        let _ = one_get(&mut client);
        let _ = one_get(&mut client);
        assert_eq!(bad.requests().len(), before + 1, "back after the second ejection");
    }

    /// F8: at most 10 % of the upstreams (at least one) are ejected at
    /// once; when every upstream is ejected the answer is 503 naming the
    /// reason (nothing sent; an ejection longer than the test, so the
    /// request surely falls inside it), until the ejection time passes
    /// (a shortened one, waited out: a lower bound).
    fn f8_all_ejected(backend) {
        let bad = failing();
        let (px, counted) = proxy_counted(backend, &[bad.addr], long_ejection);
        let mut client = Client::connect(px.addr);
        for _ in 0..5 {
            assert_eq!(one_get(&mut client), (200, bad.addr.to_string()), "a 500 is passed on");
        }
        let stats = counted.get();
        assert_eq!((stats.upstream_5xx, stats.failed, stats.ejections), (5, 0, 1), "{stats:?}");
        let (status, text) = one_get(&mut client);
        assert_eq!(status, 503, "{text}");
        assert!(text.contains("every upstream is ejected"), "{text}");
        assert!(text.contains(&format!("upstream {}: ejected after 5 failed requests in a row", bad.addr)), "{text}");
        assert_eq!(bad.requests().len(), 5, "nothing sent while ejected");
        drop(px);

        let bad = failing();
        let px = proxy(backend, &[bad.addr], short_ejection);
        let mut client = Client::connect(px.addr);
        for _ in 0..5 {
            assert_eq!(one_get(&mut client), (200, bad.addr.to_string()), "a 500 is passed on");
        }
        std::thread::sleep(EJECTION + Duration::from_millis(50));
        assert_eq!(one_get(&mut client), (200, bad.addr.to_string()), "back after the ejection");
        assert_eq!(bad.requests().len(), 6);

        // Two failing upstreams: 10 % of 2 rounds down, but one may be
        // ejected; the other must stay in, so the answer is never 503.
        let (b1, b2) = (failing(), failing());
        let px = proxy(backend, &[b1.addr, b2.addr], long_ejection);
        let mut client = Client::connect(px.addr);
        for _ in 0..20 {
            let (status, text) = one_get(&mut client);
            assert_eq!(status, 200, "{text}");
        }
        let (n1, n2) = (b1.requests().len(), b2.requests().len());
        assert_eq!(n1 + n2, 20);
        assert!(n1.min(n2) == 5 && n1.max(n2) == 15, "one ejected, the other kept: {n1} {n2}");
    }

    /// F8: the first good answer after an ejection is logged, so that an
    /// operator who read the ejection's WARN learns that it is over.
    fn f8_recovery_is_logged(backend) {
        let mark = log_capture::mark();
        let answered = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&answered);
        let flaky = Fake::start(move |mut c: Conn| {
            while c.read_request().is_some() {
                if seen.fetch_add(1, Ordering::SeqCst) < 5 {
                    c.send(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nfail");
                } else {
                    c.ok(b"fine");
                }
            }
        });
        let ok = Fake::answering_ok();
        let px = proxy(backend, &[flaky.addr, ok.addr], short_ejection);
        let mut client = Client::connect(px.addr);
        until_requests(&mut client, &flaky, 5, 10);
        let back = format!("upstream {} answers again after 1 ejection in a row", flaky.addr);
        assert!(mark.lines_with(&[&back]).is_empty(), "logged while ejected");
        std::thread::sleep(EJECTION + Duration::from_millis(50));
        until_requests(&mut client, &flaky, 6, 3);
        let lines = mark.lines_with(&[&back]);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("INFO"), "{lines:?}");
        // Once: later answers are ordinary successes.
        until_requests(&mut client, &flaky, 7, 3);
        assert_eq!(mark.lines_with(&[&back]).len(), 1);
    }

    /// F8 under concurrency: requests already on an upstream when it is
    /// ejected, which fail during the ejection, do not count toward the
    /// next one: after it the upstream again needs 5 failed requests in a
    /// row to be ejected.
    fn f8_failures_during_an_ejection_start_no_run(backend) {
        const BURST: usize = 8;
        // Holds every answer until the whole burst has arrived, so that
        // the last 3 failures come while the first 5 have ejected it.
        let gate = Arc::new((std::sync::Mutex::new(0usize), std::sync::Condvar::new()));
        let held = Arc::clone(&gate);
        let bad = Fake::start(move |mut c: Conn| {
            while c.read_request().is_some() {
                let (arrived, all_in) = &*held;
                let mut n = arrived.lock().unwrap_or_else(|e| e.into_inner());
                *n += 1;
                all_in.notify_all();
                let _ = all_in.wait_timeout_while(n, Duration::from_secs(60), |n| *n < BURST);
                c.send(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nfail");
            }
        });
        // The burst's last 3 answers are released with its first 5, so they
        // come within 3 s of the ejection on any machine; the wait after it
        // is a lower bound.
        let (px, counted) = proxy_counted(backend, &[bad.addr], |c| {
            short_ejection(c);
            c.ejection.base_time = Duration::from_secs(3);
            c.ejection.max_time = Duration::from_secs(3);
        });
        let addr = px.addr;
        let burst: Vec<_> = (0..BURST)
            .map(|_| std::thread::spawn(move || Client::connect(addr).roundtrip(&get("/")).status))
            .collect();
        for client in burst {
            assert_eq!(client.join().expect("client"), 200, "a 500 is passed on");
        }
        let stats = counted.get();
        assert_eq!((stats.upstream_5xx, stats.ejections), (BURST as u64, 1), "{stats:?}");
        std::thread::sleep(Duration::from_millis(3100));
        let mut client = Client::connect(px.addr);
        for i in 1..=5 {
            assert_eq!(one_get(&mut client), (200, bad.addr.to_string()), "request {i} after the ejection");
            let ejections = counted.get().ejections;
            assert_eq!(ejections, if i < 5 { 1 } else { 2 }, "after request {i}");
        }
    }

    /// F2 with F8: an upstream that takes requests and never answers
    /// fails each request at the deadline, and after 5 in a row is
    /// ejected, so the requests after it are answered by the others
    /// instead of all waiting out the deadline. The deadline (2 s) must
    /// outlast the healthy upstream's answer, which comes at once.
    fn f8_hung_upstream_is_ejected(backend) {
        let hung = Fake::start(|mut c: Conn| while c.read_request().is_some() {});
        let ok = Fake::answering_ok();
        let (px, counted) = proxy_counted(backend, &[hung.addr, ok.addr], |c| {
            short_ejection(c);
            c.width = 2;
            c.deadline = Duration::from_secs(2);
            c.ejection.base_time = Duration::from_secs(60);
            c.ejection.max_time = Duration::from_secs(60);
        });
        let mut client = Client::connect(px.addr);
        for i in 0..5 {
            let r = client.roundtrip(&get("/"));
            assert_eq!(r.status, 504, "request {i}: {}", String::from_utf8_lossy(&r.body));
        }
        let stats = counted.get();
        assert_eq!((stats.deadline, stats.ejections), (5, 1), "{stats:?}");
        let r = client.roundtrip(&get("/"));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let from: Vec<String> = entries(&r.body).into_iter().map(|e| e.0).collect();
        assert_eq!(from, [ok.addr.to_string(), ok.addr.to_string()], "both branches on the healthy one");
    }

    /// F8 at width 16 over two upstreams (8 branches on each per request):
    /// a request whose 8 branches on one upstream all get a 500 adds one
    /// failure to its run, not 8, so it takes 5 such requests in a row to
    /// eject it.
    fn f8_wide_request_counts_once(backend) {
        let (bad, ok) = (failing(), Fake::answering_ok());
        let px = proxy(backend, &[bad.addr, ok.addr], |c| {
            long_ejection(c);
            c.width = 16;
        });
        let mut client = Client::connect(px.addr);
        let from = |r: &Resp, addr: std::net::SocketAddr| {
            entries(&r.body).iter().filter(|e| e.0 == addr.to_string()).count()
        };
        for i in 1..=5 {
            let r = client.roundtrip(&get("/"));
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            assert_eq!((from(&r, bad.addr), from(&r, ok.addr)), (8, 8), "request {i}: bad still in");
        }
        assert_eq!(bad.requests().len(), 40);
        let r = client.roundtrip(&get("/"));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!((from(&r, bad.addr), from(&r, ok.addr)), (0, 16), "ejected after the 5th request");
        assert_eq!(bad.requests().len(), 40, "no traffic while ejected");
    }
}
