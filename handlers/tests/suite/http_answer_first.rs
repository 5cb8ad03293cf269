//! A service that answers without reading the whole body, while the rest
//! of that body is still to come from the client, on both backends: the
//! answer goes out at once, then the rest is read and dropped. The
//! connection is kept if the rest comes whole (and its bytes are never
//! taken for a request), and closed, the answer standing, if it goes over
//! the body limit, never comes, or the server stops.

use crate::support;

use std::io;
use std::time::Duration;

use percore_handlers::http::HttpError;
use percore_test_kit::http::*;
use percore_test_kit::*;
use support::http::*;

/// `/refuse` is refused with a 404 (a service's `HttpError`); any other
/// path is answered 200 with itself. Neither reads the body.
struct Unread;

impl Service for Unread {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        if req.path() == "/refuse" {
            return Err(HttpError::new(404, "no such thing").into());
        }
        if req.path() == "/streamed" {
            res.write(b"early,");
            res.flush().await?;
            res.write(b"late");
            return Ok(());
        }
        if req.path() == "/first-chunk" {
            let first = req.chunk().await?.unwrap_or_default().to_vec();
            res.send(200, None, &first)?;
            return Ok(());
        }
        if req.path() == "/large" {
            res.send(200, None, &vec![b'a'; LARGE])?;
            return Ok(());
        }
        res.send(200, None, req.path().as_bytes())?;
        Ok(())
    }
}

/// The answer to `/large`: more than the socket buffers between the
/// server and a client that does not read hold.
const LARGE: usize = 16 << 20;

/// For [`LARGE`] answers: [`short_config`] with time enough to write
/// one, to take a body of many megabytes, and to pause between requests,
/// on a loaded machine (a minute each: none of them is under test).
fn large_config() -> Config {
    let mut config = short_config();
    config.write_timeout = Duration::from_secs(60);
    config.body_timeout = Duration::from_secs(60);
    config.idle_timeout = Duration::from_secs(60);
    config
}

fn server(backend: Backend, config: Config) -> TestServer {
    TestServer::start(backend, config, || Unread)
}

/// The head of a request whose body is `framing`.
fn head(path: &str, framing: &str) -> Vec<u8> {
    format!("POST {path} HTTP/1.1\r\nHost: t\r\n{framing}\r\n\r\n").into_bytes()
}

/// The answer comes while the upload is unfinished; the rest of the body,
/// whose bytes look like a request, is dropped, and the next request on
/// the connection is answered as the next.
fn kept_after_the_rest(backend: Backend, path: &str, status: u16) {
    let srv = server(backend, short_config());
    let mut c = Client::connect(srv.addr);
    let rest = b"GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n";
    let length = format!("Content-Length: {}", 5 + rest.len());
    c.send(&[head(path, &length), b"hello".to_vec()].concat());
    let r = c.response();
    assert_eq!(r.status, status);
    assert!(!r.closes(), "kept while the rest may still come whole");
    c.send(rest);
    let r = c.roundtrip(&get("/next"));
    assert_eq!((r.status, r.body.as_slice()), (200, &b"/next"[..]));
    let r = c.roundtrip(&get("/last"));
    assert_eq!(r.body, b"/last", "nothing answered in between");
}

/// A chunked rest that goes over the body limit after the answer: the
/// connection closes with nothing more sent (no 413 after the answer).
fn closed_over_the_limit(backend: Backend) {
    let mut config = short_config();
    config.limits.max_body = 16;
    let srv = server(backend, config);
    let mut c = Client::connect(srv.addr);
    c.send(
        &[
            head("/up", "Transfer-Encoding: chunked"),
            b"5\r\nhello\r\n".to_vec(),
        ]
        .concat(),
    );
    assert_eq!(c.response().body, b"/up");
    c.send(
        &[
            b"20\r\n".to_vec(),
            vec![b'x'; 32],
            b"\r\n0\r\n\r\n".to_vec(),
        ]
        .concat(),
    );
    c.expect_eof();
    assert_eq!(
        srv.http_stats().status_4xx,
        0,
        "the answer stood: {}",
        srv.http_stats()
    );
}

/// A rest that never comes: closed at the body timeout (not before it,
/// timed from before the request), the answer out long before.
fn closed_at_the_body_timeout(backend: Backend) {
    let config = short_config();
    let timeout = config.body_timeout;
    let srv = server(backend, config);
    let mut c = Client::connect(srv.addr);
    let started = std::time::Instant::now();
    c.send(&[head("/up", "Content-Length: 10"), b"abc".to_vec()].concat());
    assert_eq!(c.response().body, b"/up");
    c.expect_eof();
    let waited = started.elapsed();
    assert!(waited >= timeout / 2, "closed after {waited:?}");
}

/// A stop while the rest is awaited closes the connection at once, not
/// at the body timeout (two minutes here: past the client's guard).
fn closed_by_the_stop(backend: Backend) {
    let mut config = Config::default();
    config.body_timeout = Duration::from_secs(120);
    let mut srv = server(backend, config);
    let mut c = Client::connect(srv.addr);
    c.send(&[head("/up", "Content-Length: 10"), b"abc".to_vec()].concat());
    assert_eq!(c.response().body, b"/up");
    srv.begin_stop();
    c.expect_eof();
    assert!(
        srv.stop_within(Duration::from_secs(60)).is_some(),
        "stopped"
    );
}

/// Bodies the service never reads, holding request-like bytes, between
/// requests: one by length, one chunked, one refused, the last closing.
const UNREAD: &[u8] = b"POST /cl HTTP/1.1\r\nHost: t\r\nContent-Length: 32\r\n\r\n\
GET /in-cl HTTP/1.1\r\nHost: t\r\n\r\n\
GET /between HTTP/1.1\r\nHost: t\r\n\r\n\
PUT /refuse HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
23\r\nGET /in-chunk HTTP/1.1\r\nHost: t\r\n\r\n\r\n0\r\n\r\n\
POST /ch HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
3\r\nabc\r\n0\r\nX-T: GET /in-trailer\r\n\r\n\
GET /last HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nConnection: close\r\n\r\nend";

/// [`UNREAD`] split in two at every byte, with a pause so that the
/// server sees two reads (and, for a split inside a body, answers before
/// the rest comes): the same bytes back every time, none of the bodies'
/// request-like bytes answered.
fn unread_bodies_split_everywhere(backend: Backend) {
    let srv = server(backend, Config::default());
    let whole = normalize_dates(&exchange(srv.addr, UNREAD));
    assert_eq!(statuses(&whole), [200, 200, 404, 200, 200]);
    let text = String::from_utf8_lossy(&whole);
    assert!(!text.contains("/in-"), "{text}");
    for cut in 1..UNREAD.len() {
        let mut c = Client::connect(srv.addr);
        c.send(&UNREAD[..cut]);
        std::thread::sleep(Duration::from_millis(1));
        c.send(&UNREAD[cut..]);
        let got = normalize_dates(&c.read_to_end());
        assert!(
            got == whole,
            "split at {cut} differs:\n{}\n---\n{text}",
            String::from_utf8_lossy(&got),
        );
    }
}

/// A client that sends its whole request before it reads (as many do),
/// a body the service leaves unread and an answer larger than the socket
/// buffers: the body is read while the answer is written, not after it,
/// else each side waits for the other to read until the write timeout
/// resets the connection.
fn large_answer_to_a_client_that_reads_last(backend: Backend) {
    let mut config = large_config();
    config.limits.max_body = 64 << 20;
    let srv = server(backend, config);
    let mut c = Client::connect(srv.addr);
    let body = vec![b'b'; 32 << 20];
    let length = format!("Content-Length: {}", body.len());
    c.send(&[head("/large", &length), body].concat());
    let r = c.response();
    assert_eq!(r.body.len(), LARGE);
    assert!(!r.closes());
    assert_eq!(c.roundtrip(&get("/next")).body, b"/next");
}

/// As [`large_answer_to_a_client_that_reads_last`], with
/// `Connection: close`: the layer leaves the body unread and closes, and
/// while the answer goes out what the client sends is dropped, so that
/// the client gets the whole answer, then the end of stream.
fn large_closing_answer_to_a_client_that_reads_last(backend: Backend) {
    let mut config = large_config();
    config.limits.max_body = 64 << 20;
    let srv = server(backend, config);
    let mut c = Client::connect(srv.addr);
    let body = vec![b'b'; 32 << 20];
    let framing = format!("Connection: close\r\nContent-Length: {}", body.len());
    c.send(&[head("/large", &framing), body].concat());
    let r = c.response();
    assert_eq!(r.body.len(), LARGE);
    assert!(r.closes());
    c.expect_eof();
}

/// The rest of the body, and a request after it, come while a large
/// answer is still being written: the rest is dropped, and the request
/// after it is kept for its turn and answered after the answer.
fn next_request_while_a_large_answer_is_written(backend: Backend) {
    let srv = server(backend, large_config());
    let mut c = Client::connect(srv.addr);
    let rest = get("/smuggled");
    let length = format!("Content-Length: {}", 5 + rest.len());
    c.send(&[head("/large", &length), b"hello".to_vec()].concat());
    std::thread::sleep(Duration::from_millis(20));
    c.send(&[rest, get("/next")].concat());
    let r = c.response();
    assert_eq!(r.body.len(), LARGE);
    assert_eq!(c.response().body, b"/next");
    assert_eq!(c.roundtrip(&get("/last")).body, b"/last");
}

/// As [`large_answer_to_a_client_that_reads_last`], the chunked body
/// going over the limit while the answer is written: the answer still
/// gets out whole (what the client goes on sending is dropped, as the
/// close's lingering does), then the connection closes.
fn large_answer_over_the_limit_to_a_client_that_reads_last(backend: Backend) {
    let mut config = large_config();
    config.limits.max_body = 1 << 20;
    let srv = server(backend, config);
    let mut c = Client::connect(srv.addr);
    let mut request = head("/large", "Transfer-Encoding: chunked");
    request.extend_from_slice(b"5\r\nhello\r\n");
    let start = request.len();
    let piece = [b"10000\r\n".as_slice(), &[b'c'; 1 << 16], b"\r\n"].concat();
    while request.len() - start < 32 << 20 {
        request.extend_from_slice(&piece);
    }
    request.extend_from_slice(b"0\r\n\r\n");
    c.send(&request);
    let r = c.response();
    assert_eq!(r.body.len(), LARGE);
    c.expect_eof();
}

/// A body asked for with `Expect: 100-continue`, of which the service
/// reads a first piece only (after the `100 Continue` it caused), and an
/// HTTP/1.0 keep-alive request: answered first too, the rest, which looks
/// like a request, dropped, and the next request answered as the next.
fn after_a_continue_and_in_http_1_0(backend: Backend) {
    let srv = server(backend, short_config());
    let rest = get("/smuggled");
    let mut c = Client::connect(srv.addr);
    let length = format!("Expect: 100-continue\r\nContent-Length: {}", 5 + rest.len());
    c.send(&head("/first-chunk", &length));
    assert_eq!(c.response().status, 100);
    c.send(b"hello");
    let r = c.response();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello"[..]));
    assert!(!r.closes());
    c.send(&rest);
    assert_eq!(c.roundtrip(&get("/next")).body, b"/next");

    let mut c = Client::connect(srv.addr);
    let request = format!(
        "POST /up HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: {}\r\n\r\nhello",
        5 + rest.len()
    );
    c.send(request.as_bytes());
    let r = c.response();
    assert_eq!(r.body, b"/up");
    assert!(!r.closes(), "kept");
    c.send(&rest);
    c.send(b"GET /next HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(c.response().body, b"/next");
}

/// A response streamed with `flush` before the service returned: its
/// last chunk goes out before the body's rest is awaited too, and the
/// rest is dropped, not answered.
fn streamed_answer_ends_before_the_rest(backend: Backend) {
    let srv = server(backend, short_config());
    let mut c = Client::connect(srv.addr);
    let rest = get("/smuggled");
    let length = format!("Content-Length: {}", 5 + rest.len());
    c.send(&[head("/streamed", &length), b"hello".to_vec()].concat());
    let r = c.response();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"early,late"[..]));
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    c.send(&rest);
    assert_eq!(c.roundtrip(&get("/next")).body, b"/next");
}

backend_tests! {
    parallel;
    /// See [`next_request_while_a_large_answer_is_written`].
    fn a_request_after_the_rest_waits_for_the_large_answer(backend) {
        next_request_while_a_large_answer_is_written(backend);
    }

    /// See [`large_answer_over_the_limit_to_a_client_that_reads_last`].
    fn a_large_answer_gets_out_when_the_rest_breaks_the_limit(backend) {
        large_answer_over_the_limit_to_a_client_that_reads_last(backend);
    }

    /// See [`after_a_continue_and_in_http_1_0`].
    fn answered_first_after_a_continue_and_in_http_1_0(backend) {
        after_a_continue_and_in_http_1_0(backend);
    }

    /// See [`streamed_answer_ends_before_the_rest`].
    fn a_streamed_answer_ends_before_the_rest_comes(backend) {
        streamed_answer_ends_before_the_rest(backend);
    }

    /// See [`large_answer_to_a_client_that_reads_last`].
    fn a_large_answer_does_not_wait_on_a_client_that_reads_last(backend) {
        large_answer_to_a_client_that_reads_last(backend);
    }

    /// See [`large_closing_answer_to_a_client_that_reads_last`].
    fn a_large_closing_answer_does_not_wait_on_a_client_that_reads_last(backend) {
        large_closing_answer_to_a_client_that_reads_last(backend);
    }

    /// See [`unread_bodies_split_everywhere`].
    fn unread_bodies_split_at_every_position(backend) {
        unread_bodies_split_everywhere(backend);
    }

    /// See [`kept_after_the_rest`].
    fn an_answer_comes_before_the_upload_ends(backend) {
        kept_after_the_rest(backend, "/up", 200);
    }

    /// See [`kept_after_the_rest`]: a service's 4xx is answered first too.
    fn a_refusal_comes_before_the_upload_ends(backend) {
        kept_after_the_rest(backend, "/refuse", 404);
    }

    /// See [`closed_over_the_limit`].
    fn a_rest_over_the_limit_closes_after_the_answer(backend) {
        closed_over_the_limit(backend);
    }

    /// See [`closed_at_the_body_timeout`].
    fn a_rest_that_never_comes_closes_at_the_body_timeout(backend) {
        closed_at_the_body_timeout(backend);
    }

    /// See [`closed_by_the_stop`].
    fn a_stop_ends_the_wait_for_the_rest(backend) {
        closed_by_the_stop(backend);
    }
}
