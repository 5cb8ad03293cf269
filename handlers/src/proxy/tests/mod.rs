//! Unit tests of the proxy's pure parts: request targets, request
//! serialisation, JSON escaping and config parsing (the response parser's
//! are the client's); the failure lines' in `warn`, dropping a request's
//! branches in `join`.

mod join;
mod warn;

use super::subrequest::{write_request_line, write_shared};
use super::target::origin_form;
use super::upstream::Health;
use super::{Config, EjectionConfig, Policy};
use crate::client::exchange::{Failure, IoFailure};
use crate::proxy::combine::{entry_bound, entry_prefix, write_entry, write_json_string, Entry};
use percore_http1::forward::write_request;

/// The forwarded request: CRLF only, hop-by-hop fields (and those named in
/// `Connection`) dropped, `Via`/`X-Forwarded-For` kept and appended to,
/// re-framed.
#[test]
fn request_bytes() {
    let mut storage = [httparse::EMPTY_HEADER; 16];
    let mut req = httparse::Request::new(&mut storage);
    let raw = b"POST /p HTTP/1.1\nHost: client\nConnection: close, X-Foo\nX-Foo: secret\nKeep-Alive: 5\nTE: trailers\nUpgrade: h2c\nTransfer-Encoding: chunked\nX-Forwarded-For: 10.0.0.1\nAccept: */*\n\n";
    let httparse::Status::Complete(_) = req.parse(raw).expect("parse") else {
        panic!("partial")
    };
    let mut shared = Vec::new();
    write_shared(
        &mut shared,
        req.headers,
        Some([127, 0, 0, 1].into()),
        b"1.1 percore",
        b"body",
        true,
    );
    let mut line = Vec::new();
    let target = origin_form("POST", "/p").expect("origin-form");
    write_request_line(&mut line, "POST", target);
    let mut out = Vec::new();
    write_request(&mut out, &line, b"Host: up:1\r\n", &shared);
    let text = String::from_utf8(out).expect("ascii");
    assert_eq!(
        text,
        "POST /p HTTP/1.1\r\nHost: up:1\r\nAccept: */*\r\nVia: 1.1 percore\r\n\
         X-Forwarded-For: 10.0.0.1, 127.0.0.1\r\nContent-Length: 4\r\n\r\nbody"
    );
    // Every line of `Via` and `X-Forwarded-For` is kept, in order, as one
    // list; empty values add nothing; the proxy's element comes last.
    let hops = b"GET / HTTP/1.1\r\nHost: h\r\nVia: 1.0 a\r\nX-Forwarded-For: 10.0.0.1\r\n\
        Via: 1.1 b, 1.1 c\r\nX-Forwarded-For:\r\nX-Forwarded-For: 10.0.0.2, 10.0.0.3\r\n\r\n";
    let client = Some([10, 0, 0, 9].into());
    assert_eq!(
        shared_text(hops, usize::MAX, client),
        "Via: 1.0 a, 1.1 b, 1.1 c, 1.1 percore\r\n\
         X-Forwarded-For: 10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.9\r\n\r\n"
    );
    // Without the client's address the earlier hops still go on; with no
    // earlier hops there is no X-Forwarded-For line at all.
    assert_eq!(
        shared_text(hops, usize::MAX, None),
        "Via: 1.0 a, 1.1 b, 1.1 c, 1.1 percore\r\n\
         X-Forwarded-For: 10.0.0.1, 10.0.0.2, 10.0.0.3\r\n\r\n"
    );
    assert_eq!(shared_text(hops, 1, None), "Via: 1.1 percore\r\n\r\n");
    // Lists the client named in `Connection` were for this hop only.
    let named = b"GET / HTTP/1.1\r\nHost: h\r\nConnection: via, X-Forwarded-For\r\n\
        Via: 1.0 a\r\nX-Forwarded-For: 10.0.0.1\r\n\r\n";
    assert_eq!(
        shared_text(named, usize::MAX, client),
        "Via: 1.1 percore\r\nX-Forwarded-For: 10.0.0.9\r\n\r\n"
    );
    // Client addresses are written as `Display` writes them.
    for ip in [
        "0.0.0.0",
        "255.255.255.255",
        "192.168.10.9",
        "::1",
        "2001:db8::ff00:42:8329",
        "::ffff:10.0.0.1",
    ] {
        let ip: std::net::IpAddr = ip.parse().expect("address");
        let mut shared = Vec::new();
        write_shared(&mut shared, &[], Some(ip), b"1.1 percore", b"", false);
        assert_eq!(
            String::from_utf8(shared).expect("ascii"),
            format!("Via: 1.1 percore\r\nX-Forwarded-For: {ip}\r\n\r\n")
        );
    }
}

/// What `write_shared` writes, without a body, for the first `fields`
/// header fields of the head in `raw` and the client address `client`.
fn shared_text(raw: &[u8], fields: usize, client: Option<std::net::IpAddr>) -> String {
    let mut storage = [httparse::EMPTY_HEADER; 16];
    let mut req = httparse::Request::new(&mut storage);
    let httparse::Status::Complete(_) = req.parse(raw).expect("parse") else {
        panic!("partial")
    };
    let headers = &req.headers[..fields.min(req.headers.len())];
    let mut shared = Vec::new();
    write_shared(&mut shared, headers, client, b"1.1 percore", b"", false);
    String::from_utf8(shared).expect("ascii")
}

/// Every target form (RFC 9112 §3.2): what is forwarded, or the status
/// the client gets instead.
#[test]
fn request_targets() {
    let cases: [(&str, &str, Result<&str, u16>); 27] = [
        ("GET", "/", Ok("/")),
        ("GET", "/a/b?c=d&e=http://f/g", Ok("/a/b?c=d&e=http://f/g")),
        ("GET", "http://h:8080/p?q", Ok("/p?q")),
        ("GET", "http://h", Ok("/")),
        ("GET", "http://h?q=1", Ok("/?q=1")),
        ("GET", "HtTpS://h/x", Ok("/x")),
        ("GET", "http://user:pw@h/x", Err(400)),
        ("GET", "http://u@/x", Err(400)),
        ("GET", "http://:80/x", Err(400)),
        ("GET", "http://[::1]/v6", Ok("/v6")),
        ("GET", "/p?q#frag", Ok("/p?q")),
        ("GET", "http://[::1]:80/v6", Ok("/v6")),
        ("GET", "http://h/p#frag", Ok("/p")),
        ("GET", "http://h#frag", Ok("/")),
        ("GET", "http://h//double", Ok("//double")),
        ("OPTIONS", "*", Ok("*")),
        ("OPTIONS", "http://h:8001", Ok("*")),
        ("OPTIONS", "http://h:8001?q", Ok("/?q")),
        ("OPTIONS", "http://h:8001/", Ok("/")),
        ("CONNECT", "h:443", Err(501)),
        ("CONNECT", "/", Err(501)),
        ("GET", "*", Err(400)),
        ("GET", "h:443", Err(400)),
        ("GET", "ftp://h/f", Err(400)),
        ("GET", "http:///p", Err(400)),
        ("GET", "http://?q", Err(400)),
        ("GET", "", Err(400)),
    ];
    for (method, target, expected) in cases {
        let got = origin_form(method, target).map(|t| {
            let mut out = Vec::new();
            t.write_to(&mut out);
            String::from_utf8(out).expect("ASCII")
        });
        assert_eq!(
            got.as_deref().map_err(|e| e.status),
            expected,
            "{method} {target}"
        );
    }
}

#[test]
fn json_strings() {
    let mut out = Vec::new();
    write_json_string(&mut out, b"a\"b\\c\n\x01\xffz\xc3\xa9");
    assert_eq!(
        String::from_utf8(out).expect("utf-8"),
        "\"a\\\"b\\\\c\\n\\u0001\u{fffd}z\u{e9}\""
    );
}

/// The run-copying escaper writes exactly what escaping byte by byte does,
/// for valid and invalid UTF-8 alike.
#[test]
fn json_strings_match_byte_by_byte_escaping() {
    fn reference(bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![b'"'];
        for chunk in bytes.utf8_chunks() {
            for c in chunk.valid().chars() {
                match c {
                    '"' => out.extend_from_slice(b"\\\""),
                    '\\' => out.extend_from_slice(b"\\\\"),
                    '\n' => out.extend_from_slice(b"\\n"),
                    '\r' => out.extend_from_slice(b"\\r"),
                    '\t' => out.extend_from_slice(b"\\t"),
                    c if u32::from(c) < 0x20 => {
                        out.extend_from_slice(format!("\\u{:04x}", u32::from(c)).as_bytes())
                    }
                    c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                }
            }
            if !chunk.invalid().is_empty() {
                out.extend_from_slice("\u{fffd}".as_bytes());
            }
        }
        out.push(b'"');
        out
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut cases: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        br#"{"message":"Hello!"}"#.to_vec(),
        b"tab\there\x01\x1f end\\".to_vec(),
        "caf\u{e9} \u{1f600}".as_bytes().to_vec(),
        b"bad \xff\xfe utf8 \xe2\x82".to_vec(),
    ];
    for _ in 0..2000 {
        let len = (next() % 48) as usize;
        // Mostly ASCII with some high bytes, so that both valid multi-byte
        // sequences and invalid ones occur.
        cases.push(
            (0..len)
                .map(|_| match next() % 8 {
                    0 => (next() % 0x20) as u8,
                    1 => 0x80 | (next() % 0x80) as u8,
                    2 => b'"',
                    _ => b' ' + (next() % 0x5f) as u8,
                })
                .collect(),
        );
    }
    for case in &cases {
        let mut out = Vec::new();
        write_json_string(&mut out, case);
        assert_eq!(out, reference(case), "input {case:?}");
    }
}

/// No entry is ever longer than its bound, whatever its bytes and numbers:
/// the proxy reserves the bound so that answers never grow the buffer.
#[test]
fn entries_fit_their_bound() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..2000 {
        let len = (next() % 64) as usize;
        let body: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let upstream = if round % 2 == 0 {
            "127.0.0.1:8080"
        } else {
            "[::1]:65535\""
        };
        let latency = match round {
            0 => std::time::Duration::MAX,
            1 => std::time::Duration::ZERO,
            _ => std::time::Duration::from_nanos(next()),
        };
        let prefix = entry_prefix(upstream);
        let entry = Entry {
            prefix: &prefix,
            status: (next() % 1000) as u16,
            latency,
            body: &body,
            bound: entry_bound(&prefix, &body),
        };
        let mut out = Vec::new();
        write_entry(&mut out, &entry, false);
        assert!(
            out.len() <= entry_bound(&prefix, &body),
            "round {round}: {} bytes over a bound of {}",
            out.len(),
            entry_bound(&prefix, &body)
        );
    }
}

/// An entry's exact text, with numbers of every width.
#[test]
fn entry_text() {
    let prefix = entry_prefix("[::1]:80\"");
    let mut out = Vec::new();
    for (first, status, micros) in [
        (true, 200, 412),
        (false, 7, 12_345_678_009),
        (false, 65535, 0),
    ] {
        let entry = Entry {
            prefix: &prefix,
            status,
            latency: std::time::Duration::from_micros(micros),
            body: br#"{"m":"Hi\there"}"#,
            bound: entry_bound(&prefix, br#"{"m":"Hi\there"}"#),
        };
        write_entry(&mut out, &entry, first);
    }
    let entry = |status: &str, ms: &str| {
        format!(
            r#"{{"upstream":"[::1]:80\"","status":{status},"latency_ms":{ms},"body":"{{\"m\":\"Hi\\there\"}}"}}"#
        )
    };
    let want = [
        entry("200", "0.412"),
        entry("7", "12345678.009"),
        entry("65535", "0.000"),
    ]
    .join(",");
    assert_eq!(String::from_utf8(out).expect("utf-8"), want);
}

#[test]
fn policies_and_config() {
    assert_eq!("all".parse(), Ok(Policy::All));
    assert_eq!("first".parse(), Ok(Policy::First));
    assert_eq!("quorum:2".parse(), Ok(Policy::Quorum(2)));
    // Any case, as `--backend` takes it.
    assert_eq!("ALL".parse(), Ok(Policy::All));
    assert_eq!("First".parse(), Ok(Policy::First));
    assert_eq!("Quorum:3".parse(), Ok(Policy::Quorum(3)));
    for bad in [
        "quorum:0",
        "quorum:",
        "quorum:x",
        "quorum",
        "most",
        "",
        "é",
        "quorum\u{e9}:2",
    ] {
        let e = bad.parse::<Policy>().expect_err(bad);
        assert_eq!(e.to_string(), "expected all, first or quorum:K (K >= 1)");
    }
    let mut c = Config::new(vec!["127.0.0.1:1"
        .parse::<std::net::SocketAddr>()
        .expect("addr")]);
    assert!(c.validate().is_ok());
    c.policy = Policy::Quorum(2);
    let e = c.validate().expect_err("quorum above width");
    assert_eq!(
        e.to_string(),
        "quorum:2 needs K <= width, and the width is 1"
    );
    c.width = 2;
    assert!(c.validate().is_ok());
    c.upstreams.clear();
    assert!(c.validate().is_err());
}

/// The width is bounded: each branch holds a descriptor for the whole
/// request.
#[test]
fn width_bound() {
    let mut c = Config::new(vec!["127.0.0.1:1"
        .parse::<std::net::SocketAddr>()
        .expect("addr")]);
    c.width = Config::MAX_WIDTH;
    assert!(c.validate().is_ok());
    c.width = 100_000;
    let e = c.validate().expect_err("absurd width");
    assert_eq!(
        e.to_string(),
        "width 100000 is above 1024, the most sub-requests per request"
    );
    c.width = 0;
    assert_eq!(
        c.validate().map_err(|e| e.to_string()),
        Err("width must be at least 1".to_owned())
    );
}

/// F8: the n-th ejection in a row lasts n × base, capped; a success resets
/// the run; every ejection needs a full run of failures.
#[test]
fn a_request_counts_once_per_run() {
    use std::cell::Cell;
    use std::time::Instant;
    let config = EjectionConfig::default();
    let health = Health::default();
    let (first, second) = (Cell::new(0), Cell::new(0));
    assert!(health.first_in_run(&first));
    assert!(!health.first_in_run(&first), "same request, same run");
    assert!(health.first_in_run(&second), "another request counts");
    // Another request's success starts a new run: this request's next
    // failure is the first of it.
    health.success();
    assert!(health.first_in_run(&first));
    assert!(!health.first_in_run(&first));
    // So does an ejection.
    health.eject(&config, Instant::now());
    assert!(health.first_in_run(&first));
}

#[test]
fn ejection_times() {
    use std::time::{Duration, Instant};
    let mut config = EjectionConfig {
        consecutive_failures: 3,
        base_time: Duration::from_secs(30),
        max_time: Duration::from_secs(75),
        ..EjectionConfig::default()
    };
    let health = Health::default();
    let t0 = Instant::now();
    assert!(!health.failure(&config) && !health.failure(&config));
    assert!(
        health.failure(&config),
        "third failure reaches the threshold"
    );
    assert_eq!(health.eject(&config, t0), Duration::from_secs(30));
    assert!(health.is_ejected(t0 + Duration::from_secs(29)));
    assert!(!health.is_ejected(t0 + Duration::from_secs(30)));
    assert!(!health.failure(&config), "a new run of failures is needed");
    assert!(!health.failure(&config) && health.failure(&config));
    assert_eq!(health.eject(&config, t0), Duration::from_secs(60));
    for _ in 0..3 {
        health.failure(&config);
    }
    assert_eq!(health.eject(&config, t0), Duration::from_secs(75), "capped");
    health.success();
    assert!(!health.failure(&config) && !health.failure(&config) && health.failure(&config));
    assert_eq!(
        health.eject(&config, t0),
        Duration::from_secs(30),
        "reset by the success"
    );

    config.consecutive_failures = 0;
    let off = Health::default();
    assert!(
        (0..100).all(|_| !off.failure(&config)),
        "0 turns ejection off"
    );
}

/// F8, F9 settings are validated.
#[test]
fn config_faults_validation() {
    let mut config = Config::new(vec!["127.0.0.1:1".parse::<std::net::SocketAddr>().unwrap()]);
    assert_eq!(config.max_pending, 1024);
    assert_eq!(config.ejection.consecutive_failures, 5);
    config.max_pending = 0;
    assert!(config.validate().is_err());
    config.max_pending = 8;
    config.ejection.max_percent = 101;
    assert!(config.validate().is_err());
    config.ejection.max_percent = 10;
    config.ejection.base_time = std::time::Duration::ZERO;
    assert!(config.validate().is_err());
    config.ejection.consecutive_failures = 0;
    assert!(
        config.validate().is_ok(),
        "times do not matter when ejection is off"
    );
}

/// The `Via` pseudonym: `percore-` and 16 hex digits, new per
/// `Config::new` and shared by clones; a name that is no token (or empty,
/// or too long) is refused, since it is written into every sub-request.
#[test]
fn pseudonyms() {
    let up = vec!["127.0.0.1:1".parse::<std::net::SocketAddr>().unwrap()];
    let a = Config::new(up.clone());
    let b = Config::new(up);
    for c in [&a, &b] {
        let digits = c.pseudonym.strip_prefix("percore-").expect("prefix");
        assert_eq!(digits.len(), 16, "{}", c.pseudonym);
        assert!(
            digits.bytes().all(|d| d.is_ascii_hexdigit()),
            "{}",
            c.pseudonym
        );
    }
    assert_ne!(a.pseudonym, b.pseudonym, "two proxies, two names");
    assert_eq!(a.clone().pseudonym, a.pseudonym, "every core of one proxy");
    let mut c = a.clone();
    for good in ["edge-1", "x", &"n".repeat(Config::MAX_PSEUDONYM)] {
        c.pseudonym = good.to_owned();
        assert!(c.validate().is_ok(), "{good}");
    }
    for bad in ["", "two words", "a,b", "(x)", "caf\u{e9}", &"n".repeat(65)] {
        c.pseudonym = bad.to_owned();
        let e = c.validate().expect_err(bad).to_string();
        assert!(e.contains("pseudonym"), "{e}");
    }
}

/// A failed connect or exchange names the OS's reason and error number,
/// not only its kind (running out of descriptors has no stable kind).
#[test]
fn failures_name_the_os_reason() {
    let os = |code| IoFailure::from(&std::io::Error::from_raw_os_error(code));
    let text = Failure::Connect(os(libc::EMFILE)).to_string();
    assert_eq!(text, "connect failed: Too many open files (os error 24)");
    let text = Failure::Io(os(libc::ECONNRESET)).to_string();
    assert!(
        text.starts_with("connection failed: Connection reset by peer (os error "),
        "{text}"
    );
    // An error the OS did not give keeps its kind.
    let custom = std::io::Error::other("socket used on a core of another backend");
    let text = Failure::Io(IoFailure::from(&custom)).to_string();
    assert_eq!(text, "connection failed: other error");
}

/// TLS to a Unix socket needs a name to check: it has no address.
#[test]
fn tls_to_a_unix_socket_needs_a_server_name() {
    use percore::tls::rustls;
    let roots = rustls::RootCertStore::empty();
    let tls = std::sync::Arc::new(
        rustls::ClientConfig::builder_with_provider(percore::tls::provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    let mut c = Config::new([percore::net::Endpoint::Unix(
        "/run/app.sock".parse().expect("path"),
    )]);
    c.upstream_tls = Some(super::UpstreamTls::new(tls.clone()));
    assert_eq!(
        c.validate().map_err(|e| e.to_string()),
        Err("TLS to a Unix socket upstream needs a server name".to_owned())
    );
    c.upstream_tls = Some(super::UpstreamTls::new(tls).server_name("app.internal"));
    assert!(c.validate().is_ok());
}
