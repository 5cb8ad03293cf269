//! The fan-out proxy in front of a real third-party server: nginx serving
//! a static file on 127.0.0.1, next to an in-process `http_echo`, on both
//! backends. Skips (printing why) when `/usr/sbin/nginx` is missing; CI
//! installs it with apt-get.

use crate::support;

use percore_test_kit::http::*;
use percore_test_kit::upstream::entries;
use percore_test_kit::*;
use support::fanout::proxy;
use support::http::*;

const STATIC: &str = "static file from nginx\n";

/// nginx serving [`STATIC`] as `/index.txt`.
fn nginx() -> Option<Nginx> {
    Nginx::start(|dir| {
        std::fs::write(dir.join("html/index.txt"), STATIC).expect("static file");
        format!("  root {}/html;\n  default_type text/plain;", dir.display())
    })
}

backend_tests! {
    parallel;
    /// GET /index.txt fanned out to nginx and http_echo: nginx's file and
    /// the echo's 404-free answer, over reused keep-alive connections.
    fn nginx_and_echo(backend) {
        let Some(nginx) = nginx() else { return };
        let echo = TestServer::echo(backend);
        let px = proxy(backend, &[nginx.addr, echo.addr], |_| {});
        let mut c = Client::connect(px.addr);
        for _ in 0..5 {
            let r = c.roundtrip(&get("/index.txt"));
            assert_eq!(r.status, 200, "{}; nginx log: {}", String::from_utf8_lossy(&r.body), nginx.log());
            let e = entries(&r.body);
            assert_eq!(e.len(), 2);
            assert_eq!((e[0].0.clone(), e[0].1, e[0].2.as_str()), (nginx.addr.to_string(), 200, STATIC));
            assert_eq!((e[1].1, e[1].2.as_bytes()), (200, HELLO));
        }
        // nginx's 404 is its answer, not a proxy failure.
        let r = c.roundtrip(&get("/missing"));
        assert_eq!(r.status, 200);
        assert_eq!(entries(&r.body)[0].1, 404);
        assert_eq!(echo.stats().accepted, 1, "echo connection reused");
    }
}
