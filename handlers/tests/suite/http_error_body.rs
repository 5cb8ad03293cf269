//! `Service::error_body`, on both backends: every error answer (the
//! layer's own refusals and timeouts, a service's `HttpError`, any other
//! service error, a panic) carries the service's body and content type,
//! with the status and `Connection: close` the server's; HEAD gets the
//! head alone; a content type that is not a field value falls back to
//! the default text answer.

use crate::support;

use std::io;

use percore_handlers::http::proto::reason_phrase;
use percore_handlers::http::HttpError;
use percore_test_kit::http::*;
use percore_test_kit::log_capture;
use percore_test_kit::*;
use support::http::*;

/// Answers its errors in JSON.
struct JsonErrors;

impl Service for JsonErrors {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        match req.path() {
            "/forbidden" => Err(HttpError::new(403, "not yours").into()),
            "/fail" => Err(io::Error::other("the database is down")),
            "/panic" => panic!("a bug in the service"),
            _ => {
                res.send(200, None, b"ok")?;
                Ok(())
            }
        }
    }

    fn error_body(&self, error: &HttpError, body: &mut Vec<u8>) -> &'static str {
        let text = format!(
            r#"{{"status":{},"error":"{}","detail":"{}"}}"#,
            error.status,
            reason_phrase(error.status),
            error.reason
        );
        body.extend_from_slice(text.as_bytes());
        "application/json"
    }
}

/// An `error_body` gone wrong: a content type that would split the
/// response, an empty one, or a panic.
struct BadErrors(&'static str);

impl Service for BadErrors {
    async fn call(&self, _: &mut Request<'_>, _: &mut Response<'_>) -> io::Result<()> {
        Err(io::Error::other("always"))
    }

    fn error_body(&self, _: &HttpError, body: &mut Vec<u8>) -> &'static str {
        body.extend_from_slice(b"{}");
        match self.0 {
            "panic" => panic!("a bug in error_body"),
            content_type => content_type,
        }
    }
}

fn json(status: u16, detail: &str) -> Vec<u8> {
    format!(
        r#"{{"status":{status},"error":"{}","detail":"{detail}"}}"#,
        reason_phrase(status)
    )
    .into_bytes()
}

/// One request on its own connection; the answer must close it.
/// The answer to `request` on a connection of its own, which closes after
/// it unless `kept` (a service's refusal of a whole request, a 4xx of its
/// own, keeps it).
fn error_answer(addr: std::net::SocketAddr, request: &[u8], kept: bool) -> Resp {
    let mut c = Client::connect(addr);
    let r = c.roundtrip(request);
    assert_eq!(r.closes(), !kept, "{:?}", r.headers);
    if !kept {
        c.expect_eof();
    }
    r
}

backend_tests! {
    parallel;
    /// The layer's refusals (malformed, over the body limit) and the
    /// service's errors, each in the service's JSON.
    fn every_error_answer_has_the_services_body(backend) {
        let mut config = short_config();
        config.limits.max_body = 16;
        let server = TestServer::start(backend, config, || JsonErrors);
        let cases: [(&[u8], u16, &str); 5] = [
            (b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400, "duplicate Content-Length"),
            (b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 17\r\n\r\n", 413, "Content-Length over limit"),
            (&get("/forbidden"), 403, "not yours"),
            // An error without a reason of its own carries the status's phrase.
            (&get("/fail"), 500, "Internal Server Error"),
            (&get("/panic"), 500, "Internal Server Error"),
        ];
        for (request, status, detail) in cases {
            let r = error_answer(server.addr, request, status == 403);
            assert_eq!(r.status, status, "{}", String::from_utf8_lossy(request));
            assert_eq!(r.header("content-type"), Some("application/json"));
            assert_eq!(String::from_utf8_lossy(&r.body), String::from_utf8_lossy(&json(status, detail)));
        }
        assert_eq!(one(server.addr, &get("/")).body, b"ok");
    }

    /// A head that does not arrive in time: 408, in the service's JSON.
    fn a_timed_out_head_has_the_services_body(backend) {
        let server = TestServer::start(backend, short_config(), || JsonErrors);
        let mut c = Client::connect(server.addr);
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n");
        let r = c.response();
        assert_eq!(r.status, 408);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.body, json(408, "request head timed out"));
    }

    /// HEAD gets the error's head with the length GET would get, and no
    /// body.
    fn a_head_request_gets_no_error_body(backend) {
        let server = TestServer::start(backend, short_config(), || JsonErrors);
        let mut c = Client::connect(server.addr);
        c.send(b"HEAD /forbidden HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.response_to(true);
        assert_eq!(r.status, 403);
        let len = json(403, "not yours").len().to_string();
        assert_eq!(r.header("content-length"), Some(len.as_str()));
        c.expect_eof();
    }

    /// A content type with CR LF in it, an empty one, or a panic in
    /// `error_body`: the default answer goes out instead, and the server
    /// goes on.
    fn a_bad_error_body_falls_back_to_text(backend) {
        log_capture::install();
        for mode in ["application/json\r\nSet-Cookie: x=1", "", "panic"] {
            let server = TestServer::start(backend, short_config(), move || BadErrors(mode));
            let r = error_answer(server.addr, &get("/"), false);
            assert_eq!(r.status, 500, "{mode:?}");
            assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"), "{mode:?}");
            assert_eq!(r.header("set-cookie"), None);
            assert_eq!(r.body, b"Internal Server Error\n", "{mode:?}");
            assert_eq!(server.stats().panics, 0, "{mode:?}: caught, not the connection's panic");
        }
        assert!(
            !log_capture::lines_with(&["ERROR", "Service::error_body panicked"]).is_empty(),
            "the panic was not logged"
        );
    }
}
