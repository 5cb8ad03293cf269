//! The fan-out proxy in front of three in-process `http_echo` upstreams, on
//! both backends: GET and POST, every policy, round-robin width, and
//! keep-alive reuse of upstream connections.

use crate::support;

use std::time::Duration;

use percore_handlers::proxy::Policy;
use percore_test_kit::http::*;
use percore_test_kit::upstream::{entries, refused_addr};
use percore_test_kit::*;
use support::fanout::proxy;
use support::http::*;

/// Three echo upstreams and their addresses.
fn echoes(backend: Backend) -> (Vec<TestServer>, Vec<std::net::SocketAddr>) {
    let servers: Vec<TestServer> = (0..3).map(|_| TestServer::echo(backend)).collect();
    let addrs = servers.iter().map(|s| s.addr).collect();
    (servers, addrs)
}

backend_tests! {
    parallel;
    /// GET: one entry per upstream, in order, with the echo's JSON body
    /// escaped as a string; POST: the body reaches every upstream.
    fn get_and_post(backend) {
        let (_ups, addrs) = echoes(backend);
        let px = proxy(backend, &addrs, |_| {});
        let mut c = Client::connect(px.addr);
        let r = c.roundtrip(&get("/search?q=1"));
        assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.header("content-type"), Some("application/json"));
        let e = entries(&r.body);
        let names: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
        assert_eq!(e.iter().map(|x| x.0.clone()).collect::<Vec<_>>(), names);
        for (_, status, body) in &e {
            assert_eq!((*status, body.as_bytes()), (200, HELLO));
        }

        let payload = b"line \"one\"\nline two";
        let r = c.roundtrip(&post("/p", "text/plain", payload));
        assert_eq!(r.status, 200);
        let e = entries(&r.body);
        assert_eq!(e.len(), 3);
        for (_, status, body) in &e {
            assert_eq!((*status, body.as_bytes()), (200, &payload[..]));
        }

        // HEAD: the upstream answers have no body.
        c.send(b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.response_to(true);
        assert_eq!(r.status, 200);
        let r = c.roundtrip(&get("/after-head"));
        assert_eq!(entries(&r.body).len(), 3, "stream in sync after HEAD");
    }

    /// Width 7 over 3 upstreams: round-robin, continuing across requests.
    fn width_round_robin(backend) {
        let (_ups, addrs) = echoes(backend);
        let px = proxy(backend, &addrs, |c| c.width = 7);
        let mut c = Client::connect(px.addr);
        let first: Vec<String> = entries(&c.roundtrip(&get("/")).body).into_iter().map(|e| e.0).collect();
        let second: Vec<String> = entries(&c.roundtrip(&get("/")).body).into_iter().map(|e| e.0).collect();
        let name = |i: usize| addrs[i % 3].to_string();
        assert_eq!(first, (0..7).map(name).collect::<Vec<_>>());
        assert_eq!(second, (7..14).map(name).collect::<Vec<_>>());
    }

    /// `first` answers with one entry; `quorum:2` with two even when the
    /// third upstream refuses; `all` with a refusing upstream fails with
    /// 502 naming it (a POST is never moved to another upstream).
    fn policies(backend) {
        let (_ups, addrs) = echoes(backend);
        let px = proxy(backend, &addrs, |c| c.policy = Policy::First);
        let r = Client::connect(px.addr).roundtrip(&get("/"));
        assert_eq!((r.status, entries(&r.body).len()), (200, 1));

        let dead = refused_addr();
        let mixed = [addrs[0], addrs[1], dead];
        let px = proxy(backend, &mixed, |c| c.policy = Policy::Quorum(2));
        let mut c = Client::connect(px.addr);
        let r = c.roundtrip(&post("/", "text/plain", b"q"));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let e = entries(&r.body);
        assert_eq!(e.len(), 2);
        assert!(e.iter().all(|x| x.0 != dead.to_string()));

        let px = proxy(backend, &mixed, |c| c.policy = Policy::All);
        let mut c = Client::connect(px.addr);
        let r = c.roundtrip(&post("/", "text/plain", b"a"));
        assert_eq!(r.status, 502);
        let text = String::from_utf8_lossy(&r.body).into_owned();
        // The OS's own reason and number, e.g. "Connection refused (os error 111)".
        let refused = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert!(text.contains(&format!("upstream {dead}: connect failed: {refused}")), "{text}");
        assert!(text.contains("(os error "), "{text}");
        // The client connection is fine afterwards.
        let r = c.roundtrip(&get("/"));
        assert_eq!(r.status, 200, "GET retries on the next upstream: {}", String::from_utf8_lossy(&r.body));
        assert_eq!(entries(&r.body).len(), 3);
    }

    /// Keep-alive: 30 requests over two client connections open one
    /// connection per upstream (the pool is per core and LIFO).
    fn reuses_upstream_connections(backend) {
        let (ups, addrs) = echoes(backend);
        let px = proxy(backend, &addrs, |_| {});
        let mut a = Client::connect(px.addr);
        let mut b = Client::connect(px.addr);
        for i in 0..15 {
            assert_eq!(a.roundtrip(&get(&format!("/a{i}"))).status, 200);
            assert_eq!(b.roundtrip(&post("/b", "text/plain", b"x")).status, 200);
        }
        for up in &ups {
            let accepted = up.stats().accepted;
            assert_eq!(accepted, 1, "one upstream connection, reused");
            assert_eq!(up.stats().requests, 30);
        }
        // Concurrent requests need one connection each, then reuse them.
        let clients: Vec<_> = (0..4)
            .map(|_| {
                let addr = px.addr;
                std::thread::spawn(move || {
                    let mut c = Client::connect(addr);
                    for _ in 0..10 {
                        assert_eq!(c.roundtrip(&get("/c")).status, 200);
                    }
                })
            })
            .collect();
        for c in clients {
            c.join().expect("client thread");
        }
        for up in &ups {
            let accepted = up.stats().accepted;
            assert!(accepted <= 5, "at most one connection per concurrent request: {accepted}");
        }
        let _ = Duration::ZERO;
    }
}
