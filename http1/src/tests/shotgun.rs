//! Shotgun tests: a pipelined stream split at every byte position must give
//! exactly the events of the unsplit stream (hyper's `decode.rs` pattern).

use super::{request, run, run_split, Event};

/// Five pipelined requests covering every framing, ending in `close`.
const STREAM: &[u8] = b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n\
POST /cl HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello world\
POST /ch HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
5;ext=\"v\"\r\nhello\r\nA\r\n, chunked!\r\n0\r\nX-Trailer: t\r\n\r\n\
GET /lf HTTP/1.1\nHost: a\n\n\
\r\nGET /10 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n\
POST /last HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nConnection: close\r\n\r\nend";

fn expected() -> Vec<Event> {
    let mut http10 = request("GET", "/10", b"");
    if let Event::Request { version, .. } = &mut http10 {
        *version = 0;
    }
    let mut last = request("POST", "/last", b"end");
    if let Event::Request { keep_alive, .. } = &mut last {
        *keep_alive = false;
    }
    vec![
        request("GET", "/a", b""),
        request("POST", "/cl", b"hello world"),
        request("POST", "/ch", b"hello, chunked!"),
        request("GET", "/lf", b""),
        http10,
        last,
    ]
}

#[test]
fn whole_stream() {
    assert_eq!(run(STREAM), expected());
}

#[test]
fn every_single_split() {
    let want = expected();
    for cut in 0..=STREAM.len() {
        assert_eq!(run_split(STREAM, &[cut]), want, "cut at {cut}");
    }
}

#[test]
fn byte_at_a_time() {
    let cuts: Vec<usize> = (1..STREAM.len()).collect();
    assert_eq!(run_split(STREAM, &cuts), expected());
}

#[test]
fn two_cuts_strided() {
    let want = expected();
    for a in (0..STREAM.len()).step_by(3) {
        for b in (a..=STREAM.len()).step_by(7) {
            assert_eq!(run_split(STREAM, &[a, b]), want, "cuts at {a}, {b}");
        }
    }
}

#[test]
fn errors_are_split_stable() {
    // Valid requests, then a chunk without its CRLF, then a would-be request.
    let stream: &[u8] = b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n\
POST /b HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcGET /x HTTP/1.1\r\n\r\n";
    let want = vec![request("GET", "/a", b""), Event::Error(400)];
    for cut in 0..=stream.len() {
        assert_eq!(run_split(stream, &[cut]), want, "cut at {cut}");
    }
    let v12: &[u8] = b"GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.2\r\nHost: a\r\n\r\n";
    let want = vec![request("GET", "/a", b""), request("GET", "/", b"")];
    for cut in 0..=v12.len() {
        assert_eq!(run_split(v12, &[cut]), want, "cut at {cut}");
    }
}
