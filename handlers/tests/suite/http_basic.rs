//! The HTTP server layer serving `HttpEcho`, on both backends: methods,
//! keep-alive, `Connection: close`, HTTP/1.0, pipelining (including every
//! split of one stream), chunked bodies, `Expect: 100-continue`, `Date`.

use crate::support;

use std::time::Duration;

use percore_test_kit::http::*;
use percore_test_kit::*;
use support::http::*;

/// Five requests covering every framing and method, ending in `close`.
const STREAM: &[u8] = b"GET /a HTTP/1.1\r\nHost: t\r\n\r\n\
POST /cl HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\nhello world\
PUT /ch HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
5;ext=\"v\"\r\nhello\r\nA\r\n, chunked!\r\n0\r\nX-Trailer: t\r\n\r\n\
HEAD /h HTTP/1.1\r\nHost: t\r\n\r\n\
DELETE /d HTTP/1.1\r\nHost: t\r\n\r\n\
GET /lf HTTP/1.1\nHost: t\n\n\
GET /10 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n\
POST /last HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nConnection: close\r\n\r\nend";

backend_tests! {
    parallel;
    /// GET and HEAD answer the 20-byte JSON body (HEAD without the bytes,
    /// with the same Content-Length); POST and PUT echo body and type.
    fn methods(backend) {
        let server = TestServer::echo(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/any/path?q=1"));
        assert_eq!((r.status, r.body.as_slice()), (200, HELLO));
        assert_eq!(HELLO.len(), 20);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.header("content-length"), Some("20"));
        assert!(!r.closes());

        c.send(b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.response_to(true);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), Some("20"));

        let r = c.roundtrip(&post("/p", "text/x-test", b"some bytes"));
        assert_eq!((r.status, r.body.as_slice()), (200, &b"some bytes"[..]));
        assert_eq!(r.header("content-type"), Some("text/x-test"));

        let put = b"PUT /u HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nok";
        let r = c.roundtrip(put);
        assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
        assert_eq!(r.header("content-type"), None, "no type in, no type out");

        let empty = b"POST /e HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n";
        let r = c.roundtrip(empty);
        assert_eq!((r.status, r.body.len()), (200, 0));

        // The HEAD left no body bytes behind: the stream is still in sync.
        let r = c.roundtrip(&get("/after"));
        assert_eq!(r.body, HELLO);
    }

    /// Any other method: 405 with `Allow`, and the connection stays open.
    fn other_methods_get_405(backend) {
        let server = TestServer::echo(backend);
        let mut c = Client::connect(server.addr);
        for method in ["DELETE", "OPTIONS", "PATCH", "TRACE", "get", "BREW"] {
            let r = c.roundtrip(format!("{method} / HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
            assert_eq!(r.status, 405, "{method}");
            assert_eq!(r.header("allow"), Some("GET, HEAD, POST, PUT"));
            assert!(!r.closes());
        }
        // A 405 to a request with a body discards the body, not the stream.
        let r = c.roundtrip(b"DELETE / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nGET ");
        assert_eq!(r.status, 405);
        assert_eq!(c.roundtrip(&get("/")).status, 200);
    }

    /// Many requests on one connection: one accept, every request counted.
    fn keep_alive_reuses_the_connection(backend) {
        let server = TestServer::echo(backend);
        let mut c = Client::connect(server.addr);
        for i in 0..50 {
            let r = c.roundtrip(&post("/", "a/b", format!("n={i}").as_bytes()));
            assert_eq!(r.body, format!("n={i}").as_bytes());
        }
        let stats = server.stats();
        assert_eq!(stats.accepted, 1);
        assert_eq!(stats.requests, 50);
    }

    /// `Connection: close`: answered with `Connection: close`, then EOF;
    /// requests pipelined after it are not answered.
    fn connection_close(backend) {
        let server = TestServer::echo(backend);
        let mut c = Client::connect(server.addr);
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\nGET /2 HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.response();
        assert_eq!(r.status, 200);
        assert!(r.closes());
        c.expect_eof();
        assert_eq!(server.stats().requests, 1);
    }

    /// HTTP/1.0 closes unless it asks for keep-alive, which is confirmed.
    fn http_1_0(backend) {
        let server = TestServer::echo(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(b"GET / HTTP/1.0\r\n\r\n");
        assert_eq!((r.status, r.body.as_slice()), (200, HELLO));
        assert!(r.closes());
        c.expect_eof();

        let mut c = Client::connect(server.addr);
        for _ in 0..3 {
            let r = c.roundtrip(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
            assert_eq!(r.header("connection"), Some("keep-alive"));
            assert_eq!(r.body, HELLO);
        }
        let r = c.roundtrip(b"POST / HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabc");
        assert_eq!(r.body, b"abc");
    }

    /// 100 requests in one write: 100 responses, in order.
    fn pipelined_100_in_one_write(backend) {
        let server = TestServer::echo(backend);
        let mut batch = Vec::new();
        for i in 0..100 {
            if i % 2 == 0 {
                batch.extend_from_slice(&get(&format!("/{i}")));
            } else {
                batch.extend_from_slice(&post("/", "t/x", format!("body {i}").as_bytes()));
            }
        }
        let mut c = Client::connect(server.addr);
        assert_eq!(c.roundtrip(&get("/warm")).status, 200);
        let before = server.stats();
        c.send(&batch);
        for i in 0..100 {
            let r = c.response();
            assert_eq!(r.status, 200);
            if i % 2 == 0 {
                assert_eq!(r.body, HELLO, "response {i}");
            } else {
                assert_eq!(r.body, format!("body {i}").as_bytes(), "response {i}");
            }
        }
        // The answers of one read go out in one send: the 100 requests
        // (about 6 KiB) arrive in one or a few reads, so the core made a
        // handful of I/O calls, not one send per request.
        let after = server.stats();
        let io_calls = (after.submissions - before.submissions) + (after.syscalls - before.syscalls);
        assert!(io_calls < 12, "{io_calls} I/O calls for 100 pipelined requests");
        assert_eq!(after.requests, 101);
    }

    /// The same pipelined stream, split in two at every byte position
    /// (with a pause so the server sees two reads), gives byte-identical
    /// responses (dates aside).
    fn pipelined_stream_split_at_every_position(backend) {
        let server = TestServer::echo(backend);
        let whole = normalize_dates(&exchange(server.addr, STREAM));
        assert_eq!(statuses(&whole), [200, 200, 200, 200, 405, 200, 200, 200]);
        for cut in 1..STREAM.len() {
            let mut c = Client::connect(server.addr);
            c.send(&STREAM[..cut]);
            std::thread::sleep(Duration::from_millis(1));
            c.send(&STREAM[cut..]);
            let got = normalize_dates(&c.read_to_end());
            assert!(
                got == whole,
                "split at {cut} differs:\n{}\n---\n{}",
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&whole)
            );
        }
    }

    /// Chunked bodies with extensions and trailers, in one piece and
    /// trickled a few bytes at a time, bigger than one receive buffer.
    fn chunked_bodies(backend) {
        let server = TestServer::echo(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(
            b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
              3;a=b\r\nabc\r\n1\r\nd\r\n0\r\nTrailer-A: 1\r\nTrailer-B: 2\r\n\r\n",
        );
        assert_eq!(r.body, b"abcd");

        // 100 KiB in 1000-byte chunks: spans many reads.
        let data: Vec<u8> = (0..100 * 1024).map(|i| (i % 251) as u8).collect();
        let mut req = b"POST /big HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for piece in data.chunks(1000) {
            req.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            req.extend_from_slice(piece);
            req.extend_from_slice(b"\r\n");
        }
        req.extend_from_slice(b"0\r\n\r\n");
        let r = c.roundtrip(&req);
        assert_eq!(r.body, data);

        // Trickled: framing split across many small reads.
        c.send(b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
        for piece in [&b"5\r"[..], b"\nhel", b"lo\r\n", b"0\r", b"\n\r", b"\n"] {
            std::thread::sleep(Duration::from_millis(5));
            c.send(piece);
        }
        assert_eq!(c.response().body, b"hello");
        assert_eq!(c.roundtrip(&get("/")).body, HELLO);
    }

    /// A Content-Length body larger than a receive buffer, in one write.
    fn large_body_spanning_reads(backend) {
        let server = TestServer::echo(backend);
        let data: Vec<u8> = (0..512 * 1024).map(|i| (i * 7 % 256) as u8).collect();
        let mut c = Client::connect(server.addr);
        // Writing 512 KiB while the echo comes back needs a reader thread
        // only if the socket buffers fill; the server reads the whole body
        // before it answers, so one thread suffices.
        let r = c.roundtrip(&post("/", "application/octet-stream", &data));
        assert_eq!(r.body.len(), data.len());
        assert!(r.body == data);
        assert_eq!(c.roundtrip(&get("/")).body, HELLO);
    }

    /// `Expect: 100-continue`: the 100 comes only when the service wants
    /// the body, and the client sends the body only after it.
    fn expect_100_continue(backend) {
        let server = TestServer::echo(backend);
        let mut c = Client::connect(server.addr);
        c.send(b"POST / HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
        let interim = c.response();
        assert_eq!(interim.status, 100);
        c.send(b"hello");
        let r = c.response();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello"[..]));
        assert!(!r.closes());

        // GET does not read its body: no 100, and the connection closes
        // after the answer since the body may or may not follow.
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
        let r = c.response();
        assert_eq!(r.status, 200);
        assert!(r.closes());
        c.expect_eof();

        // A client that sends the body anyway gets no 100.
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(b"PUT / HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
    }

    /// Every response has a well-formed, current `Date`.
    fn date_header(backend) {
        let server = TestServer::echo(backend);
        let mut c = Client::connect(server.addr);
        let first = c.roundtrip(&get("/"));
        let date = first.header("date").expect("a Date header").to_owned();
        assert_eq!(date.len(), 29);
        assert!(date.ends_with(" GMT"), "{date}");
        std::thread::sleep(Duration::from_millis(1100));
        let later = c.roundtrip(&get("/"));
        assert_ne!(later.header("date"), Some(date.as_str()), "refreshed after a second");
    }
}
