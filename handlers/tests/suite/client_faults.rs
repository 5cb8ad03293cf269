//! The HTTP client against servers that misbehave, written here with
//! `std::net`, on both backends: a garbage status line, a body cut short,
//! a close inside a chunked body, a server that never answers, one that
//! stalls inside the body; a refused connect, a name that cannot resolve,
//! URLs and requests that cannot be sent; a body delimited by the close;
//! and the retry on a reused connection the server closed.
//!
//! Every timeout under test runs against a server that never sends what
//! is waited for, so any value gives the same verdict.

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use percore_handlers::client::{Client, ErrorKind, Op};
use percore_test_kit::*;
use support::client::on_core;

/// A failure guard only: how long a test server waits on a silent
/// client.
const HANG: Duration = Duration::from_secs(60);

/// A timeout under test: its server never answers, so its length only
/// sets how long the test takes.
const SHORT: Duration = Duration::from_millis(200);

/// A server on 127.0.0.1 that runs `script` on each connection it
/// accepts (with the connection's number, from 0), each on a thread of
/// its own; counts the connections.
fn raw_server<F>(script: F) -> (SocketAddr, Arc<AtomicUsize>)
where
    F: Fn(usize, TcpStream) + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let script = Arc::new(script);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let n = count.fetch_add(1, Ordering::SeqCst);
            let script = script.clone();
            std::thread::spawn(move || script(n, conn));
        }
    });
    (addr, accepted)
}

/// Reads one request head; `false` at the end of stream.
fn read_head(conn: &mut TcpStream) -> bool {
    conn.set_read_timeout(Some(HANG)).expect("read timeout");
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return false,
        }
    }
    true
}

/// Waits until the client closes (or the guard passes), holding the
/// connection open meanwhile.
fn hold(mut conn: TcpStream) {
    let mut sink = [0u8; 1024];
    while matches!(conn.read(&mut sink), Ok(n) if n > 0) {}
}

/// Answers one request with `bytes`, then holds the connection.
fn answer_with(bytes: &'static [u8]) -> impl Fn(usize, TcpStream) + Send + Sync + 'static {
    move |_, mut conn| {
        if read_head(&mut conn) {
            let _ = conn.write_all(bytes);
            hold(conn);
        }
    }
}

/// Answers one request with `bytes`, then closes.
fn answer_and_close(bytes: &'static [u8]) -> impl Fn(usize, TcpStream) + Send + Sync + 'static {
    move |_, mut conn| {
        if read_head(&mut conn) {
            let _ = conn.write_all(bytes);
        }
    }
}

backend_tests! {
    parallel;
    /// A status line that is not HTTP is a bad response.
    fn garbage_status_line(backend) {
        let (addr, _) = raw_server(answer_with(b"SSH-2.0-OpenSSH_9.6\r\n\r\n"));
        let e = on_core(backend, async move {
            Client::new().get(&format!("http://{addr}/")).send().await.expect_err("garbage")
        });
        assert!(matches!(e.kind(), ErrorKind::BadResponse(_)), "{e}");
        assert!(e.to_string().contains("bad response"), "{e}");
    }

    /// A body shorter than its Content-Length, then the close, is
    /// truncated, whether read whole or in pieces.
    fn truncated_content_length_body(backend) {
        const CUT: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this";
        let (addr, _) = raw_server(answer_and_close(CUT));
        on_core(backend, async move {
            let client = Client::new();
            let url = format!("http://{addr}/");
            let mut r = client.get(&url).send().await.expect("the head is fine");
            let e = r.body().await.expect_err("truncated");
            assert_eq!(e.kind(), ErrorKind::Truncated, "{e}");
            assert_eq!(
                e.to_string(),
                format!("GET {url}: the server closed the connection before the response ended")
            );
            let mut r = client.get(&url).send().await.expect("the head is fine");
            let mut got = Vec::new();
            let e = loop {
                match r.chunk().await {
                    Ok(Some(piece)) => got.extend_from_slice(&piece),
                    Ok(None) => panic!("a truncated body ended cleanly"),
                    Err(e) => break e,
                }
            };
            assert_eq!(e.kind(), ErrorKind::Truncated);
            assert_eq!(got, b"only this");
        });
    }

    /// A close inside a chunked body is truncated.
    fn close_mid_chunked_body(backend) {
        const CUT: &[u8] =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n10\r\nnot sixteen";
        let (addr, _) = raw_server(answer_and_close(CUT));
        let e = on_core(backend, async move {
            let mut r = Client::new().get(&format!("http://{addr}/")).send().await.expect("head");
            r.body().await.expect_err("truncated")
        });
        assert_eq!(e.kind(), ErrorKind::Truncated, "{e}");
    }

    /// A server that accepts, reads the request and never answers: the
    /// head timeout, named.
    fn no_answer_is_a_head_timeout(backend) {
        let (addr, _) = raw_server(|_, mut conn| {
            if read_head(&mut conn) {
                hold(conn);
            }
        });
        let url = format!("http://{addr}/x");
        let u = url.clone();
        let e = on_core(backend, async move {
            Client::new().get(&u).head_timeout(SHORT).send().await.expect_err("no answer")
        });
        assert_eq!(e.kind(), ErrorKind::Timeout(Op::ReadHead));
        assert!(e.is_timeout());
        assert_eq!(
            e.to_string(),
            format!("GET {url}: reading the response head timed out after 200ms")
        );
    }

    /// A server that sends the head and part of the body, then stalls:
    /// the body timeout, named.
    fn stalled_body_is_a_body_timeout(backend) {
        const PART: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
        let (addr, _) = raw_server(answer_with(PART));
        let e = on_core(backend, async move {
            let client = Client::new();
            let mut r = client
                .get(&format!("http://{addr}/"))
                .body_timeout(SHORT)
                .send()
                .await
                .expect("head");
            r.body().await.expect_err("stalled")
        });
        assert_eq!(e.kind(), ErrorKind::Timeout(Op::ReadBody));
        assert!(e.to_string().contains("reading the response body timed out"), "{e}");
    }

    /// Nothing listens: the connect fails with the OS's reason.
    fn connect_refused(backend) {
        let addr = {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("address")
        };
        let e = on_core(backend, async move {
            Client::new().get(&format!("http://{addr}/")).send().await.expect_err("refused")
        });
        assert_eq!(e.kind(), ErrorKind::Connect);
        assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED));
        assert!(e.to_string().contains("connecting failed: Connection refused"), "{e}");
    }

    /// A name under `.invalid` fails to resolve, at once (RFC 6761).
    fn unresolvable_name(backend) {
        let e = on_core(backend, async move {
            Client::new().get("http://no-such-host.invalid/").send().await.expect_err("invalid")
        });
        assert_eq!(e.kind(), ErrorKind::Resolve);
        assert!(e.to_string().starts_with("GET http://no-such-host.invalid/: resolving"), "{e}");
    }

    /// What cannot be sent is refused before anything is.
    fn invalid_urls_and_requests(backend) {
        on_core(backend, async move {
            let client = Client::new();
            for url in ["ftp://h/", "http://h/a b", "127.0.0.1:80", "http://u@h/"] {
                let e = client.get(url).send().await.expect_err(url);
                assert!(matches!(e.kind(), ErrorKind::InvalidUrl(_)), "{e}");
            }
            let e = client.get("https://127.0.0.1:1/").send().await.expect_err("https");
            assert!(matches!(e.kind(), ErrorKind::Unsupported(_)), "{e}");
            assert!(e.to_string().contains("https is not supported by this client"), "{e}");
            let bad = [
                client.get("http://127.0.0.1:1/").header("X", "a\r\nY: b"),
                client.get("http://127.0.0.1:1/").header("Bad Name", "v"),
                client.get("http://127.0.0.1:1/").header("Content-Length", "5"),
                client.request("GE T", "http://127.0.0.1:1/"),
            ];
            for request in bad {
                let e = request.send().await.expect_err("invalid");
                assert!(matches!(e.kind(), ErrorKind::InvalidRequest(_)), "{e}");
            }
        });
    }

    /// A body with no length runs until the close, read whole or in
    /// pieces; its connection is never pooled.
    fn body_until_close(backend) {
        const OLD: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the close";
        let (addr, accepted) = raw_server(answer_and_close(OLD));
        on_core(backend, async move {
            let client = Client::new();
            let url = format!("http://{addr}/");
            let mut r = client.get(&url).send().await.expect("get");
            assert_eq!(&r.body().await.expect("body")[..], b"until the close");
            let mut r = client.get(&url).send().await.expect("get");
            let mut got = Vec::new();
            while let Some(piece) = r.chunk().await.expect("chunk") {
                got.extend_from_slice(&piece);
            }
            assert_eq!(got, b"until the close");
        });
        assert_eq!(accepted.load(Ordering::SeqCst), 2, "a connection each");
    }

    /// The server answers the first request, then closes the kept-alive
    /// connection when the second comes, without a byte of answer: a GET
    /// is sent again on a new connection, a POST is not.
    fn retries_once_on_a_reused_connection(backend) {
        const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        let script = |n: usize, mut conn: TcpStream| {
            // Connection 0 answers one request and drops the next; the
            // others answer every request.
            while read_head(&mut conn) {
                if n == 0 && conn.write_all(OK).is_ok() && read_head(&mut conn) {
                    return;
                }
                if n > 0 && conn.write_all(OK).is_err() {
                    return;
                }
            }
        };
        let (addr, accepted) = raw_server(script);
        on_core(backend, async move {
            let client = Client::new();
            let url = format!("http://{addr}/");
            let mut r = client.get(&url).send().await.expect("first");
            assert_eq!(&r.body().await.expect("body")[..], b"ok");
            let mut r = client.get(&url).send().await.expect("retried");
            assert_eq!(&r.body().await.expect("body")[..], b"ok");
        });
        assert_eq!(accepted.load(Ordering::SeqCst), 2, "one retry, on a new connection");

        let (addr, _) = raw_server(script);
        let e = on_core(backend, async move {
            let client = Client::new();
            let url = format!("http://{addr}/");
            let mut r = client.post(&url).send().await.expect("first");
            assert_eq!(&r.body().await.expect("body")[..], b"ok");
            client.post(&url).send().await.expect_err("a POST is not retried")
        });
        assert_eq!(e.kind(), ErrorKind::Closed, "{e}");
    }
}
