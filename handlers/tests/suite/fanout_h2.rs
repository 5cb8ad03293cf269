//! The fan-out proxy speaking HTTP/2 to its upstreams, on both backends:
//! GET, POST and HEAD through one upstream (width 1) and then width 4
//! over two, each upstream seeing one HTTP/2 connection that carries all
//! its branches; and an upstream that resets a stream is a 502 naming it.
//! (Feature `h2`.)
#![cfg(feature = "h2")]

use crate::support;

use std::sync::atomic::Ordering;

use percore_test_kit::http::*;
use percore_test_kit::upstream::entries;
use percore_test_kit::*;
use support::fanout::proxy;
use support::h2origin::{H2Origin, Script};
use support::http::*;

backend_tests! {
    parallel;
    /// Width 1: GET, POST with a body and HEAD, all on one HTTP/2
    /// connection to the upstream.
    fn one_upstream_over_h2(backend) {
        let up = TestServer::echo(backend);
        let px = proxy(backend, &[up.addr], |c| c.upstream_http2 = true);
        let mut c = Client::connect(px.addr);
        for _ in 0..3 {
            let r = c.roundtrip(&get("/search?q=1"));
            assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
            let e = entries(&r.body);
            assert_eq!(e.len(), 1);
            assert_eq!((e[0].1, e[0].2.as_bytes()), (200, HELLO));
        }
        let payload = b"line \"one\"\nline two";
        let r = c.roundtrip(&post("/p", "text/plain", payload));
        let e = entries(&r.body);
        assert_eq!((r.status, e[0].1, e[0].2.as_bytes()), (200, 200, &payload[..]));
        c.send(b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(c.response_to(true).status, 200);
        let r = c.roundtrip(&get("/after-head"));
        assert_eq!(entries(&r.body).len(), 1, "in step after HEAD");
        assert_eq!(up.stats().accepted, 1, "one connection for every branch");
        let h2 = up.http_stats();
        assert_eq!((h2.h2_connections, h2.h2_streams), (1, 6));
    }

    /// Width 4 over two upstreams: two branches at once on each one's
    /// connection.
    fn branches_share_each_upstreams_connection(backend) {
        let ups = [TestServer::echo(backend), TestServer::echo(backend)];
        let addrs = [ups[0].addr, ups[1].addr];
        let px = proxy(backend, &addrs, |c| {
            c.upstream_http2 = true;
            c.width = 4;
        });
        let mut c = Client::connect(px.addr);
        for _ in 0..2 {
            let r = c.roundtrip(&get("/"));
            assert_eq!(r.status, 200);
            let e = entries(&r.body);
            assert_eq!(e.len(), 4);
            assert!(e.iter().all(|(_, status, body)| *status == 200 && body.as_bytes() == HELLO));
        }
        for up in &ups {
            assert_eq!(up.stats().accepted, 1);
            assert_eq!((up.http_stats().h2_connections, up.http_stats().h2_streams), (1, 4));
        }
    }

    /// A reset stream fails its branch: 502, naming the upstream.
    fn a_reset_stream_is_a_502(backend) {
        let origin = H2Origin::start(Script::Reset);
        let px = proxy(backend, &[origin.addr], |c| c.upstream_http2 = true);
        let r = Client::connect(px.addr).roundtrip(&get("/"));
        assert_eq!(r.status, 502);
        let body = String::from_utf8_lossy(&r.body);
        assert!(body.contains(&origin.addr.to_string()), "{body}");
        assert!(body.contains("reset the HTTP/2 stream"), "{body}");
        assert_eq!(origin.connections.load(Ordering::SeqCst), 1);
    }
}
