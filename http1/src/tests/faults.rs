//! One test per FAULTS.md section A row that the protocol core decides,
//! with the row's payloads. A17 (EOF mid-body) and the timeouts of section B
//! belong to the service layer; here we only check what it relies on.

use super::{request, run, status, Event, Machine};
use crate::{header_storage, parse_head, BodyDecoder, BodyKind, Limits};

/// `GET / HTTP/1.1` with `Host: a`, the given extra header lines, and `body`.
fn with_headers(lines: &str, body: &[u8]) -> Vec<u8> {
    let mut v = format!("POST / HTTP/1.1\r\nHost: a\r\n{lines}\r\n").into_bytes();
    v.extend_from_slice(body);
    v
}

#[test]
fn a01_malformed_request_line() {
    assert_eq!(status(b"GE T / HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(status(b"G\0ET / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    assert_eq!(
        status(b"G=\":<>(e),[T];?\" /get HTTP/1.1\r\nHost: a\r\n\r\n"),
        400
    );
    assert_eq!(status(b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.1 \r\nHost: a\r\n\r\n"), 400);
}

#[test]
fn a02_request_line_too_long_is_414() {
    let path = "a".repeat(8 * 1024);
    let long = format!("GET /{path} HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(status(long.as_bytes()), 414);
    // hyper#3874: no line end yet, far past every limit: 414, not 431.
    let open = format!("GET /{}", "a".repeat(64 * 1024));
    assert_eq!(status(open.as_bytes()), 414);
    // Exactly at the limit is fine.
    let fits = format!("GET /{} HTTP/1.1", "a".repeat(8 * 1024 - 14));
    assert_eq!(fits.len(), 8 * 1024);
    assert_eq!(
        run(format!("{fits}\r\nHost: a\r\n\r\n").as_bytes()).len(),
        1
    );
    // Endless empty lines before the request line count toward the limit.
    assert_eq!(status("\r\n".repeat(5000).as_bytes()), 414);
}

#[test]
fn a03_header_section_too_large_is_431() {
    let field = format!("X-Big: {}\r\n", "v".repeat(7 * 1024));
    assert_eq!(status(with_headers(&field.repeat(5), b"").as_slice()), 431);
    // One 64 KiB header name, complete and still open.
    let name = "N".repeat(64 * 1024);
    assert_eq!(
        status(with_headers(&format!("{name}: v\r\n"), b"").as_slice()),
        431
    );
    assert_eq!(
        status(format!("GET / HTTP/1.1\r\nHost: a\r\n{name}").as_bytes()),
        431
    );
    // A single field line over 8 KiB.
    let line = format!("X: {}\r\n", "v".repeat(8 * 1024));
    assert_eq!(status(with_headers(&line, b"").as_slice()), 431);
}

#[test]
fn a04_too_many_headers_is_431() {
    let lines: String = (0..100).map(|n| format!("X-{n}: v\r\n")).collect();
    assert_eq!(status(with_headers(&lines, b"").as_slice()), 431);
    let ok: String = (0..99).map(|n| format!("X-{n}: v\r\n")).collect();
    assert_eq!(
        run(&with_headers(&ok, b"")),
        vec![request("POST", "/", b"")]
    );
}

#[test]
fn a05_content_length_with_transfer_encoding_is_400() {
    let smuggle = with_headers(
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        b"0\r\n\r\nGET /admin HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    // Exactly one event: the smuggled request is never parsed.
    assert_eq!(run(&smuggle), vec![Event::Error(400)]);
}

#[test]
fn a06_duplicate_content_length_is_400() {
    assert_eq!(
        status(&with_headers(
            "Content-Length: 1\r\nContent-Length: 0\r\n",
            b"a"
        )),
        400
    );
    assert_eq!(
        status(&with_headers(
            "Content-Length: 5\r\nContent-Length: 5\r\n",
            b"hello"
        )),
        400
    );
    assert_eq!(
        status(&with_headers("Content-Length: 5, 5\r\n", b"hello")),
        400
    );
}

#[test]
fn a07_content_length_must_be_digits() {
    for value in [
        "+1_0",
        "0x10",
        "-48",
        "",
        "1Z",
        "99999999999999999999",
        "1 0",
        "1.0",
        "010",
        "00",
    ] {
        let req = with_headers(&format!("Content-Length: {value}\r\n"), b"");
        assert_eq!(status(&req), 400, "Content-Length: {value:?}");
    }
    assert_eq!(run(&with_headers("Content-Length: 0\r\n", b"")).len(), 1);
    assert_eq!(
        run(&with_headers("Content-Length: 10\r\n", b"0123456789")).len(),
        1
    );
}

#[test]
fn a08_transfer_encoding_rules() {
    let te = |v: &[u8]| {
        let mut req = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: ".to_vec();
        req.extend_from_slice(v);
        req.extend_from_slice(b"\r\n\r\n0\r\n\r\n");
        status(&req)
    };
    assert_eq!(te(b"gzip"), 501);
    assert_eq!(te(b"gzip, chunked"), 501);
    assert_eq!(te(b"chunked, gzip"), 400);
    assert_eq!(te(b",chunked"), 400);
    assert_eq!(te(b"\xa0chunked"), 400);
    assert_eq!(te(b"chunked, chunked"), 400);
    let two_lines = "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n";
    assert_eq!(status(&with_headers(two_lines, b"0\r\n\r\n")), 400);
    let http10 = b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    assert_eq!(status(http10), 400);
    // Case-insensitive, with OWS: accepted.
    assert_eq!(
        run(&with_headers(
            "Transfer-Encoding:  CHUNKED \r\n",
            b"0\r\n\r\n"
        ))
        .len(),
        1
    );
}

/// A chunked POST whose body is `body`.
fn chunked(body: &[u8]) -> Vec<u8> {
    with_headers("Transfer-Encoding: chunked\r\n", body)
}

#[test]
fn a09_chunk_size_syntax() {
    let next = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    let bodies: [&[u8]; 8] = [
        b"0_2e\r\n",
        b"0x1\r\na\r\n0\r\n\r\n",
        b"+1\r\na\r\n0\r\n\r\n",
        b"\r\n",
        b"10000000000000000\r\n",
        b"5\r\r;ABCD\r\n34\r\nE\r\n0\r\n\r\n",
        b"1\r\na\n0\r\n\r\n",
        b"1\na\r\n0\r\n\r\n",
    ];
    for body in bodies {
        let mut req = chunked(body);
        req.extend_from_slice(next);
        // The 400 is the only event: nothing after it is read as a request.
        assert_eq!(
            run(&req),
            vec![Event::Error(400)],
            "{:?}",
            String::from_utf8_lossy(body)
        );
    }
    // Sixteen hex digits are allowed; these then exceed the body limit.
    assert_eq!(status(&chunked(b"0000000000100001\r\n")), 413);
    assert_eq!(status(&chunked(b"ffffffffffffffff\r\n")), 413);
}

#[test]
fn a10_chunk_extensions_and_trailers() {
    let ext = format!("1;x={}\r\na\r\n0\r\n\r\n", "e".repeat(16 * 1024));
    assert_eq!(status(&chunked(ext.as_bytes())), 400);
    // The whitespace before `;` counts too.
    let ws = format!("1{};\r\na\r\n0\r\n\r\n", "\t".repeat(16 * 1024 + 1));
    assert_eq!(status(&chunked(ws.as_bytes())), 400);
    let ws_ok = format!("1{};x\r\na\r\n0\r\n\r\n", " ".repeat(100));
    assert_eq!(
        run(&chunked(ws_ok.as_bytes())),
        vec![request("POST", "/", b"a")]
    );
    let trailer = format!("0\r\nX-T: {}\r\n\r\n", "t".repeat(16 * 1024));
    assert_eq!(status(&chunked(trailer.as_bytes())), 431);
    // Garden #39: the trailer is a field, not a request.
    assert_eq!(
        run(&chunked(b"0\r\nX:POST / HTTP/1.1\r\n\r\n")),
        vec![request("POST", "/", b"")]
    );
    // Extensions and trailers within limits are accepted and dropped.
    let ok = chunked(b"3;a=b;c=\"d e\"\r\nabc\r\n0;z\r\nT: v\r\n\r\n");
    assert_eq!(run(&ok), vec![request("POST", "/", b"abc")]);
    for bad in [
        &b"0\r\n T: v\r\n\r\n"[..],
        b"0\r\n:\r\n\r\n",
        b"0\r\nT : v\r\n\r\n",
        b"0\r\nT: v\n\r\n",
    ] {
        assert_eq!(
            status(&chunked(bad)),
            400,
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn a11_field_syntax() {
    let cases: [&[u8]; 6] = [
        b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
        b"GET / HTTP/1.1\r\n Host: a\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\nhello",
        b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-\r\nEncoding: chunked\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length 10\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\n:\r\n\r\n",
    ];
    for raw in cases {
        assert_eq!(status(raw), 400, "{:?}", String::from_utf8_lossy(raw));
    }
}

#[test]
fn a12_forbidden_bytes() {
    let cases: [&[u8]; 4] = [
        b"GET / HTTP/1.1\r\nHost: a\r\nX: va\rlue\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nX: va\0lue\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nX\xffY: v\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\n\x80: v\r\n\r\n",
    ];
    for raw in cases {
        assert_eq!(status(raw), 400, "{:?}", String::from_utf8_lossy(raw));
    }
}

/// RFC 9112 §3.2: the request-target is ASCII; a raw byte from 0x80 up
/// makes the request line invalid (httparse would let it through).
#[test]
fn a12_non_ascii_target() {
    let cases: [&[u8]; 3] = [
        b"GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET /\xff HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET /?q=\x80 HTTP/1.1\r\nHost: a\r\n\r\n",
    ];
    for raw in cases {
        assert_eq!(status(raw), 400, "{:?}", String::from_utf8_lossy(raw));
    }
    // Percent-encoded, the same path is fine.
    assert_eq!(
        run(b"GET /caf%C3%A9 HTTP/1.1\r\nHost: a\r\n\r\n"),
        vec![request("GET", "/caf%C3%A9", b"")]
    );
}

#[test]
fn a13_bare_lf_is_accepted() {
    assert_eq!(
        run(b"GET / HTTP/1.1\nHost: a\n\n"),
        vec![request("GET", "/", b"")]
    );
    let body = b"POST / HTTP/1.1\nHost: a\nContent-Length: 2\n\nhi";
    assert_eq!(run(body), vec![request("POST", "/", b"hi")]);
}

#[test]
fn a14_host_rules() {
    assert_eq!(status(b"GET / HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a\x00b\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), 400);
    // The bytes of a host are not enough: the value must be `uri-host
    // [ ":" port ]`.
    for host in [&b":a"[..], b"a:b:c", b"a:80x", b"[::1", b"[::1]x", b"a%zz"] {
        let mut req = b"GET / HTTP/1.1\r\nHost: ".to_vec();
        req.extend_from_slice(host);
        req.extend_from_slice(b"\r\n\r\n");
        assert_eq!(status(&req), 400, "{:?}", String::from_utf8_lossy(host));
    }
    // HTTP/1.0 may omit Host; an empty Host and IPv6 with port are valid.
    assert_eq!(run(b"GET / HTTP/1.0\r\n\r\n").len(), 1);
    assert_eq!(run(b"GET / HTTP/1.1\r\nHost:\r\n\r\n").len(), 1);
    assert_eq!(run(b"GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n").len(), 1);
}

#[test]
fn a15_versions() {
    let v = |version: &str| status(format!("GET / {version}\r\nHost: a\r\n\r\n").as_bytes());
    // A higher minor version is served as HTTP/1.1 (RFC 9110 §6.2).
    for minor in ["HTTP/1.2", "HTTP/1.9"] {
        let req = format!("GET /m?x {minor}\r\nHost: a\r\nX: y\r\n\r\n");
        assert_eq!(
            run(req.as_bytes()),
            vec![request("GET", "/m?x", b"")],
            "{minor}"
        );
        let mut storage = header_storage::<8>();
        let head = parse_head(req.as_bytes(), &mut storage, &Limits::default())
            .expect("a valid head")
            .expect("a complete head");
        assert_eq!(
            (head.version, head.keep_alive, head.headers.len()),
            (1, true, 2)
        );
        assert_eq!(head.head_len, req.len());
    }
    assert_eq!(
        status(b"POST / HTTP/1.2\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
        400
    );
    assert_eq!(
        status(b"GET / HTTP/1.2\r\nHost: a\r\nBad Field: x\r\n\r\n"),
        400
    );
    assert_eq!(status(b"G@T / HTTP/1.2\r\nHost: a\r\n\r\n"), 400);
    assert_eq!(status(b"GET /\x80 HTTP/1.2\r\nHost: a\r\n\r\n"), 400);
    assert_eq!(v("HTTP/1.10"), 400);
    assert_eq!(v("HTTP/2.0"), 505);
    assert_eq!(v("HTTP/3.0"), 505);
    assert_eq!(v("HTTP/4294967295.255"), 400);
    assert_eq!(v("HTTP/\r\r1.1"), 400);
    assert_eq!(v("HTTP/0.9"), 400);
    assert_eq!(v("HTTP/1"), 400);
    assert_eq!(v("http/1.1"), 400);
    assert_eq!(status(b"GET /\r\n"), 400);
    // An open line that may still become `HTTP/1.25` waits for more bytes.
    assert_eq!(run(b"GET / HTTP/1.2"), vec![]);
}

#[test]
fn a16_pipelining() {
    let three = b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\nGET /3 HTTP/1.1\r\nHost: a\r\n\r\n";
    let paths: Vec<_> = ["/1", "/2", "/3"]
        .iter()
        .map(|p| request("GET", p, b""))
        .collect();
    assert_eq!(run(three), paths);
    // Garden #45: answers in order, then the 400.
    let invalid = b"GET / HTTP/1.1\r\nHost: a\r\n\r\nInvalid\r\n\r\n";
    assert_eq!(
        run(invalid),
        vec![request("GET", "/", b""), Event::Error(400)]
    );
    // Garden #48: a zero-length body does not swallow the next request.
    let zero = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\nGET /n HTTP/1.1\r\nHost: a\r\n\r\n";
    assert_eq!(
        run(zero),
        vec![request("POST", "/", b""), request("GET", "/n", b"")]
    );
    // The head length is exact, so the caller can find the next request.
    let mut storage = header_storage::<16>();
    let head = parse_head(three, &mut storage, &Limits::default())
        .expect("valid")
        .expect("complete");
    assert_eq!(&three[head.head_len..head.head_len + 6], b"GET /2");
}

#[test]
fn a17_short_body_is_never_complete() {
    let mut m = Machine::new(Limits::default());
    m.feed(&with_headers("Content-Length: 10\r\n", b"hello"));
    // EOF now: no event, and the decoder says the body is short.
    assert_eq!(m.events, vec![]);
    assert_eq!(m.in_body().and_then(BodyDecoder::remaining), Some(5));
}

#[test]
fn a18_body_over_limit_is_413() {
    // By Content-Length: refused from the head alone.
    assert_eq!(
        status(&with_headers("Content-Length: 2097152\r\n", b"")),
        413
    );
    assert_eq!(
        run(&with_headers(
            "Content-Length: 1048576\r\n",
            &[b'x'; 1 << 20]
        ))
        .len(),
        1
    );
    // By chunked stream: refused at the first chunk that crosses 1 MiB.
    let mut m = Machine::new(Limits::default());
    m.feed(&chunked(b""));
    let piece = [b'x'; 64 * 1024];
    let mut sent = 0;
    while m.events.is_empty() && sent < 4 << 20 {
        m.feed(format!("{:x}\r\n", piece.len()).as_bytes());
        m.feed(&piece);
        m.feed(b"\r\n");
        sent += piece.len();
    }
    assert_eq!(m.events, vec![Event::Error(413)]);
    assert_eq!(
        sent,
        (1 << 20) + piece.len(),
        "413 at the limit, not after the whole stream"
    );
}

#[test]
fn a19_expect() {
    let limits = Limits::default();
    let mut storage = header_storage::<16>();
    let raw = with_headers("Expect: 100-continue\r\nContent-Length: 3\r\n", b"");
    let head = parse_head(&raw, &mut storage, &limits)
        .expect("valid")
        .expect("complete");
    assert!(head.expect_continue);
    assert_eq!(head.body, BodyKind::Length(3));
    assert_eq!(status(&with_headers("Expect: foo\r\n", b"")), 417);
    assert_eq!(
        status(&with_headers("Expect: 100-continue, foo\r\n", b"")),
        417
    );
    // RFC 9110 §10.1.1: an empty list has no expectation to fail.
    for empty in ["Expect:\r\n", "Expect: ,\r\n"] {
        let raw = with_headers(&format!("{empty}Content-Length: 2\r\n"), b"hi");
        assert_eq!(run(&raw), vec![request("POST", "/", b"hi")], "{empty:?}");
    }
    // Nothing to wait for without a body, and HTTP/1.0 must ignore it.
    let mut storage = header_storage::<16>();
    let raw = with_headers("Expect: 100-Continue\r\n", b"");
    let head = parse_head(&raw, &mut storage, &limits)
        .expect("valid")
        .expect("complete");
    assert!(!head.expect_continue);
    let raw = b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx";
    assert!(matches!(
        run(raw).as_slice(),
        [Event::Request {
            expect_continue: false,
            ..
        }]
    ));
}

#[test]
fn keep_alive_decisions() {
    let ka = |raw: &[u8]| {
        let mut storage = header_storage::<16>();
        let head = parse_head(raw, &mut storage, &Limits::default())
            .expect("valid")
            .expect("complete");
        (head.version, head.keep_alive)
    };
    assert_eq!(ka(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"), (1, true));
    assert_eq!(
        ka(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, close\r\n\r\n"),
        (1, false)
    );
    assert_eq!(ka(b"GET / HTTP/1.0\r\n\r\n"), (0, false));
    assert_eq!(
        ka(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"),
        (0, true)
    );
    // After a close request, nothing further on the connection is read.
    let raw =
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
    assert_eq!(run(raw).len(), 1);
}
