//! `Response::set_content_length`, on both backends: a streamed body
//! framed by its declared length instead of chunked coding (HTTP/1.1 and
//! 1.0, HEAD), and the server holding the service to it: a body that ends
//! short or runs long is a service error that closes the connection, and
//! a whole response of another length is answered 500.

use crate::support;

use std::io;

use percore_test_kit::http::*;
use percore_test_kit::*;
use support::http::*;

/// Bytes per piece of `/pieces`.
const PIECE: usize = 64 * 1024;

/// `/pieces/N` streams N pieces of [`PIECE`] bytes, its length declared;
/// `/short` and `/long` declare 100 bytes and stream 50 or 150;
/// `/long-first` declares 5 and flushes 10 at once; `/whole` declares 5
/// and writes 3 without flushing; `/replaced` declares 100, then sends a
/// 404 whole.
struct Declared;

impl Service for Declared {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        let path = req.path();
        if let Some(n) = path.strip_prefix("/pieces/") {
            let n: usize = n.parse().map_err(io::Error::other)?;
            res.set_content_length((n * PIECE) as u64)?;
            for i in 0..n {
                res.write(&vec![b'a' + (i % 26) as u8; PIECE]);
                res.flush().await?;
            }
            return Ok(());
        }
        match path {
            "/short" | "/long" => {
                res.set_content_length(100)?;
                res.write(&[b'x'; 50]);
                res.flush().await?;
                if path == "/long" {
                    res.write(&[b'y'; 100]);
                    res.flush().await?;
                }
            }
            "/long-first" => {
                res.set_content_length(5)?;
                res.write(&[b'x'; 10]);
                res.flush().await?;
            }
            "/whole" => {
                res.set_content_length(5)?;
                res.write(b"abc");
            }
            "/replaced" => {
                res.set_content_length(100)?;
                res.send(404, Some(b"text/plain"), b"not found")?;
            }
            _ => res.send(200, None, b"ok")?,
        }
        Ok(())
    }
}

fn server(backend: Backend) -> TestServer {
    TestServer::start(backend, short_config(), || Declared)
}

fn pieces(n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| vec![b'a' + (i % 26) as u8; PIECE])
        .collect()
}

backend_tests! {
    parallel;
    /// Three flushed pieces go out under `Content-Length`, not chunked,
    /// intact, and the connection stays usable; HTTP/1.0 gets the same
    /// framing and keeps its connection when it asked to.
    fn a_declared_stream_is_framed_by_its_length(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/pieces/3"));
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), Some("196608"));
        assert_eq!(r.header("transfer-encoding"), None);
        assert!(r.body == pieces(3), "the body came back altered");
        assert_eq!(c.roundtrip(&get("/")).body, b"ok");

        let mut old = Client::connect(server.addr);
        let r = old.roundtrip(b"GET /pieces/2 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        assert_eq!(r.header("content-length"), Some("131072"));
        assert!(!r.closes(), "{:?}", r.headers);
        assert!(r.body == pieces(2), "the body came back altered");
        assert_eq!(old.roundtrip(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").body, b"ok");
    }

    /// HEAD carries the declared length and no body.
    fn head_carries_the_declared_length(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        c.send(b"HEAD /pieces/4 HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.response_to(true);
        assert_eq!(r.header("content-length"), Some("262144"));
        assert_eq!(r.header("transfer-encoding"), None);
        assert_eq!(c.roundtrip(&get("/")).body, b"ok", "no body bytes came before this");
    }

    /// A body that ends short of its length, or would run past it, is a
    /// service error: the client gets the head and the bytes that fit,
    /// then the close, never a byte past the length.
    fn a_body_off_its_declared_length_closes(backend) {
        let server = server(backend);
        for path in ["/short", "/long"] {
            let got = exchange(server.addr, &get(path));
            let text = String::from_utf8_lossy(&got);
            assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{path}: {text:?}");
            assert!(text.contains("Content-Length: 100\r\n"), "{path}: {text:?}");
            let body = &got[got.windows(4).position(|w| w == b"\r\n\r\n").expect("head end") + 4..];
            assert_eq!(body, &[b'x'; 50][..], "{path}");
        }
        wait_until(std::time::Duration::from_secs(60), "both counted", || {
            server.http_stats().service_errors == 2
        }, |done| *done);
    }

    /// A response sent whole with a body of another length than declared
    /// is answered 500, and so is a first flush already past the length
    /// (before any head goes out).
    fn a_whole_body_off_its_declared_length_is_a_500(backend) {
        let server = server(backend);
        expect_error(server.addr, &get("/whole"), 500);
        expect_error(server.addr, &get("/long-first"), 500);
        assert_eq!(server.http_stats().status_2xx, 0, "no head went out");
    }

    /// `send` replaces a declared length with its own body's, for GET and
    /// HEAD alike.
    fn send_replaces_a_declared_length(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/replaced"));
        assert_eq!((r.status, r.body.as_slice()), (404, &b"not found"[..]));
        c.send(b"HEAD /replaced HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.response_to(true);
        assert_eq!((r.status, r.header("content-length")), (404, Some("9")));
        assert_eq!(c.roundtrip(&get("/")).body, b"ok");
    }
}
