//! FAULTS.md section F against the fan-out proxy, on both backends, with
//! scripted fake upstreams: refused, blackhole, connect hang, reset,
//! truncated, garbage, oversized head, CL+TE, the keep-alive reuse race,
//! fail-fast cancellation, a slow or refusing mirror, the pending-request
//! breaker, smuggling and hop-by-hop fields. Every case checks the status
//! and body, then that the next request succeeds. Outlier ejection (F8) is
//! in `fanout_ejection.rs`.

use crate::support;

use std::net::SocketAddr;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use percore_handlers::proxy::Policy;
use percore_test_kit::http::*;
use percore_test_kit::upstream::{entries, eventually, refused_addr, Conn, Fake};
use percore_test_kit::*;
use support::fanout::proxy;

/// Sends `req` through a fresh client; returns the response and its body text.
fn ask(addr: SocketAddr, req: &[u8]) -> (Resp, String) {
    let r = Client::connect(addr).roundtrip(req);
    let text = String::from_utf8_lossy(&r.body).into_owned();
    (r, text)
}

/// A listener whose accept queue is full and never drained: a connect to
/// it hangs (the SYN is dropped), as with an unanswered SYN (FAULTS F3).
struct FullBacklog {
    fd: libc::c_int,
    addr: SocketAddr,
    _fillers: Vec<std::net::TcpStream>,
}

impl FullBacklog {
    fn new() -> Option<FullBacklog> {
        // SAFETY: plain socket calls on a descriptor this function owns;
        // the sockaddr structs are sized and initialised for AF_INET.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            assert!(fd >= 0);
            let mut sa: libc::sockaddr_in = std::mem::zeroed();
            sa.sin_family = libc::AF_INET as u16;
            sa.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            assert_eq!(
                libc::bind(fd, (&sa as *const libc::sockaddr_in).cast(), len),
                0
            );
            assert_eq!(libc::listen(fd, 0), 0);
            let mut out: libc::sockaddr_in = std::mem::zeroed();
            let mut olen = len;
            assert_eq!(
                libc::getsockname(fd, (&mut out as *mut libc::sockaddr_in).cast(), &mut olen),
                0
            );
            let addr = SocketAddr::from(([127, 0, 0, 1], u16::from_be(out.sin_port)));
            let mut fillers = Vec::new();
            for _ in 0..8 {
                match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                    Ok(s) => fillers.push(s),
                    Err(_) => {
                        return Some(FullBacklog {
                            fd,
                            addr,
                            _fillers: fillers,
                        })
                    }
                }
            }
            libc::close(fd);
            None
        }
    }
}

impl Drop for FullBacklog {
    fn drop(&mut self) {
        // SAFETY: closes the descriptor made in `new`, once.
        unsafe { libc::close(self.fd) };
    }
}

backend_tests! {
    parallel;
    /// F1: a refused upstream is a 502 naming it and the refusal (not the
    /// connect timeout, which it does not wait for); GET is retried once
    /// on the next upstream (one connect attempt each), POST is not.
    fn f1_refused(backend) {
        let dead = refused_addr();
        let px = proxy(backend, &[dead], |_| {});
        let (r, text) = ask(px.addr, &get("/"));
        assert_eq!(r.status, 502, "{text}");
        // The OS's own reason and number, e.g. "Connection refused (os error 111)".
        let refused = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert!(text.contains(&format!("upstream {dead}: connect failed: {refused}")), "{text}");
        assert!(text.contains("(os error "), "{text}");
        // The refusal itself, not the connect timeout (30 s here) waited out.
        assert!(!text.contains("timed out"), "{text}");

        let ok = Fake::answering_ok();
        let px = proxy(backend, &[dead, ok.addr], |c| c.width = 1);
        let (r, text) = ask(px.addr, &get("/"));
        assert_eq!(r.status, 200, "{text}");
        assert_eq!(entries(&r.body)[0].0, ok.addr.to_string(), "answered by the next upstream");
        assert_eq!(ok.accepted(), 1);
        // The round-robin moves on to `ok` for the second request; the
        // third starts at `dead` again: a POST there makes one attempt.
        assert_eq!(ask(px.addr, &get("/")).0.status, 200);
        let before = ok.requests().len();
        let (r, text) = ask(px.addr, &post("/", "text/plain", b"once"));
        assert_eq!(r.status, 502, "{text}");
        assert_eq!(ok.requests().len(), before, "POST never moved to another upstream");
    }

    /// F1 + F2: a GET whose connect is refused moves to the next upstream,
    /// which never answers: the 504 names that upstream, the one actually
    /// used last, and then the refused one it moved there after. A reset
    /// there is a 502 naming both the same way.
    fn retried_branch_names_upstream_used_last(backend) {
        let dead = refused_addr();
        let hole = Fake::start(|mut c: Conn| {
            let _ = c.read_request();
            c.wait_close(Duration::from_secs(60));
        });
        let px = proxy(backend, &[dead, hole.addr], |c| {
            c.width = 1;
            c.deadline = Duration::from_millis(300);
        });
        let (r, text) = ask(px.addr, &get("/"));
        assert_eq!(r.status, 504, "{text}");
        let refused = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(
            text,
            format!(
                "upstream {}: no answer before the deadline (moved there after upstream {dead}: connect failed: {refused})\n",
                hole.addr
            )
        );
        assert_eq!(hole.accepted(), 1, "the retry went to the second upstream");

        let rst = Fake::start(|mut c: Conn| {
            if c.read_request().is_some() {
                c.reset();
            }
        });
        let px = proxy(backend, &[dead, rst.addr], |c| c.width = 1);
        let (r, text) = ask(px.addr, &get("/"));
        assert_eq!(r.status, 502, "{text}");
        assert!(text.starts_with(&format!("upstream {}: ", rst.addr)), "{text}");
        assert!(text.ends_with(&format!(" (moved there after upstream {dead}: connect failed: {refused})\n")), "{text}");
    }

    /// F2: an upstream that reads and never answers: 504 at the deadline
    /// (not before it), and its connection is closed, not pooled.
    fn f2_blackhole(backend) {
        let hole = Fake::start(|mut c: Conn| {
            let _ = c.read_request();
            c.wait_close(Duration::from_secs(60));
        });
        let px = proxy(backend, &[hole.addr], |c| c.deadline = Duration::from_millis(300));
        let started = Instant::now();
        let (r, text) = ask(px.addr, &get("/"));
        let took = started.elapsed();
        assert_eq!(r.status, 504, "{text}");
        assert!(text.contains("no answer before the deadline"), "{text}");
        assert!(took >= Duration::from_millis(280), "{took:?}");
        assert!(eventually(Duration::from_secs(60), || hole.closed_by_peer() == 1), "connection dropped");
        // The next request opens a new connection (none was pooled).
        let _ = ask(px.addr, &get("/"));
        assert_eq!(hole.accepted(), 2);
    }

    /// F3: a connect that hangs fails at the connect timeout with 504,
    /// long before the deadline: the text says which of the two fired.
    fn f3_connect_hangs(backend) {
        let Some(full) = FullBacklog::new() else {
            println!("skipped: could not fill a listen backlog here");
            return;
        };
        let px = proxy(backend, &[full.addr], |c| {
            c.connect_timeout = Duration::from_millis(200);
            c.deadline = Duration::from_secs(60);
        });
        let started = Instant::now();
        let (r, text) = ask(px.addr, &get("/"));
        assert_eq!(r.status, 504, "{text}");
        assert!(text.contains("connect timed out"), "{text}");
        assert!(!text.contains("deadline"), "{text}");
        assert!(started.elapsed() >= Duration::from_millis(180), "{:?}", started.elapsed());
    }

    /// F4: reset mid-response, truncated body, garbage status line, head
    /// over the limit, CL+TE: each a 502 with its reason, the upstream
    /// connection closed, and the next request served.
    fn f4_bad_responses(backend) {
        // (reason expected, reply, then: 0 wait for the proxy's close,
        // 1 reset, 2 close with FIN).
        let cases: [(&str, &[u8], u8); 5] = [
            ("connection failed", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc", 1),
            ("response truncated", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc", 2),
            ("malformed status line", b"HTTP/1.1 OK 200 lol\r\n\r\n", 0),
            ("Content-Length with Transfer-Encoding",
             b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 0),
            ("response head over the limit", b"", 0),
        ];
        for (why, reply, then) in cases {
            let reply = reply.to_vec();
            let fake = Fake::start(move |mut c: Conn| {
                if c.read_request().is_none() {
                    return;
                }
                if c.index > 0 {
                    // Later connections answer properly.
                    c.ok(b"fine");
                    while c.read_request().is_some() { c.ok(b"fine"); }
                    return;
                }
                if reply.is_empty() {
                    let big = format!("HTTP/1.1 200 OK\r\nX-Big: {}\r\n\r\n", "b".repeat(40 * 1024));
                    c.send(big.as_bytes());
                } else {
                    c.send(&reply);
                }
                if then == 1 {
                    std::thread::sleep(Duration::from_millis(20));
                    c.reset();
                } else if then == 2 {
                    drop(c);
                } else if !c.wait_close(Duration::from_secs(60)) {
                    panic!("the proxy kept a connection after a bad response");
                }
            });
            let px = proxy(backend, &[fake.addr], |_| {});
            let mut client = Client::connect(px.addr);
            let r = client.roundtrip(&get("/"));
            let text = String::from_utf8_lossy(&r.body).into_owned();
            assert_eq!(r.status, 502, "{why}: {text}");
            assert!(text.contains(why) && text.contains(&fake.addr.to_string()), "{why}: {text}");
            let r = client.roundtrip(&get("/"));
            assert_eq!((r.status, entries(&r.body)[0].2.as_str()), (200, "fine"), "{why}: next request");
            assert_eq!(fake.accepted(), 2, "{why}: the bad connection was not reused");
        }
    }

    /// F5: the upstream closes a pooled connection as it is reused (it
    /// reads the request and closes without answering). GET: retried once
    /// on a fresh connection, 200. POST: never retried, 502. An idle close
    /// the proxy can see before sending is skipped without a retry.
    fn f5_keepalive_race(backend) {
        // Connection 0 answers once, then closes on the next request.
        let fake = Fake::start(|mut c: Conn| {
            if c.index == 0 || c.index == 2 {
                if c.read_request().is_some() { c.ok(b"first"); }
                let _ = c.read_request();
                return; // closes with the request unanswered
            }
            while c.read_request().is_some() { c.ok(b"fresh"); }
        });
        let px = proxy(backend, &[fake.addr], |_| {});
        let mut client = Client::connect(px.addr);
        assert_eq!(client.roundtrip(&get("/1")).status, 200);
        let r = client.roundtrip(&get("/2"));
        assert_eq!((r.status, entries(&r.body)[0].2.as_str()), (200, "fresh"), "GET retried");
        assert_eq!(fake.accepted(), 2);

        // Connection 2: answer, then close on the POST.
        let px2 = proxy(backend, &[fake.addr], |_| {});
        let mut client = Client::connect(px2.addr);
        assert_eq!(entries(&client.roundtrip(&get("/3")).body)[0].2, "first");
        let r = client.roundtrip(&post("/4", "text/plain", b"pay"));
        let text = String::from_utf8_lossy(&r.body).into_owned();
        assert_eq!(r.status, 502, "POST is not retried: {text}");
        assert_eq!(fake.accepted(), 3, "no new connection for the POST");

        // An upstream with a short keep-alive closes idle connections; the
        // proxy notices before reuse, so even a POST succeeds.
        let short = Fake::start(|mut c: Conn| {
            while c.read_request().is_some() {
                c.ok(b"ka");
                c.stream.set_read_timeout(Some(Duration::from_millis(100))).ok();
            }
        });
        let px3 = proxy(backend, &[short.addr], |_| {});
        let mut client = Client::connect(px3.addr);
        assert_eq!(client.roundtrip(&get("/a")).status, 200);
        // Let the upstream's 100 ms keep-alive run out: once its script has
        // returned, its close is on its way to the proxy's idle pooled
        // connection (loopback: there before the POST is sent).
        assert!(eventually(Duration::from_secs(60), || short.finished() == 1), "the upstream closed");
        let r = client.roundtrip(&post("/b", "text/plain", b"x"));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(short.accepted(), 2);
    }

    /// F5 at width 100: one request checks out 100 pooled connections in
    /// one task poll, past the task's I/O budget; each must still be
    /// checked, so the connections the upstream closed while idle (every
    /// other one here) are skipped and a POST (never retried) succeeds on
    /// every branch.
    fn f5_idle_closes_seen_at_any_width(backend) {
        let short = Fake::start(|mut c: Conn| {
            let idle = Duration::from_millis(if c.index % 2 == 1 { 100 } else { 60_000 });
            while c.read_request().is_some() {
                c.ok(b"ka");
                c.stream.set_read_timeout(Some(idle)).ok();
            }
        });
        let px = proxy(backend, &[short.addr], |c| c.width = 100);
        let mut client = Client::connect(px.addr);
        assert_eq!(client.roundtrip(&get("/a")).status, 200);
        let pooled = short.accepted();
        // Every other connection's 100 ms keep-alive runs out: wait until
        // the upstream closed each of them.
        assert!(eventually(Duration::from_secs(60), || short.finished() == pooled / 2),
            "{} of {} closed by the upstream", short.finished(), pooled / 2);
        let r = client.roundtrip(&post("/b", "text/plain", b"x"));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(entries(&r.body).len(), 100);
        assert!(short.accepted() >= pooled + 50, "stale pooled connections were reused");
    }

    /// F5 without traffic: pooled connections are closed by the proxy
    /// itself, with no request to find them: one the upstream closed (it
    /// would otherwise sit half-closed, in CLOSE_WAIT) within a sweep of
    /// the pool, and one merely idle once its idle timeout has passed.
    fn f5_idle_pool_is_swept_without_traffic(backend) {
        let closing = Fake::start(|mut c: Conn| {
            if c.read_request().is_some() {
                c.ok(b"bye");
                let _ = c.stream.shutdown(std::net::Shutdown::Write);
                c.wait_close(Duration::from_secs(60));
            }
        });
        let idle = Fake::start(|mut c: Conn| {
            if c.read_request().is_some() {
                c.ok(b"idle");
                c.wait_close(Duration::from_secs(60));
            }
        });
        let px = proxy(backend, &[closing.addr, idle.addr], |c| {
            c.width = 2;
            c.pool.idle_timeout = Duration::from_millis(400);
        });
        // Before the request, so no later than the proxy's idle clock
        // starts: a busy machine that slows the answer cannot make the
        // close look early.
        let started = Instant::now();
        let (r, text) = ask(px.addr, &get("/"));
        assert_eq!(r.status, 200, "{text}");
        assert!(eventually(Duration::from_secs(60), || closing.closed_by_peer() == 1),
            "the connection the upstream closed is still open");
        assert!(eventually(Duration::from_secs(60), || idle.closed_by_peer() == 1),
            "the expired connection is still open");
        assert!(started.elapsed() >= Duration::from_millis(300), "closed before its idle timeout");
    }

    /// F6: one of three branches resets (fail-fast under `all`): 502 at the
    /// time of the failure, the slow siblings' connections closed. The
    /// siblings never answer and the deadline is past the client's read
    /// guard, so an answer at all shows the proxy did not wait for them.
    fn f6_fail_fast(backend) {
        let slow = || Fake::start(|mut c: Conn| {
            let _ = c.read_request();
            c.wait_close(Duration::from_secs(120));
        });
        let (a, b) = (slow(), slow());
        let rst = Fake::start(|mut c: Conn| {
            if c.read_request().is_some() {
                std::thread::sleep(Duration::from_millis(50));
                c.reset();
            }
        });
        let px = proxy(backend, &[a.addr, rst.addr, b.addr], |c| c.deadline = Duration::from_secs(120));
        let (r, text) = ask(px.addr, &get("/"));
        assert_eq!(r.status, 502, "{text}");
        assert!(text.contains(&rst.addr.to_string()), "{text}");
        assert!(!text.contains("deadline"), "fail-fast, not the deadline: {text}");
        assert!(eventually(Duration::from_secs(60), || a.closed_by_peer() == 1 && b.closed_by_peer() == 1),
            "siblings cancelled and their connections closed");
    }

    /// F7: a shadow (mirror) that answers nothing until every answer to
    /// the client is in delays neither the answers nor the next request
    /// on the same client connection (a request that waited for it would
    /// never be answered: the deadline is past the client's read guard),
    /// and still gets its copies, bodies included; a shadow that refuses
    /// connections changes nothing for the client.
    fn f7_slow_mirror(backend) {
        let primary = Fake::answering_ok();
        let release = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let held = release.clone();
        let shadow = Fake::start(move |mut c: Conn| {
            while c.read_request().is_some() {
                while !held.load(std::sync::atomic::Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                c.ok(b"shadow");
            }
        });
        let px = proxy(backend, &[primary.addr], |c| {
            c.mirror = Some(shadow.addr.into());
            c.deadline = Duration::from_secs(120);
        });
        let mut client = Client::connect(px.addr);
        for i in 0..20 {
            let req = if i == 0 {
                post("/m0", "text/plain", b"copy me")
            } else {
                get(&format!("/m{i}"))
            };
            let r = client.roundtrip(&req);
            assert_eq!(r.status, 200, "request {i}: {}", String::from_utf8_lossy(&r.body));
            assert_eq!(entries(&r.body)[0].0, primary.addr.to_string());
        }
        // Every answer came while the shadow answered nothing.
        release.store(true, std::sync::atomic::Ordering::SeqCst);
        let copied = |path: &[u8]| shadow.requests().iter().any(|r| r.windows(path.len()).any(|w| w == path));
        assert!(eventually(Duration::from_secs(60), || copied(b"POST /m0 ") && copied(b"\r\n\r\ncopy me")),
            "the shadow never got the POST with its body");
        assert!(eventually(Duration::from_secs(60), || copied(b"GET /m1 ")), "the shadow never got a GET");

        let px = proxy(backend, &[primary.addr], |c| c.mirror = Some(refused_addr().into()));
        let mut client = Client::connect(px.addr);
        for i in 0..10 {
            let r = client.roundtrip(&get("/"));
            assert_eq!(r.status, 200, "request {i} with a refusing mirror");
        }
    }

    /// Deadline with a policy still met: `quorum:2` of fast, fast, hole:
    /// 200 with two entries, and the hole's cut-off branch closed at the
    /// deadline; then `all` of fast and hole: 504 at the deadline naming
    /// the hole only. The deadline (5 s) must outlast the fast upstreams'
    /// answers, which come at once: far past any scheduling delay.
    fn deadline_with_quorum(backend) {
        let (f1, f2) = (Fake::answering_ok(), Fake::answering_ok());
        let hole = Fake::start(|mut c: Conn| { let _ = c.read_request(); c.wait_close(Duration::from_secs(60)); });
        let px = proxy(backend, &[f1.addr, f2.addr, hole.addr], |c| {
            c.policy = Policy::Quorum(2);
            c.deadline = Duration::from_secs(5);
        });
        let (r, text) = ask(px.addr, &get("/"));
        assert_eq!(r.status, 200, "{text}");
        assert_eq!(entries(&r.body).len(), 2);
        assert!(eventually(Duration::from_secs(60), || hole.closed_by_peer() == 1), "hole branch cancelled");
        let px = proxy(backend, &[f1.addr, hole.addr], |c| {
            c.policy = Policy::All;
            c.deadline = Duration::from_secs(5);
        });
        let (r, text) = ask(px.addr, &get("/"));
        assert_eq!(r.status, 504, "{text}");
        assert!(text.contains(&format!("upstream {}: no answer", hole.addr)), "{text}");
        assert!(!text.contains(&f1.addr.to_string()), "only the late one is named: {text}");
    }

    /// F9: with `max_pending` 8, 64 concurrent requests against an
    /// upstream that holds every request until the test lets it answer:
    /// exactly 8 are fanned out, the other 56 get 503 while those 8 are
    /// still held (refused at once, not queued behind them), the 8 are
    /// served once let go, and the core serves again after.
    fn f9_pending_breaker(backend) {
        use std::sync::atomic::{AtomicBool, Ordering};
        let release = Arc::new(AtomicBool::new(false));
        let held = release.clone();
        let slow = Fake::start(move |mut c: Conn| {
            while c.read_request().is_some() {
                while !held.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                c.ok(b"slow");
            }
        });
        let px = proxy(backend, &[slow.addr], |c| c.max_pending = 8);
        let addr = px.addr;
        let barrier = Arc::new(Barrier::new(64));
        let (tx, rx) = std::sync::mpsc::channel();
        let threads: Vec<_> = (0..64)
            .map(|_| {
                let (barrier, tx) = (barrier.clone(), tx.clone());
                std::thread::spawn(move || {
                    let mut client = Client::connect(addr);
                    barrier.wait();
                    let r = client.roundtrip(&get("/"));
                    let _ = tx.send((r.status, String::from_utf8_lossy(&r.body).into_owned()));
                })
            })
            .collect();
        let next = || rx.recv_timeout(Duration::from_secs(60)).expect("an answer");
        // While the upstream holds the first 8, the rest are refused.
        let refused: Vec<_> = (0..56).map(|_| next()).collect();
        for (status, text) in &refused {
            assert_eq!(*status, 503, "{text}");
            assert!(text.contains("max_pending"), "{text}");
        }
        assert!(eventually(Duration::from_secs(60), || slow.requests().len() == 8),
            "{} requests reached the upstream, not the 8 admitted", slow.requests().len());
        release.store(true, Ordering::SeqCst);
        let served: Vec<_> = (0..8).map(|_| next()).collect();
        for (status, text) in &served {
            assert_eq!(*status, 200, "{text}");
            assert_eq!(entries(text.as_bytes())[0].2, "slow", "{text}");
        }
        for t in threads {
            t.join().expect("client thread");
        }
        assert_eq!(slow.requests().len(), 8, "refused requests never reach the upstream");
        // Every slot was released.
        for _ in 0..2 {
            let (r, text) = ask(addr, &get("/"));
            assert_eq!(r.status, 200, "{text}");
        }
    }

    /// F10 + A13: smuggling payloads are refused by the proxy itself and
    /// never reach the upstream; a bare-LF request is forwarded with CRLF.
    fn f10_smuggling(backend) {
        let rec = Fake::answering_ok();
        let px = proxy(backend, &[rec.addr], |_| {});
        let payloads: [&[u8]; 5] = [
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 0\r\n\r\nx",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
        ];
        for p in payloads {
            let reply = exchange(px.addr, p);
            let status = &reply[..reply.len().min(12)];
            assert!(status.starts_with(b"HTTP/1.1 4") || status.starts_with(b"HTTP/1.1 5"),
                "{:?} -> {:?}", String::from_utf8_lossy(p), String::from_utf8_lossy(&reply));
        }
        assert_eq!(rec.requests().len(), 0, "nothing forwarded");
        let r = one(px.addr, b"POST /lf HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\n\n3\r\nabc\r\n0\r\n\r\n");
        assert_eq!(r.status, 200);
        let fwd = rec.requests().pop().expect("forwarded");
        for (i, &b) in fwd.iter().enumerate() {
            if b == b'\n' { assert_eq!(fwd.get(i.wrapping_sub(1)), Some(&b'\r'), "bare LF forwarded"); }
        }
        let text = String::from_utf8_lossy(&fwd).to_ascii_lowercase();
        assert!(text.contains("content-length: 3\r\n\r\nabc") && !text.contains("transfer-encoding"), "{text}");
    }

    /// F11: hop-by-hop fields and those named in `Connection` are stripped;
    /// `Via` and `X-Forwarded-For` are appended.
    fn f11_hop_by_hop(backend) {
        let rec = Fake::answering_ok();
        let px = proxy(backend, &[rec.addr], |c| c.pseudonym = "px-f11".into());
        let r = one(px.addr, b"GET /h HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Foo\r\nX-Foo: 1\r\n\
            Keep-Alive: timeout=5\r\nTE: trailers\r\nUpgrade: websocket\r\nProxy-Connection: x\r\n\
            X-Forwarded-For: 10.1.1.1\r\nVia: 1.0 edge\r\nX-Keep: yes\r\n\r\n");
        assert_eq!(r.status, 200);
        let fwd = String::from_utf8_lossy(&rec.requests().pop().expect("forwarded")).to_ascii_lowercase();
        for gone in ["connection:", "x-foo", "keep-alive", "\r\nte:", "upgrade", "proxy-connection"] {
            assert!(!fwd.contains(gone), "{gone} forwarded: {fwd}");
        }
        assert!(fwd.contains("x-keep: yes"), "{fwd}");
        assert!(fwd.contains("via: 1.0 edge, 1.1 px-f11\r\n"), "{fwd}");
        assert!(fwd.contains("x-forwarded-for: 10.1.1.1, 127.0.0.1\r\n"), "{fwd}");
        assert!(fwd.contains(&format!("host: {}\r\n", rec.addr)), "{fwd}");
    }
}
