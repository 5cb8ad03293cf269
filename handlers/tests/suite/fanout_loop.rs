//! Loop detection through `Via`, on both backends: a proxy whose
//! sub-requests come back to it answers them 508 without fanning them out
//! again, while a chain of two distinct proxies forwards as usual.

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::Duration;

use percore_test_kit::http::*;
use percore_test_kit::log_capture;
use percore_test_kit::upstream::{entries, eventually, Fake};
use percore_test_kit::*;
use support::fanout::proxy_counted;

/// A TCP forwarder on `127.0.0.1:0`: each connection is piped, both ways,
/// to the address set in `to` (set after the proxy it points at started:
/// the proxy needs the forwarder's address first). Threads end when either
/// side closes, or after 10 s idle.
fn forwarder(to: Arc<OnceLock<SocketAddr>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the forwarder");
    let addr = listener.local_addr().expect("addr");
    thread::spawn(move || {
        for inbound in listener.incoming() {
            let Ok(inbound) = inbound else { return };
            let Some(&target) = to.get() else { continue };
            let Ok(outbound) = TcpStream::connect(target) else {
                continue;
            };
            for (from, into) in [(&inbound, &outbound), (&outbound, &inbound)] {
                let (Ok(mut from), Ok(mut into)) = (from.try_clone(), into.try_clone()) else {
                    continue;
                };
                let _ = from.set_read_timeout(Some(Duration::from_secs(60)));
                thread::spawn(move || {
                    let mut buf = [0u8; 16 * 1024];
                    while let Ok(n @ 1..) = from.read(&mut buf) {
                        if into.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = into.shutdown(std::net::Shutdown::Write);
                });
            }
        }
    });
    addr
}

backend_tests! {
    parallel;
    /// 1. A proxy (width 2) whose upstream is a forwarder back to itself.
    /// 2. A client's GET is fanned out once; both sub-requests come back
    /// carrying the proxy's own `Via` element and are answered 508 at once,
    /// not fanned out again, so the client's answer is a 200 with the two
    /// 508s in it (a request fanned out again would wait for the 30 s
    /// deadline and carry a 504). 3. The counters and the log say so.
    fn sub_requests_that_come_back_are_answered_508(backend) {
        log_capture::install();
        // 1.
        let to = Arc::new(OnceLock::new());
        let loop_addr = forwarder(to.clone());
        let name = format!("px-loop-{backend}");
        let (px, counters) = proxy_counted(backend, &[loop_addr], |c| {
            c.width = 2;
            c.deadline = Duration::from_secs(30);
            c.pseudonym = name.clone();
        });
        to.set(px.addr).expect("set once");
        // 2.
        let mut c = Client::connect(px.addr);
        let r = c.roundtrip(&get("/around"));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let e = entries(&r.body);
        assert_eq!(e.len(), 2, "{e:?}");
        for (upstream, status, body) in &e {
            assert_eq!(upstream, &loop_addr.to_string());
            assert_eq!(*status, 508, "{body}");
            assert_eq!(
                body,
                &format!("loop detected: this request already passed through this proxy (1.1 {name} in its Via)\n")
            );
        }
        drop(c);
        // 3.
        let stats = counters.get();
        assert_eq!((stats.requests, stats.sub_requests, stats.loops), (1, 2, 2), "{stats}");
        let warned = log_capture::warnings(&format!("its Via lists {name}"));
        assert!(
            warned.iter().any(|l| l.contains("loop detected") && l.contains("answered 508")),
            "{warned:?}"
        );
    }

    /// A request from a client that already carries the proxy's element
    /// (a loop through proxies of other kinds) is answered 508 directly,
    /// with a body, and nothing reaches the upstream; the connection stays
    /// usable.
    fn a_request_naming_this_proxy_is_not_forwarded(backend) {
        let rec = Fake::answering_ok();
        let (px, counters) = proxy_counted(backend, &[rec.addr], |c| c.pseudonym = "px-me".into());
        let mut c = Client::connect(px.addr);
        let r = c.roundtrip(b"GET /x HTTP/1.1\r\nHost: a\r\nVia: 1.0 edge (a, b), 1.1 px-me (percore)\r\n\r\n");
        assert_eq!(r.status, 508);
        assert!(!r.closes(), "a loop is no reason to close the client's connection");
        assert!(String::from_utf8_lossy(&r.body).starts_with("loop detected"));
        // Another proxy's name is no loop.
        let r = c.roundtrip(b"GET /y HTTP/1.1\r\nHost: a\r\nVia: 1.1 px-me-too, 1.1 other\r\n\r\n");
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(rec.requests().len(), 1, "only the second was forwarded");
        let stats = counters.get();
        assert_eq!((stats.requests, stats.loops), (1, 1), "{stats}");
    }

    /// A chain of two distinct proxies, A in front of B in front of a
    /// recording upstream, forwards as usual: the upstream sees both
    /// names in `Via`, in order, and neither proxy counts a loop.
    fn a_chain_of_two_proxies_is_no_loop(backend) {
        let rec = Fake::answering_ok();
        let (b, b_counters) = proxy_counted(backend, &[rec.addr], |c| c.pseudonym = "px-b".into());
        let (a, a_counters) = proxy_counted(backend, &[b.addr], |c| c.pseudonym = "px-a".into());
        let mut c = Client::connect(a.addr);
        let r = c.roundtrip(&get("/chain"));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let outer = entries(&r.body);
        assert_eq!(outer.len(), 1);
        assert_eq!((outer[0].0.as_str(), outer[0].1), (b.addr.to_string().as_str(), 200));
        let inner = entries(outer[0].2.as_bytes());
        assert_eq!(inner.len(), 1);
        assert_eq!(inner[0].2, "ok");
        let seen = String::from_utf8_lossy(&rec.requests()[0]).to_ascii_lowercase();
        assert!(seen.contains("\r\nvia: 1.1 px-a, 1.1 px-b\r\n"), "{seen}");
        drop(c);
        assert!(eventually(Duration::from_secs(60), || b_counters.get().requests == 1));
        assert_eq!(a_counters.get().loops + b_counters.get().loops, 0);
    }
}
