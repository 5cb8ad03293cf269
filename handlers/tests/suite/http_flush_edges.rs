//! What a response sent early with `flush` changes, on both backends: no
//! `100 Continue` after its head, a lingering close (a FIN, not a reset)
//! when its body fails with request bytes unread; and the framing of a
//! `HEAD` answer whose service skipped the body.

use crate::support;

use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;

use percore_test_kit::http::*;
use percore_test_kit::*;
use support::http::*;

struct Api;

impl Service for Api {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        match req.path() {
            // The head first, then the body it echoes.
            "/head-then-body" => {
                res.write(b"head-first,");
                res.flush().await?;
                let body = req.body().await?;
                res.write(body);
            }
            // Fails after its head, leaving the request body unread.
            "/fail-after-head" => {
                res.write(b"partial");
                res.flush().await?;
                return Err(io::Error::other("backend went away"));
            }
            "/panic-after-head" => {
                res.write(b"partial");
                res.flush().await?;
                panic!("told to panic after the head");
            }
            // Skips generating its body for HEAD, as the docs allow.
            "/lazy" => {
                if req.method() != "HEAD" {
                    res.write(b"0123456789");
                }
            }
            "/lazy-declared" => {
                if req.method() == "HEAD" {
                    res.set_content_length(10)?;
                } else {
                    res.write(b"0123456789");
                }
            }
            _ => res.send(200, None, b"default")?,
        }
        Ok(())
    }
}

fn api(backend: Backend) -> TestServer {
    TestServer::start(backend, Config::default(), || Api)
}

fn connect(server: &TestServer) -> TcpStream {
    let s = TcpStream::connect(server.addr).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    s
}

/// Reads until `bytes` end with `end`, or the peer closes.
fn read_until(s: &mut TcpStream, bytes: &mut Vec<u8>, end: &[u8]) {
    let mut chunk = [0u8; 4096];
    while !bytes.ends_with(end) {
        match s.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => panic!("read: {e}; so far {:?}", String::from_utf8_lossy(bytes)),
        }
    }
}

/// Reads to the end of the stream: how it ended, and the bytes before.
fn read_to_close(s: &mut TcpStream) -> (Vec<u8>, Result<(), ErrorKind>) {
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return (got, Ok(())),
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return (got, Err(e.kind())),
        }
    }
}

/// A request with 64 KiB of body the service never reads.
fn unread_body(path: &str) -> Vec<u8> {
    post(path, "application/octet-stream", &[b'u'; 64 * 1024])
}

backend_tests! {
    parallel;
    /// A client waiting on `Expect: 100-continue` gets the head the
    /// service flushed instead of a `100 Continue` after it (an interim
    /// answer cannot follow the final one), sends its body on seeing it,
    /// and the body is read; the connection stays usable.
    fn no_100_continue_after_a_flushed_head(backend) {
        let server = api(backend);
        let mut s = connect(&server);
        s.write_all(
            b"POST /head-then-body HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n\
              Content-Length: 5\r\n\r\n",
        )
        .expect("send head");
        let mut got = Vec::new();
        read_until(&mut s, &mut got, b"b\r\nhead-first,\r\n");
        s.write_all(b"hello").expect("send body");
        read_until(&mut s, &mut got, b"0\r\n\r\n");
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text:?}");
        assert!(!text.contains("100 Continue"), "{text:?}");
        assert!(
            text.ends_with("\r\n\r\nb\r\nhead-first,\r\n5\r\nhello\r\n0\r\n\r\n"),
            "{text:?}"
        );
        s.write_all(&get("/")).expect("send");
        let mut next = Vec::new();
        read_until(&mut s, &mut next, b"default");
        assert!(next.starts_with(b"HTTP/1.1 200 OK\r\n"), "{:?}", String::from_utf8_lossy(&next));
    }

    /// A body that fails after its head ends without its last chunk and a
    /// FIN, whether or not the request's body was read: the close lingers
    /// (reading and dropping input) so that unread bytes do not turn it
    /// into a reset, as they did on epoll.
    fn a_failed_streamed_body_ends_with_a_fin(backend) {
        let server = api(backend);
        for path in ["/fail-after-head", "/panic-after-head"] {
            let mut s = connect(&server);
            s.write_all(&unread_body(path)).expect("send");
            let (got, end) = read_to_close(&mut s);
            let text = String::from_utf8_lossy(&got);
            assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{path}: {text:?}");
            assert!(text.ends_with("7\r\npartial\r\n"), "{path}: no last chunk: {text:?}");
            assert_eq!(end, Ok(()), "{path}: {text:?}");
        }
    }

    /// A `HEAD` answer whose service skipped its body (and declared no
    /// length) has no `Content-Length` rather than a false 0; a declared
    /// length is sent; neither carries body bytes.
    fn head_without_a_body_claims_no_length(backend) {
        let server = api(backend);
        let mut c = Client::connect(server.addr);
        c.send(b"HEAD /lazy HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.response_to(true);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), None);
        assert_eq!(r.header("transfer-encoding"), None);
        c.send(b"HEAD /lazy-declared HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.response_to(true);
        assert_eq!(r.header("content-length"), Some("10"));
        let r = c.roundtrip(&get("/lazy"));
        assert_eq!(r.header("content-length"), Some("10"));
        assert_eq!(r.body, b"0123456789", "no stray bytes from the HEAD answers");
    }
}
