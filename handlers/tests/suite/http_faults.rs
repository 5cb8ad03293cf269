//! FAULTS.md section A (HTTP parsing and framing) through a real server on
//! both backends: every payload gets its status, `Connection: close` and
//! the close, and nothing after a framing error is ever answered. The
//! protocol core's unit tests cover the same rows byte by byte and at every
//! split; these prove the connection loop acts on what it says.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use percore_test_kit::http::*;
use percore_test_kit::*;
use support::http::*;

/// `POST /` with `Host` and the given header lines, then `body`.
fn with_headers(lines: &str, body: &[u8]) -> Vec<u8> {
    let mut v = format!("POST / HTTP/1.1\r\nHost: t\r\n{lines}\r\n").into_bytes();
    v.extend_from_slice(body);
    v
}

fn chunked(body: &[u8]) -> Vec<u8> {
    with_headers("Transfer-Encoding: chunked\r\n", body)
}

/// Sends `bytes` then a valid GET on one connection; exactly one error
/// response with `status` comes back (the GET is never answered).
fn only_error(addr: std::net::SocketAddr, bytes: &[u8], status: u16) {
    let mut payload = bytes.to_vec();
    payload.extend_from_slice(&get("/smuggled"));
    let got = exchange(addr, &payload);
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with(&format!("HTTP/1.1 {status} ")),
        "expected {status} for {:?}, got {text:?}",
        String::from_utf8_lossy(&bytes[..bytes.len().min(120)])
    );
    assert_eq!(statuses(&got), [status], "one response only: {text:?}");
    assert!(text.contains("\r\nConnection: close\r\n"));
}

/// What a recording service saw: each request's body read result.
type Seen = Arc<Mutex<Vec<Result<Vec<u8>, String>>>>;

/// Records every body it reads, then echoes it.
struct Recorder(Seen);

impl Service for Recorder {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> std::io::Result<()> {
        let body = req.body().await;
        let entry = body.as_ref().map(|b| b.to_vec()).map_err(|e| e.to_string());
        self.0.lock().expect("lock").push(entry);
        res.send(200, None, body?)?;
        Ok(())
    }
}

backend_tests! {
    parallel;
    /// A1: malformed request lines.
    fn a01_malformed_request_line(backend) {
        let server = TestServer::echo(backend);
        for raw in [
            &b"GE T / HTTP/1.1\r\n\r\n"[..],
            b"G\0ET / HTTP/1.1\r\nHost: t\r\n\r\n",
            b"G=\":<>(e),[T];?\" /get HTTP/1.1\r\nHost: t\r\n\r\n",
        ] {
            expect_error(server.addr, raw, 400);
            only_error(server.addr, raw, 400);
        }
    }

    /// A2: a request line over 8 KiB is 414, and so is a 64 KiB one that
    /// never ends (not 431, not a wait for the line end).
    fn a02_request_line_too_long(backend) {
        let server = TestServer::echo(backend);
        let long = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(8 * 1024));
        expect_error(server.addr, long.as_bytes(), 414);
        let open = format!("GET /{}", "a".repeat(64 * 1024));
        expect_error(server.addr, open.as_bytes(), 414);
        // At the limit it is served.
        let fits = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(8 * 1024 - 14));
        assert_eq!(one(server.addr, fits.as_bytes()).status, 200);
    }

    /// A3: a header section over 32 KiB, one field line over 8 KiB, a
    /// 64 KiB header name (complete or still open): 431. Memory bounds are
    /// checked in `http_flood.rs`.
    fn a03_header_section_too_large(backend) {
        let server = TestServer::echo(backend);
        let field = format!("X-Big: {}\r\n", "v".repeat(7 * 1024));
        expect_error(server.addr, &with_headers(&field.repeat(5), b""), 431);
        let line = format!("X: {}\r\n", "v".repeat(8 * 1024));
        expect_error(server.addr, &with_headers(&line, b""), 431);
        let name = "N".repeat(64 * 1024);
        expect_error(server.addr, &with_headers(&format!("{name}: v\r\n"), b""), 431);
        expect_error(server.addr, format!("GET / HTTP/1.1\r\nHost: t\r\n{name}").as_bytes(), 431);
    }

    /// A4: 101 header fields is 431; 100 is fine.
    fn a04_too_many_headers(backend) {
        let server = TestServer::echo(backend);
        let lines: String = (0..100).map(|n| format!("X-{n}: v\r\n")).collect();
        expect_error(server.addr, &with_headers(&lines, b""), 431);
        let ok: String = (0..99).map(|n| format!("X-{n}: v\r\n")).collect();
        assert_eq!(one(server.addr, &with_headers(&ok, b"")).status, 200);
        // Past the slots a head is parsed into first, the fields still
        // count: the body's length is the 40th field.
        let many: String = (0..39).map(|n| format!("X-{n}: v\r\n")).collect();
        let r = one(server.addr, &with_headers(&format!("{many}Content-Length: 5\r\n"), b"hello"));
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello"[..]));
    }

    /// A5: Content-Length with Transfer-Encoding: 400, and the smuggled
    /// request in the body is never answered.
    fn a05_content_length_with_transfer_encoding(backend) {
        let server = TestServer::echo(backend);
        let smuggle = with_headers(
            "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
            b"0\r\n\r\nGET /admin HTTP/1.1\r\nHost: t\r\n\r\n",
        );
        only_error(server.addr, &smuggle, 400);
        let reversed = with_headers("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", b"0\r\n\r\n");
        only_error(server.addr, &reversed, 400);
    }

    /// A6: two Content-Length fields, differing or identical: 400, with a
    /// body that says which rule the request broke.
    fn a06_duplicate_content_length(backend) {
        let server = TestServer::echo(backend);
        only_error(server.addr, &with_headers("Content-Length: 1\r\nContent-Length: 0\r\n", b"a"), 400);
        let r = one(server.addr, &with_headers("Content-Length: 1\r\nContent-Length: 1\r\n", b"a"));
        assert_eq!(r.body, b"Bad Request: duplicate Content-Length\n");
        only_error(server.addr, &with_headers("Content-Length: 5\r\nContent-Length: 5\r\n", b"hello"), 400);
        only_error(server.addr, &with_headers("Content-Length: 5, 5\r\n", b"hello"), 400);
    }

    /// A7: non-digit Content-Length values: 400 + close, and the core does
    /// not spin afterwards (CVE-2023-34188 was a busy loop): once every
    /// connection is closed, the core sleeps in its wait. A spin shows as
    /// loop turns (`enters`) by the thousand; an idle core makes a few at
    /// most however slow the machine, and uses no CPU time to speak of
    /// (its own CPU time, not the wall clock, so other load on the
    /// machine cannot add to it).
    fn a07_content_length_syntax(backend) {
        let server = TestServer::echo(backend);
        for value in ["+1_0", "0x10", "010", "-48", "", "1Z", "99999999999999999999", "1 0"] {
            only_error(server.addr, &with_headers(&format!("Content-Length: {value}\r\n"), b""), 400);
        }
        let r = one(server.addr, &with_headers("Content-Length: 10\r\n", b"0123456789"));
        assert_eq!(r.body, b"0123456789");
        wait_until(Duration::from_secs(60), "every connection closed", || server.stats().active == 0, |done| *done);
        let before = server.stats();
        std::thread::sleep(Duration::from_millis(300));
        let after = server.stats();
        let turns = after.enters - before.enters;
        let spent = after.cpu_time.saturating_sub(before.cpu_time);
        assert!(turns <= 20, "an idle core turned its loop {turns} times, using {spent:?}");
        assert!(spent < Duration::from_millis(100), "idle core used {spent:?} in {turns} turns");
    }

    /// A8: unknown codings are 501; chunked not last, empty or non-token
    /// elements, two TE lines, TE in HTTP/1.0 are 400.
    fn a08_transfer_encoding(backend) {
        let server = TestServer::echo(backend);
        let te = |v: &[u8]| {
            let mut req = b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: ".to_vec();
            req.extend_from_slice(v);
            req.extend_from_slice(b"\r\n\r\n0\r\n\r\n");
            req
        };
        only_error(server.addr, &te(b"gzip"), 501);
        only_error(server.addr, &te(b"chunked, gzip"), 400);
        only_error(server.addr, &te(b",chunked"), 400);
        only_error(server.addr, &te(b"\xa0chunked"), 400);
        let two = with_headers("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n");
        only_error(server.addr, &two, 400);
        only_error(server.addr, b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400);
    }

    /// A9: malformed chunk sizes are 400 and what follows is never taken
    /// for the next request.
    fn a09_chunk_size_syntax(backend) {
        let server = TestServer::echo(backend);
        for body in [
            &b"0_2e\r\n"[..],
            b"0x1\r\na\r\n0\r\n\r\n",
            b"+1\r\na\r\n0\r\n\r\n",
            b"\r\n",
            b"10000000000000000\r\n",
            b"5\r\r;ABCD\r\n34\r\nE\r\n0\r\n\r\n",
            b"1\r\na\n0\r\n\r\n",
        ] {
            only_error(server.addr, &chunked(body), 400);
        }
    }

    /// A10: chunk extensions over 16 KiB are 400, a trailer section over
    /// 16 KiB is 431; a trailer that looks like a request line is a field.
    fn a10_chunk_extensions_and_trailers(backend) {
        let server = TestServer::echo(backend);
        let ext = format!("1;x={}\r\na\r\n0\r\n\r\n", "e".repeat(16 * 1024));
        only_error(server.addr, &chunked(ext.as_bytes()), 400);
        let trailer = format!("0\r\nX-T: {}\r\n\r\n", "t".repeat(16 * 1024));
        only_error(server.addr, &chunked(trailer.as_bytes()), 431);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&chunked(b"0\r\nX:POST / HTTP/1.1\r\n\r\n"));
        assert_eq!((r.status, r.body.len()), (200, 0));
        assert_eq!(c.roundtrip(&get("/")).body, HELLO, "one request, then the next");
    }

    /// A11: obs-fold, leading whitespace, space before the colon, a split
    /// name, a line without a colon, an empty name: 400.
    fn a11_field_syntax(backend) {
        let server = TestServer::echo(backend);
        for raw in [
            &b"GET / HTTP/1.1\r\nHost: t\r\nX: a\r\n b\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\n Host: t\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length : 5\r\n\r\nhello",
            b"GET / HTTP/1.1\r\nHost: t\r\nTransfer-\r\nEncoding: chunked\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length 10\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: t\r\n:\r\n\r\n",
        ] {
            only_error(server.addr, raw, 400);
        }
    }

    /// A12: bare CR or NUL in a value, bytes >= 0x80 in a name or in the
    /// request target: 400.
    fn a12_forbidden_bytes(backend) {
        let server = TestServer::echo(backend);
        for raw in [
            &b"GET / HTTP/1.1\r\nHost: t\r\nX: va\rlue\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost: t\r\nX: va\0lue\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: t\r\nX\xffY: v\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: t\r\n\x80: v\r\n\r\n",
            b"GET /caf\xc3\xa9 HTTP/1.1\r\nHost: t\r\n\r\n",
            b"GET /?q=\xff HTTP/1.1\r\nHost: t\r\n\r\n",
        ] {
            only_error(server.addr, raw, 400);
        }
    }

    /// A13: bare LF line endings in the head are accepted (the proxy part
    /// of this row belongs to the proxy's tests).
    fn a13_bare_lf(backend) {
        let server = TestServer::echo(backend);
        let mut c = Client::connect(server.addr);
        assert_eq!(c.roundtrip(b"GET / HTTP/1.1\nHost: t\n\n").body, HELLO);
        assert_eq!(c.roundtrip(b"POST / HTTP/1.1\nHost: t\nContent-Length: 2\n\nhi").body, b"hi");
    }

    /// A14: HTTP/1.1 without Host, two Hosts, an invalid Host: 400.
    fn a14_host(backend) {
        let server = TestServer::echo(backend);
        only_error(server.addr, b"GET / HTTP/1.1\r\n\r\n", 400);
        only_error(server.addr, b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400);
        only_error(server.addr, b"GET / HTTP/1.1\r\nHost: a\x00b\r\n\r\n", 400);
        // Allowed bytes in a shape the grammar does not allow.
        only_error(server.addr, b"GET / HTTP/1.1\r\nHost: :a\r\n\r\n", 400);
        only_error(server.addr, b"GET / HTTP/1.1\r\nHost: a:80:80\r\n\r\n", 400);
        only_error(server.addr, b"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 400);
        assert_eq!(one(server.addr, b"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n").status, 200);
        assert_eq!(one(server.addr, b"GET / HTTP/1.1\r\nHost: example.com:8080\r\n\r\n").status, 200);
    }

    /// The refusal of a `HEAD` request has the fields of any other and no
    /// body (RFC 9110 §9.3.2), whether the head was malformed, refused, or
    /// never finished.
    fn error_answers_to_head_have_no_body(backend) {
        let server = TestServer::echo_with(backend, short_config());
        for (raw, status) in [
            (&b"HEAD / HTTP/1.1\r\n\r\n"[..], 400),
            (b"HEAD / HTTP/1.1\r\nHost: t\r\nExpect: tea\r\n\r\n", 417),
            (b"HEAD / HTTP/1.1\r\nHost: t\r\n", 408),
        ] {
            let mut c = Client::connect(server.addr);
            c.send(raw);
            let r = c.response_to(true);
            assert_eq!(r.status, status, "{:?}", String::from_utf8_lossy(raw));
            assert!(r.closes());
            assert!(r.header("content-length").is_some_and(|n| n != "0"), "the length a GET would get");
            c.expect_eof();
        }
    }

    /// A15: an unsupported major version is 505; malformed versions and
    /// HTTP/0.9 are 400; a higher minor version (`HTTP/1.2`) is served
    /// as HTTP/1.1 (RFC 9110 §6.2), the connection kept.
    fn a15_versions(backend) {
        let server = TestServer::echo(backend);
        let line = |v: &str| format!("GET / {v}\r\nHost: t\r\n\r\n").into_bytes();
        let got = exchange(server.addr, b"GET / HTTP/1.2\r\nHost: t\r\nConnection: close\r\n\r\n");
        assert!(got.starts_with(b"HTTP/1.1 200 OK\r\n"), "{:?}", String::from_utf8_lossy(&got));
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&line("HTTP/1.9"));
        assert_eq!((r.status, r.closes()), (200, false));
        assert_eq!(c.roundtrip(&line("HTTP/1.1")).status, 200);
        only_error(server.addr, &line("HTTP/2.0"), 505);
        only_error(server.addr, &line("HTTP/4294967295.255"), 400);
        only_error(server.addr, &line("HTTP/\r\r1.1"), 400);
        only_error(server.addr, b"GET /\r\n", 400);
    }

    /// A16: pipelined requests are answered in order; a valid request
    /// before garbage is answered before the 400; a zero-length body does
    /// not swallow the next request.
    fn a16_pipelining(backend) {
        let server = TestServer::echo(backend);
        let mut three = Vec::new();
        for p in ["/1", "/2", "/3"] {
            three.extend_from_slice(&post(p, "t/x", p.as_bytes()));
        }
        let mut c = Client::connect(server.addr);
        c.send(&three);
        for p in ["/1", "/2", "/3"] {
            assert_eq!(c.response().body, p.as_bytes());
        }
        let got = exchange(server.addr, b"GET / HTTP/1.1\r\nHost: t\r\n\r\nInvalid\r\n\r\n");
        assert_eq!(statuses(&got), [200, 400]);
        let got = exchange(
            server.addr,
            b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\nGET /n HTTP/1.1\r\nHost: t\r\n\r\n",
        );
        assert_eq!(statuses(&got), [200, 200]);
    }

    /// A17: a body shorter than its Content-Length, then FIN: no response,
    /// the connection closes, and the service never gets a truncated body
    /// (its read fails).
    fn a17_incomplete_body(backend) {
        let seen: Seen = Arc::default();
        let record = seen.clone();
        let server = TestServer::start(backend, Config::default(), move || Recorder(record.clone()));
        let got = exchange(server.addr, &with_headers("Content-Length: 10\r\n", b"hello"));
        assert!(got.is_empty(), "no response: {:?}", String::from_utf8_lossy(&got));
        let seen = seen.lock().expect("lock");
        assert_eq!(seen.len(), 1);
        assert!(seen[0].is_err(), "the body read failed: {:?}", seen[0]);
    }

    /// A18: over 1 MiB by Content-Length is refused from the head alone;
    /// by chunked stream, at the chunk that crosses the limit (the test
    /// never sends the end of the body).
    fn a18_body_too_large(backend) {
        let server = TestServer::echo(backend);
        expect_error(server.addr, &with_headers("Content-Length: 2097152\r\n", b""), 413);
        let mut c = Client::connect(server.addr);
        c.send(&chunked(b""));
        let piece = vec![b'x'; 64 * 1024];
        let mut sent = 0;
        while sent <= 1 << 20 {
            c.send(format!("{:x}\r\n", piece.len()).as_bytes()).send(&piece).send(b"\r\n");
            sent += piece.len();
        }
        let r = c.response();
        assert_eq!(r.status, 413);
        assert_eq!(r.body, b"Content Too Large: chunked body over limit\n");
        assert!(r.closes());
        c.expect_eof();
        // Exactly at the limit is fine.
        let r = one(server.addr, &post("/", "a/b", &vec![b'y'; 1 << 20]));
        assert_eq!((r.status, r.body.len()), (200, 1 << 20));
    }

    /// A19: 100 Continue comes before the client sends the body (see also
    /// `http_basic`); an unknown expectation is 417, an empty one none.
    fn a19_expect(backend) {
        let server = TestServer::echo(backend);
        let mut c = Client::connect(server.addr);
        c.send(&with_headers("Expect: 100-continue\r\nContent-Length: 3\r\n", b""));
        assert_eq!(c.response().status, 100, "100 before any body byte");
        c.send(b"abc");
        assert_eq!(c.response().body, b"abc");
        only_error(server.addr, &with_headers("Expect: foo\r\nContent-Length: 0\r\n", b""), 417);
        // An empty list expects nothing (RFC 9110 §10.1.1): served, no 100.
        let r = one(server.addr, &with_headers("Expect:\r\nContent-Length: 2\r\n", b"hi"));
        assert_eq!((r.status, &r.body[..]), (200, &b"hi"[..]));
    }

    /// A20: random mutations of the payloads above never panic the server
    /// and only ever get well-formed responses with expected statuses or a
    /// close; the server still serves afterwards.
    fn a20_mutated_requests(backend) {
        let server = TestServer::echo(backend);
        let mut rng = Rng(0x5eed_0000 ^ backend as u64);
        for i in 0..250 {
            let seed = SEEDS[rng.below(SEEDS.len())];
            let mut input = seed.to_vec();
            for _ in 0..1 + rng.below(4) {
                mutate(&mut rng, &mut input);
            }
            let got = exchange(server.addr, &input);
            if got.is_empty() {
                continue;
            }
            let text = String::from_utf8_lossy(&got);
            assert!(text.starts_with("HTTP/1.1 "), "iteration {i}: {text:?} for {input:?}");
            let status: u16 = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
            assert!(
                [100, 200, 400, 405, 408, 413, 414, 417, 431, 501, 505].contains(&status),
                "iteration {i}: status {status} for {:?}",
                String::from_utf8_lossy(&input)
            );
        }
        assert_eq!(one(server.addr, &get("/")).body, HELLO);
        assert_eq!(server.stats().panics, 0);
    }
}

const SEEDS: &[&[u8]] = &[
    b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /p?q=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"POST /e HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
    b"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n0\r\nT: v\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx",
    b"GET / HTTP/1.1\nHost: a\n\nGET /2 HTTP/1.1\nHost: a\n\n",
    b"GE T / HTTP/1.1\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 0\r\n\r\na",
    b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0_2e\r\n5\r\r;ABCD\r\n",
    b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX:POST / HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a\x00b\r\nX: va\rlue\r\n\r\n",
    b"GET / HTTP/1.2\r\nHost: a\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\n\r\nInvalid\r\n\r\n",
    b"PUT / HTTP/1.1\r\nHost: a\r\nExpect: foo\r\nContent-Length: 0\r\n\r\n",
    b"DELETE / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\n\r\n",
];

const TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r",
    b":",
    b" ",
    b";",
    b"0",
    b"\0",
    b"\xff",
    b"Content-Length: 3\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"\r\n\r\n",
    b"ffffffff",
];

/// xorshift64*: small and deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    let at = rng.below(input.len() + 1);
    match rng.below(5) {
        0 if at < input.len() => input[at] = rng.next() as u8,
        1 => {
            let token = TOKENS[rng.below(TOKENS.len())];
            input.splice(at..at, token.iter().copied());
        }
        2 if at < input.len() => {
            let end = (at + 1 + rng.below(8)).min(input.len());
            input.drain(at..end);
        }
        3 => input.truncate(at),
        _ => {
            let copy = input.clone();
            input.extend_from_slice(&copy[at..]);
        }
    }
}
