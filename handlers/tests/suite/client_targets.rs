//! What reaches the wire of the client's request targets, on both
//! backends, seen by an upstream that records the requests it gets: a
//! value given to `path_segment` is one segment whatever it holds
//! (`..%2F`, `%00`, CR/LF, `?`, non-ASCII), one given to `query_pair`
//! one value; `.`, `..`, empty segments and segments with `/`, and any
//! CR, LF or NUL in a URL, method or header are refused before a
//! connection is made, with an error whose message stays one line.
//! nginx, which decodes `%2F` and resolves `..` in a path, finds no
//! file outside `/city/`.

use crate::support;

use percent_encoding::percent_decode_str;
use percore_handlers::client::{Client, ErrorKind};
use percore_test_kit::upstream::Fake;
use percore_test_kit::*;
use support::client::on_core;

/// What clients send as a city's name, hoping to reach another path or
/// split the request, that is sent encoded as one segment.
const SENT: [&str; 8] = [
    "..%2Finternal%2Fkeys",
    "%2F",
    "%00",
    "x\0y",
    "x\r\nX-Injected: 1",
    "x\r\n\r\nGET keys",
    "a?b=c#d",
    "%2e%2e",
];

/// What is refused: no encoding keeps it one segment everywhere.
const REFUSED: [&str; 7] = [
    "..",
    ".",
    "",
    "../internal/keys",
    "/",
    "a/b",
    "..\\internal",
];

/// The request line's target of a recorded request.
fn target(request: &[u8]) -> String {
    let line = request.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    assert_eq!(parts.next(), Some("GET"), "{line:?}");
    let target = parts.next().unwrap_or_default().to_owned();
    assert_eq!(parts.next(), Some("HTTP/1.1"), "{line:?}");
    target
}

/// Whether `text` holds CR, LF or NUL.
fn splits(text: &str) -> bool {
    text.contains(['\r', '\n', '\0'])
}

backend_tests! {
    parallel;
    /// Every hostile value arrives as the one last segment of the path
    /// it was pushed on, decoding to itself; the request holds only the
    /// client's own lines.
    fn a_segment_never_names_another_path(backend) {
        let upstream = Fake::answering_ok();
        let base = format!("http://{}/city?units=metric", upstream.addr);
        on_core(backend, async move {
            let client = Client::new();
            for city in SENT {
                let r = client.get(&base).path_segment(city).send().await;
                let mut r = r.unwrap_or_else(|e| panic!("{city:?}: {e}"));
                assert_eq!(r.status(), 200, "{city:?}");
                r.body().await.expect("body");
            }
        });
        let requests = upstream.requests();
        assert_eq!(requests.len(), SENT.len());
        for (request, city) in requests.iter().zip(SENT) {
            let target = target(request);
            let (path, query) = target.split_once('?').expect("the query stays");
            assert_eq!(query, "units=metric", "{city:?}: {target}");
            let segment = path.strip_prefix("/city/").unwrap_or_else(|| panic!("{target}"));
            assert!(!segment.contains('/'), "{city:?}: {target}");
            assert_eq!(percent_decode_str(segment).decode_utf8().as_deref(), Ok(city));
            let head = String::from_utf8_lossy(request);
            // The request line, Host, and the blank line.
            assert_eq!(head.matches("\r\n").count(), 3, "{head:?}");
            assert!(!head.contains('\0'), "{head:?}");
        }
    }

    /// A query value with `&`, `=`, `#` or CR/LF is one value of one
    /// parameter.
    fn a_query_pair_is_one_value(backend) {
        let upstream = Fake::answering_ok();
        let base = format!("http://{}/search", upstream.addr);
        let values = ["1&admin=true", "a#b", "x\r\nX-Injected: 1", "café au lait"];
        on_core(backend, async move {
            let client = Client::new();
            for value in values {
                let r = client.get(&base).query_pair("q", value).send().await;
                let mut r = r.unwrap_or_else(|e| panic!("{value:?}: {e}"));
                r.body().await.expect("body");
            }
        });
        let requests = upstream.requests();
        assert_eq!(requests.len(), values.len());
        for (request, value) in requests.iter().zip(values) {
            let target = target(request);
            let query = target.strip_prefix("/search?").unwrap_or_else(|| panic!("{target}"));
            let pairs: Vec<_> = form_urlencoded::parse(query.as_bytes()).collect();
            assert_eq!(pairs.len(), 1, "{value:?}: {target}");
            assert_eq!((&*pairs[0].0, &*pairs[0].1), ("q", value));
        }
    }

    /// `.`, `..`, an empty segment and one with `/` or `\` are refused,
    /// naming why, and nothing is sent.
    fn dot_and_slashed_segments_are_refused(backend) {
        let upstream = Fake::answering_ok();
        let base = format!("http://{}/city", upstream.addr);
        on_core(backend, async move {
            let client = Client::new();
            for city in REFUSED {
                let e = client.get(&base).path_segment(city).send().await.expect_err(city);
                assert!(matches!(e.kind(), ErrorKind::InvalidSegment(_)), "{e}");
                assert!(e.to_string().contains("invalid path segment"), "{e}");
            }
        });
        assert_eq!(upstream.accepted(), 0);
    }

    /// CR, LF or NUL anywhere in the URL, the method or a header is
    /// refused before a connection is made, and the error's message,
    /// which names the URL as given, stays one line for the log.
    fn no_cr_lf_or_nul_reaches_the_wire(backend) {
        let upstream = Fake::answering_ok();
        let at = upstream.addr;
        on_core(backend, async move {
            let client = Client::new();
            let urls = [
                format!("http://{at}/a\r\nX-Injected: 1"),
                format!("http://{at}/a\nb"),
                format!("http://{at}/a\0b"),
                format!("http://{at}/a?q=\r\n"),
                format!("http://{at}/a#\r\n"),
                format!("http://{at}\r\n/a"),
            ];
            let mut refused = Vec::new();
            for url in &urls {
                refused.push(client.get(url).send().await.expect_err(url));
            }
            let ok = format!("http://{at}/a");
            for request in [
                client.request("GET /internal HTTP/1.1\r\n", &ok),
                client.request("GE\0T", &ok),
                client.get(&ok).header("X", "a\r\nX-Injected: 1"),
                client.get(&ok).header("X", "a\0"),
                client.get(&ok).header("X\r\nX-Injected", "1"),
            ] {
                refused.push(request.send().await.expect_err("refused"));
            }
            for e in refused {
                assert!(
                    matches!(e.kind(), ErrorKind::InvalidUrl(_) | ErrorKind::InvalidRequest(_)),
                    "{e}"
                );
                let message = e.to_string();
                assert!(!splits(&message), "the message splits a log line: {message:?}");
            }
        });
        assert_eq!(upstream.accepted(), 0);
        assert!(upstream.requests().is_empty());
    }

    /// nginx resolves `..%2F` in a path: a URL built by formatting the
    /// value in reaches the file outside `/city/`; pushed as a segment,
    /// the same value finds nothing there.
    fn nginx_finds_no_other_path(backend) {
        let Some(nginx) = Nginx::start(|dir| {
            std::fs::create_dir_all(dir.join("html/internal")).expect("a directory");
            std::fs::create_dir_all(dir.join("html/city")).expect("a directory");
            std::fs::write(dir.join("html/internal/keys"), "SECRET-KEYS").expect("keys");
            format!("  root {}/html;\n", dir.display())
        }) else {
            return;
        };
        let base = format!("http://{}/city", nginx.addr);
        on_core(backend, async move {
            let client = Client::new();
            // What the formatted URL reaches: the fault this guards against.
            let mut r = client
                .get(&format!("{base}/..%2Finternal%2Fkeys"))
                .send()
                .await
                .expect("get");
            assert_eq!((r.status(), &r.body().await.expect("body")[..]), (200, &b"SECRET-KEYS"[..]));
            for city in REFUSED {
                let e = client.get(&base).path_segment(city).send().await.expect_err(city);
                assert!(matches!(e.kind(), ErrorKind::InvalidSegment(_)), "{e}");
            }
            for city in SENT {
                let mut r = client.get(&base).path_segment(city).send().await.expect("get");
                let status = r.status();
                let body = r.body().await.expect("body");
                assert!(!body.windows(6).any(|w| w == b"SECRET"), "{city:?}: {status}");
                assert_ne!(status, 200, "{city:?}");
            }
        });
    }
}
