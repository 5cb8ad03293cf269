//! A service's own 4xx `HttpError` keeps the connection only when the
//! request's end is known, on both backends: whatever follows the refused
//! request on the wire is answered as the next request, never a body's
//! bytes taken for a request or a request's bytes for a body.

use crate::support;

use std::io;
use std::time::Duration;

use percore_handlers::http::HttpError;
use percore_test_kit::http::*;
use percore_test_kit::*;
use support::http::*;

const NOT_FOUND: HttpError = HttpError {
    status: 404,
    reason: std::borrow::Cow::Borrowed("no such thing"),
};

/// `/refuse` refuses at once; `/partial` reads one piece of the body
/// first; `/after-flush` refuses once its head is out; `/slow-refuse`
/// after 300 ms. Any other path is answered with itself.
struct Refuser;

impl Service for Refuser {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        match req.path() {
            "/refuse" => Err(NOT_FOUND.into()),
            "/partial" => {
                req.chunk().await?;
                Err(NOT_FOUND.into())
            }
            "/after-flush" => {
                res.send(200, None, b"begun")?;
                res.flush().await?;
                Err(NOT_FOUND.into())
            }
            "/slow-refuse" => {
                percore::time::sleep(Duration::from_millis(300)).await;
                Err(NOT_FOUND.into())
            }
            path => Ok(res.send(200, None, path.as_bytes())?),
        }
    }
}

/// No timeout is under test here: the defaults (10 s and more, never
/// reached by a client's pauses), with a short linger so that the closes
/// after refusals come soon.
fn server(backend: Backend) -> TestServer {
    let mut config = Config::default();
    config.linger_timeout = Duration::from_millis(500);
    config.limits.max_body = 64;
    TestServer::start(backend, config, || Refuser)
}

/// A request for `path` that fits in a body.
fn smuggled(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n")
}

backend_tests! {
    parallel;
    /// The body of a refused request, left unread, is read and dropped,
    /// even when it holds a request; what follows it is the next request,
    /// pipelined in the same write.
    fn a_refused_requests_body_is_never_a_request(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        let inner = smuggled("/smuggled");
        let refused = format!("POST /refuse HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{inner}", inner.len());
        let chunked = format!("POST /refuse HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{inner}\r\n0\r\n\r\n", inner.len());
        c.send(&[refused.as_bytes(), chunked.as_bytes(), &get("/next")].concat());
        for _ in 0..2 {
            let r = c.response();
            assert_eq!((r.status, r.closes()), (404, false));
        }
        assert_eq!(c.response().body, b"/next");
        assert_eq!(c.roundtrip(&get("/after")).body, b"/after");
    }

    /// A service that read part of the body before refusing: the rest,
    /// arriving later, is dropped and the connection goes on.
    fn a_refusal_after_part_of_the_body_keeps_the_stream_in_step(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        let inner = smuggled("/smuggled");
        let head = format!("POST /partial HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n", inner.len());
        c.send(head.as_bytes()).send(&inner.as_bytes()[..5]);
        std::thread::sleep(Duration::from_millis(50));
        c.send(&[&inner.as_bytes()[5..], &get("/next")[..]].concat());
        let r = c.response();
        assert_eq!((r.status, r.closes()), (404, false));
        assert_eq!(c.response().body, b"/next");
    }

    /// A chunked body past the limit while the layer drops it: the
    /// answer is a 413 that closes, and nothing after it is taken for a
    /// request.
    fn a_refused_chunked_body_over_the_limit_closes(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        let inner = smuggled("/smuggled");
        let big = format!("{inner}{}", "x".repeat(64));
        let request = format!("POST /refuse HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{big}\r\n0\r\n\r\n", big.len());
        c.send(&[request.as_bytes(), &get("/next")].concat());
        let r = c.response();
        assert!(r.closes(), "{} {:?}", r.status, r.headers);
        c.expect_eof();
    }

    /// `Expect: 100-continue` with the body never asked for: no
    /// `100 Continue`, and the refusal closes (the client may never send
    /// the body, so what comes next may be a request or the body).
    fn a_refusal_of_a_request_awaiting_100_continue_closes(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        let inner = smuggled("/smuggled");
        let head = format!("POST /refuse HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n", inner.len());
        c.send(head.as_bytes());
        let r = c.response();
        assert_eq!((r.status, r.closes()), (404, true));
        let _ = c.try_send(inner.as_bytes());
        c.expect_eof();
    }

    /// A refused `HEAD` gets the head alone, with the length the body
    /// would have, and the connection goes on.
    fn a_refused_head_request_keeps_the_connection(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        c.send(&[&b"HEAD /refuse HTTP/1.1\r\nHost: t\r\n\r\n"[..], &get("/next")].concat());
        let r = c.response_to(true);
        assert_eq!((r.status, r.closes()), (404, false));
        assert_eq!(r.header("content-length"), Some("25"));
        assert_eq!(c.response().body, b"/next");
    }

    /// A 4xx after the head went out cannot be answered: the response
    /// ends incomplete and the connection closes, a pipelined request
    /// unanswered.
    fn a_refusal_after_the_head_closes(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        c.send(&[get("/after-flush"), get("/next")].concat());
        let r = c.response_to(true);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("transfer-encoding"), Some("chunked"));
        let rest = c.read_to_end();
        assert!(!rest.ends_with(b"0\r\n\r\n"), "{:?}", String::from_utf8_lossy(&rest));
        assert!(!rest.windows(5).any(|w| w == b"/next"), "{:?}", String::from_utf8_lossy(&rest));
    }

    /// HTTP/1.0 without keep-alive, and any request once the stop began:
    /// the refusal closes.
    fn a_refusal_closes_when_the_connection_would(backend) {
        let mut server = server(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(b"GET /refuse HTTP/1.0\r\n\r\n");
        assert_eq!((r.status, r.closes()), (404, true));
        c.expect_eof();

        let mut c = Client::connect(server.addr);
        c.send(&get("/slow-refuse"));
        wait_until(Duration::from_secs(60), "the request to be taken", || server.stats().requests == 2, |done| *done);
        server.begin_stop();
        let r = c.response();
        assert_eq!((r.status, r.closes()), (404, true));
        c.expect_eof();
        assert!(server.stop_within(Duration::from_secs(60)).is_some(), "stopped");
    }
}
