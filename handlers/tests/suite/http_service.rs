//! The `Service` API beyond what `HttpEcho` uses, on both backends:
//! streamed responses (chunked, HTTP/1.0 until close, HEAD), streamed
//! request bodies, errors from the service, header checks, status rules,
//! a service closing the connection, and earlier pipelined answers sent
//! before the server waits for a body.

use crate::support;

use std::io;
use std::time::Duration;

use log_capture::warnings;
use percore_handlers::http::HttpError;
use percore_test_kit::http::*;
use percore_test_kit::log_capture;
use percore_test_kit::*;
use support::http::*;

/// Routes by path to the behaviours under test.
struct Api;

impl Service for Api {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        match req.path() {
            // Three pieces, flushed one by one.
            "/stream" => {
                res.header("Content-Type", b"text/plain")?;
                for piece in [&b"one,"[..], b"two,", b"three"] {
                    res.write(piece);
                    res.flush().await?;
                }
            }
            // Streams until a flush fails (the client stopped reading),
            // then returns as if all went well.
            "/until-lost" => loop {
                res.write(&[b'i'; 64 * 1024]);
                if res.flush().await.is_err() {
                    break;
                }
            },
            // Flushes, then fails: the client must see an incomplete body.
            "/stream-fail" => {
                res.write(b"partial");
                res.flush().await?;
                return Err(io::Error::other("backend went away"));
            }
            // Echoes the body piece by piece as it arrives, streaming.
            "/chunks" => {
                let mut pieces = 0u32;
                while let Some(piece) = req.chunk().await? {
                    pieces += 1;
                    res.write(piece);
                    res.flush().await?;
                }
                res.header("X-Pieces", pieces.to_string().as_bytes())
                    .expect_err("headers are fixed once the head is out");
            }
            // Reads one piece, then the rest with `body`.
            "/chunk-then-body" => {
                let first = req.chunk().await?.map(<[u8]>::to_vec).unwrap_or_default();
                let rest = req.body().await?.to_vec();
                res.write(format!("{}|{}", first.len(), rest.len()).as_bytes());
            }
            "/fail" => return Err(io::Error::other("service failure")),
            p if p.starts_with("/fail-logged") => return Err(io::Error::other("logged failure")),
            "/teapot" => return Err(HttpError::new(418, "short and stout").into()),
            "/headers" => {
                assert!(res.header("X-Bad", b"a\r\nSet-Cookie: x").is_err());
                assert!(res.header("Bad Name", b"v").is_err());
                assert!(res.header("Content-Length", b"0").is_err());
                assert!(res.header("connection", b"close").is_err());
                res.header("X-Good", b"yes")?;
                res.write(b"ok");
            }
            "/no-content" => {
                res.set_status(204);
                res.write(b"dropped");
            }
            "/interim" => res.set_status(101),
            "/panic" => panic!("a service bug"),
            path if path.starts_with("/where") => {
                let query = req.query().unwrap_or("-");
                res.write(format!("{path}|{query}").as_bytes());
            }
            // The head is out when it panics: only an incomplete body can
            // tell the client.
            "/panic-streaming" => {
                res.write(b"partial");
                res.flush().await?;
                panic!("a service bug after the head");
            }
            "/resend" => {
                res.header("Content-Type", b"text/html")?;
                res.header("X-Kept", b"yes")?;
                res.send(200, Some(b"text/plain"), b"replaced")?;
            }
            "/send-after-flush" => {
                res.write(b"partial");
                res.flush().await?;
                res.send(500, None, b"second")
                    .expect_err("the head is out: the response cannot be replaced");
            }
            "/close" => {
                res.close_connection()?;
                res.write(b"bye");
            }
            "/close-after-flush" => {
                res.write(b"partial");
                res.flush().await?;
                res.close_connection()
                    .expect_err("the head is out: it announced the connection kept");
            }
            _ => res.send(200, None, b"default")?,
        }
        Ok(())
    }
}

fn api(backend: Backend) -> TestServer {
    TestServer::start(backend, Config::default(), || Api)
}

backend_tests! {
    parallel;
    /// A flushed response is chunked for HTTP/1.1, and the connection
    /// stays usable after it.
    fn streamed_response_is_chunked(backend) {
        let server = api(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/stream"));
        assert_eq!(r.header("transfer-encoding"), Some("chunked"));
        assert_eq!(r.header("content-type"), Some("text/plain"));
        assert_eq!(r.body, b"one,two,three");
        assert!(!r.closes());
        assert_eq!(c.roundtrip(&get("/")).body, b"default");
    }

    /// HTTP/1.0 has no chunked coding: the body runs until the close.
    fn streamed_response_to_http_1_0_ends_with_the_close(backend) {
        let server = api(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(b"GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        assert!(r.closes());
        assert_eq!(r.header("content-length"), None);
        assert_eq!(r.body, b"one,two,three");
    }

    /// HEAD of a streamed response: the head only, connection kept.
    fn streamed_head_sends_no_body(backend) {
        let server = api(backend);
        let mut c = Client::connect(server.addr);
        c.send(b"HEAD /stream HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.response_to(true);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("transfer-encoding"), Some("chunked"));
        assert_eq!(c.roundtrip(&get("/")).body, b"default");
    }

    /// An error after the head went out aborts: the client sees a chunked
    /// body without its last chunk, then the close.
    fn error_after_flush_aborts(backend) {
        let server = api(backend);
        let got = exchange(server.addr, &get("/stream-fail"));
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text:?}");
        assert!(text.ends_with("7\r\npartial\r\n"), "no last chunk: {text:?}");
    }

    /// A service that ignores a failed flush (the client stopped reading,
    /// so the write timed out) and returns `Ok`: the connection still ends
    /// there, and the request pipelined behind it is not served on a
    /// connection whose output was lost.
    fn a_lost_write_ends_the_connection_whatever_the_service_returns(backend) {
        // A write timeout of half a second.
        let server = TestServer::start(backend, short_config(), || Api);
        let mut c = Client::connect(server.addr);
        let mut both = get("/until-lost");
        both.extend_from_slice(&get("/"));
        c.send(&both);
        wait_until(Duration::from_secs(60), "the connection to end", || {
            let stats = server.stats();
            stats.requests >= 1 && stats.active == 0
        }, |done| *done);
        let stats = server.http_stats();
        assert_eq!((stats.status_2xx, stats.service_errors), (1, 0), "{stats:?}");
        assert_eq!(server.stats().requests, 1, "the pipelined request was served");
    }

    /// An HTTP/1.0 body runs until the close, so a FIN after a failure
    /// would pass the partial body off as whole: the connection is reset
    /// instead, after the bytes sent.
    fn error_after_flush_to_http_1_0_resets(backend) {
        use std::io::{ErrorKind, Read, Write};
        let server = api(backend);
        let mut s = std::net::TcpStream::connect(server.addr).expect("connect");
        s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        s.write_all(b"GET /stream-fail HTTP/1.0\r\n\r\n").expect("send");
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        let end = loop {
            match s.read(&mut chunk) {
                Ok(0) => break Ok(()),
                Ok(n) => got.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => break Err(e.kind()),
            }
        };
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text:?}");
        assert!(text.ends_with("\r\n\r\npartial"), "{text:?}");
        assert_eq!(end, Err(ErrorKind::ConnectionReset), "{text:?}");
    }

    /// `chunk()` streams a request body as it arrives, here echoed back
    /// as a streamed response; the body spans many reads.
    fn request_body_streamed_with_chunk(backend) {
        let server = api(backend);
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&post("/chunks", "a/b", &data));
        assert_eq!(r.header("transfer-encoding"), Some("chunked"));
        assert!(r.body == data, "{} bytes back", r.body.len());
        // Chunked in, chunked out.
        let r = c.roundtrip(
            b"POST /chunks HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        );
        assert_eq!(r.body, b"abcde");
    }

    /// `body()` after `chunk()` returns what `chunk()` had not.
    fn body_after_chunk_returns_the_rest(backend) {
        let server = api(backend);
        let r = one(
            server.addr,
            b"POST /chunk-then-body HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n",
        );
        assert_eq!(r.body, b"3|4");
    }

    /// A service error is a 500 (or the status of an `HttpError`). A 5xx
    /// closes the connection; a 4xx, the service refusing a request read
    /// to its end, keeps it (a body left unread is read and dropped), for
    /// HTTP/1.0 too when it asked to keep it.
    /// An `HttpError`'s reason reaches the client; any other error's text
    /// stays in the server's log.
    fn service_errors(backend) {
        let server = api(backend);
        expect_error(server.addr, &get("/fail"), 500);
        assert_eq!(one(server.addr, &get("/fail")).body, b"Internal Server Error\n");
        let (r, mut c) = expect_kept_error(server.addr, &get("/teapot"), 418);
        assert_eq!(r.body, b"short and stout\n");
        let r = c.roundtrip(&post("/teapot", "text/plain", b"never read"));
        assert_eq!((r.status, r.closes()), (418, false));
        let r = c.roundtrip(b"GET /teapot HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        assert_eq!((r.status, r.header("connection")), (418, Some("keep-alive")));
        assert_eq!(c.roundtrip(&get("/")).body, b"default");
    }

    /// `path` is the target's path whatever its form, `query` what follows
    /// the `?`; `target` stays as sent.
    fn path_and_query(backend) {
        let server = api(backend);
        let mut c = Client::connect(server.addr);
        for (target, want) in [
            ("/where", "/where|-"),
            ("/where?a=1&b", "/where|a=1&b"),
            ("/where/x?", "/where/x|"),
            ("/where?q=%2F", "/where|q=%2F"),
            ("http://example.com/where?z=9", "/where|z=9"),
            ("HTTPS://example.com:8443/where/y", "/where/y|-"),
        ] {
            let r = c.roundtrip(format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
            assert_eq!(String::from_utf8_lossy(&r.body), want, "{target}");
        }
        // An absolute form without a path is `/`.
        let r = c.roundtrip(b"GET http://example.com?where HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(r.body, b"default");
    }

    /// A panic in the service is a bare 500 with `Connection: close`; the
    /// core counts it and goes on serving. After `flush` sent the head, the
    /// body ends incomplete instead.
    fn a_panic_is_answered_with_a_500(backend) {
        let server = api(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/panic"));
        assert_eq!(r.status, 500);
        assert!(r.closes());
        assert_eq!(r.body, b"Internal Server Error\n");
        c.expect_eof();
        // The server lingers on its close until the client's; then the
        // panic goes on and is counted.
        drop(c);
        assert_eq!(one(server.addr, &get("/")).body, b"default");
        let got = exchange(server.addr, &get("/panic-streaming"));
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text:?}");
        assert!(text.ends_with("7\r\npartial\r\n"), "no last chunk: {text:?}");
        wait_until(Duration::from_secs(60), "both panics counted", || {
            server.stats().panics == 2
        }, |done| *done);
    }

    /// `send` replaces a `Content-Type` added before (and keeps the other
    /// fields); once `flush` sent the head it is refused.
    fn send_replaces_the_content_type(backend) {
        let server = api(backend);
        let got = String::from_utf8(exchange(server.addr, &get("/resend"))).expect("ASCII");
        let types: Vec<&str> = got
            .lines()
            .filter(|l| l.to_ascii_lowercase().starts_with("content-type:"))
            .collect();
        assert_eq!(types, ["Content-Type: text/plain"], "{got:?}");
        assert!(got.contains("X-Kept: yes\r\n"), "{got:?}");
        assert!(got.ends_with("\r\n\r\nreplaced"), "{got:?}");
        let r = one(server.addr, &get("/send-after-flush"));
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"partial", "the service's asserts held");
    }

    /// An error answered with a 500 is a WARN naming the request, at most
    /// one a second per core, the next saying how many were left out; one
    /// answered with a 4xx (the client's doing) is not.
    fn failures_are_logged_once_a_second(backend) {
        let server = api(backend);
        // Both backends' cases share the process's log.
        let path = format!("/fail-logged/{backend}");
        let logged = || -> Vec<String> {
            warnings(&path).into_iter().filter(|l| l.contains("service failed")).collect()
        };
        expect_kept_error(server.addr, &get("/teapot"), 418);
        let teapots = warnings("teapot");
        assert!(teapots.is_empty(), "{teapots:?}");
        let started = std::time::Instant::now();
        for _ in 0..3 {
            expect_error(server.addr, &get(&path), 500);
        }
        let first = logged().len();
        // Within a second, one line; a slow machine may have crossed into
        // the next second or two (the line is written before the answer is
        // sent).
        if started.elapsed() < Duration::from_millis(900) {
            assert_eq!(first, 1, "{:?}", logged());
        }
        assert!((1..=3).contains(&first), "{:?}", logged());
        std::thread::sleep(Duration::from_millis(1100));
        expect_error(server.addr, &get(&path), 500);
        let all = logged();
        assert_eq!(all.len(), first + 1, "{all:?}");
        let last = all.last().expect("a line");
        let left_out = match 3 - first {
            0 => None,
            1 => Some("(1 more failure not logged since the last line)".to_owned()),
            n => Some(format!("({n} more failures not logged since the last line)")),
        };
        match left_out {
            Some(left_out) => assert!(last.contains(&left_out), "{all:?}"),
            None => assert!(!last.contains("not logged since the last line"), "{all:?}"),
        }
        assert!(last.contains("status=500") && last.contains("method=\"GET\""), "{last}");
    }

    /// A service can make its response the connection's last: it says
    /// `Connection: close`, the pipelined request behind it is not served,
    /// and the connection closes. After `flush` it is refused, and the
    /// connection stays usable.
    fn a_service_can_close_the_connection(backend) {
        let server = api(backend);
        let mut c = Client::connect(server.addr);
        let mut two = post("/close", "text/plain", b"unread body");
        two.extend_from_slice(&get("/"));
        let r = c.roundtrip(&two);
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"bye");
        assert!(r.closes(), "no Connection: close");
        c.expect_eof();
        drop(c);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/close-after-flush"));
        assert_eq!(r.body, b"partial", "the service's assert held");
        assert!(!r.closes());
        assert_eq!(c.roundtrip(&get("/")).body, b"default");
    }

    /// Header values that could split the response, non-token names and
    /// framing headers are refused; valid ones are sent.
    fn response_headers_are_checked(backend) {
        let server = api(backend);
        let r = one(server.addr, &get("/headers"));
        assert_eq!(r.status, 200, "the asserts in the service held");
        assert_eq!(r.header("x-good"), Some("yes"));
        assert_eq!(r.header("x-bad"), None);
        assert_eq!(r.body, b"ok");
    }

    /// 204 carries no body and no Content-Length; a 1xx status from the
    /// service is a 500.
    fn status_rules(backend) {
        let server = api(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/no-content"));
        assert_eq!(r.status, 204);
        assert_eq!(r.header("content-length"), None);
        assert_eq!(c.roundtrip(&get("/")).body, b"default", "no stray body bytes");
        assert_eq!(c.roundtrip(&get("/interim")).status, 500);
    }

    /// Answers already made are sent before the server waits for a body:
    /// a pipelined GET is answered while the POST after it lacks its body.
    fn earlier_answers_go_out_before_waiting_for_a_body(backend) {
        let server = TestServer::echo(backend);
        let mut c = Client::connect(server.addr);
        c.send(&get("/first"));
        c.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nab");
        assert_eq!(c.response().body, HELLO, "answered before the body is complete");
        c.send(b"cd");
        assert_eq!(c.response().body, b"abcd");
    }
}
