//! What the fan-out proxy forwards, seen by a recording fake upstream, on
//! both backends: the request target in origin-form whatever form the
//! client used (RFC 9112 §3.2), `CONNECT` and targets that fit no form
//! refused by the proxy itself, and every `Via` / `X-Forwarded-For` line
//! of the client's request kept before the proxy's own element.

use crate::support;

use percore_test_kit::http::*;
use percore_test_kit::upstream::{entries, Fake};
use percore_test_kit::*;
use support::fanout::proxy;

/// The request line of the last request `fake` recorded.
fn last_request_line(fake: &Fake) -> String {
    let req = fake.requests().pop().expect("a request was forwarded");
    let text = String::from_utf8_lossy(&req).into_owned();
    text.split("\r\n").next().unwrap_or_default().to_owned()
}

/// The header section of the last request `fake` recorded, lower-cased.
fn last_head(fake: &Fake) -> String {
    let req = fake.requests().pop().expect("a request was forwarded");
    String::from_utf8_lossy(&req).to_ascii_lowercase()
}

backend_tests! {
    parallel;
    /// Absolute-form targets reach the upstream in origin-form: the path
    /// and query, `/` for an empty path, whatever the scheme's case; an
    /// `OPTIONS` for a whole server becomes `OPTIONS *`; origin-form and
    /// `OPTIONS *` go as sent.
    fn absolute_form_forwarded_as_origin_form(backend) {
        let rec = Fake::answering_ok();
        let px = proxy(backend, &[rec.addr], |_| {});
        let mut client = Client::connect(px.addr);
        let cases = [
            ("GET", "http://example.com:8080/search?q=1&r=http://x/y", "GET /search?q=1&r=http://x/y HTTP/1.1"),
            ("GET", "http://example.com", "GET / HTTP/1.1"),
            ("GET", "HTTPS://example.com?only=query#frag", "GET /?only=query HTTP/1.1"),
            ("DELETE", "https://[::1]:443/item/7", "DELETE /item/7 HTTP/1.1"),
            ("OPTIONS", "*", "OPTIONS * HTTP/1.1"),
            ("OPTIONS", "http://example.com:8001", "OPTIONS * HTTP/1.1"),
            ("OPTIONS", "http://example.com:8001/p", "OPTIONS /p HTTP/1.1"),
            ("GET", "/plain?x=http://y", "GET /plain?x=http://y HTTP/1.1"),
        ];
        for (method, target, forwarded) in cases {
            let req = format!("{method} {target} HTTP/1.1\r\nHost: example.com\r\n\r\n");
            let r = client.roundtrip(req.as_bytes());
            assert_eq!(r.status, 200, "{target}: {}", String::from_utf8_lossy(&r.body));
            assert_eq!(entries(&r.body)[0].2, "ok");
            assert_eq!(last_request_line(&rec), forwarded, "{method} {target}");
        }
        // The proxy's own Host (the upstream's address), not the client's
        // authority, goes with the rewritten target.
        assert!(last_head(&rec).contains(&format!("\r\nhost: {}\r\n", rec.addr)));
    }

    /// `CONNECT` is answered 501 by the proxy and the connection closed
    /// (bytes after it may be tunnel data, never a request); a target in
    /// no form its method may use is a 400, and the connection, whose
    /// request was whole, is kept. Nothing reaches the upstream.
    fn connect_and_bad_targets_refused(backend) {
        let rec = Fake::answering_ok();
        let px = proxy(backend, &[rec.addr], |_| {});
        expect_error(px.addr, b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n\x16\x03\x01", 501);
        expect_error(px.addr, b"CONNECT /x HTTP/1.1\r\nHost: a\r\n\r\n", 501);
        let bad = ["example.com:443", "*", "ftp://example.com/f", "http:///no-host", "relative/path", "http://user@example.com/x", "http://:80/x"];
        for target in bad {
            let req = format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n");
            expect_kept_error(px.addr, req.as_bytes(), 400);
        }
        assert_eq!(rec.requests().len(), 0, "nothing forwarded");
        // The proxy still serves.
        let r = one(px.addr, &get("/after"));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }

    /// Several `Via` and `X-Forwarded-For` lines: every value is kept, in
    /// order, as one list, and the proxy's element comes last.
    fn repeated_via_and_forwarded_for_kept(backend) {
        let rec = Fake::answering_ok();
        let px = proxy(backend, &[rec.addr], |c| c.pseudonym = "px-hops".into());
        let r = one(px.addr, b"GET /v HTTP/1.1\r\nHost: a\r\nVia: 1.0 edge\r\n\
            X-Forwarded-For: 10.0.0.1\r\nVia: 1.1 mid, 1.1 inner\r\nX-Forwarded-For: 10.0.0.2, 10.0.0.3\r\n\
            X-Forwarded-For: 10.0.0.4\r\n\r\n");
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let head = last_head(&rec);
        assert!(head.contains("\r\nvia: 1.0 edge, 1.1 mid, 1.1 inner, 1.1 px-hops\r\n"), "{head}");
        assert!(
            head.contains("\r\nx-forwarded-for: 10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4, 127.0.0.1\r\n"),
            "{head}"
        );
        assert_eq!(head.matches("\r\nvia:").count(), 1, "one Via line: {head}");
        assert_eq!(head.matches("\r\nx-forwarded-for:").count(), 1, "one X-Forwarded-For line: {head}");
    }
}
