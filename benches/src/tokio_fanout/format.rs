//! The bytes the tokio fan-out writes, in the proxy's formats: the shared
//! part of every sub-request (forwarded fields, `Via`, `X-Forwarded-For`)
//! and the elements of the JSON answer.
//!
//! These mirror `percore_handlers::proxy` (`client::write_shared`,
//! `combine::write_entry`) line for line rather than calling them, because
//! this crate builds without percore (`--no-default-features`); keep the
//! two in step, so that both servers keep doing the same work.

use std::io::Write as _;
use std::net::IpAddr;
use std::time::Duration;

use crate::baseline_http::write_decimal;

/// Request fields never forwarded as received (the proxy's list).
const NOT_FORWARDED: [&str; 13] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "expect",
    "proxy-authorization",
    "via",
    "x-forwarded-for",
];

/// What every branch of a request shares after its `Host` line.
pub(super) fn write_shared(
    out: &mut Vec<u8>,
    headers: &[httparse::Header<'_>],
    client: Option<IpAddr>,
) {
    let mut via: Option<&[u8]> = None;
    let mut forwarded: Option<&[u8]> = None;
    for h in headers {
        if h.name.eq_ignore_ascii_case("via") {
            via = Some(h.value);
        } else if h.name.eq_ignore_ascii_case("x-forwarded-for") {
            forwarded = Some(h.value);
        }
        if NOT_FORWARDED.iter().any(|n| h.name.eq_ignore_ascii_case(n))
            || named_in_connection(headers, h.name)
        {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Via: ");
    if let Some(v) = via {
        out.extend_from_slice(v);
        out.extend_from_slice(b", ");
    }
    out.extend_from_slice(b"1.1 percore\r\n");
    if let Some(ip) = client {
        out.extend_from_slice(b"X-Forwarded-For: ");
        if let Some(v) = forwarded {
            out.extend_from_slice(v);
            out.extend_from_slice(b", ");
        }
        write_ip(out, ip);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Whether a `Connection` field of `headers` lists `name`.
fn named_in_connection(headers: &[httparse::Header<'_>], name: &str) -> bool {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .any(|h| {
            h.value
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(name.as_bytes()))
        })
}

/// One array element, in the proxy's format.
pub(super) fn write_entry(
    out: &mut Vec<u8>,
    upstream: &str,
    status: u16,
    latency: Duration,
    body: &[u8],
) {
    out.extend_from_slice(b"{\"upstream\":");
    write_json_string(out, upstream.as_bytes());
    out.extend_from_slice(b",\"status\":");
    write_decimal(out, u64::from(status));
    let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
    out.extend_from_slice(b",\"latency_ms\":");
    write_decimal(out, micros / 1000);
    let frac = micros % 1000;
    out.extend_from_slice(&[
        b'.',
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
    out.extend_from_slice(b",\"body\":");
    write_json_string(out, body);
    out.push(b'}');
}

/// Appends `ip` as text, IPv4 without the formatting machinery.
fn write_ip(out: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                write_decimal(out, u64::from(octet));
            }
        }
        IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}

/// `bytes` as a JSON string; invalid UTF-8 becomes U+FFFD. ASCII input
/// (the common case) is escaped in one pass that copies the runs between
/// escapes whole.
fn write_json_string(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    let start = out.len();
    let mut run = 0;
    let mut ascii = true;
    for (i, &b) in bytes.iter().enumerate() {
        if b >= 0x80 {
            ascii = false;
            break;
        }
        if b < 0x20 || b == b'"' || b == b'\\' {
            out.extend_from_slice(&bytes[run..i]);
            escape(out, b);
            run = i + 1;
        }
    }
    if ascii {
        out.extend_from_slice(&bytes[run..]);
    } else {
        out.truncate(start);
        for chunk in bytes.utf8_chunks() {
            for c in chunk.valid().chars() {
                match u8::try_from(c) {
                    Ok(b) if b < 0x20 || b == b'"' || b == b'\\' => escape(out, b),
                    _ => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                }
            }
            if !chunk.invalid().is_empty() {
                out.extend_from_slice("\u{fffd}".as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// The JSON escape of a control byte, quote or backslash.
fn escape(out: &mut Vec<u8>, b: u8) {
    match b {
        b'"' => out.extend_from_slice(b"\\\""),
        b'\\' => out.extend_from_slice(b"\\\\"),
        b'\n' => out.extend_from_slice(b"\\n"),
        b'\r' => out.extend_from_slice(b"\\r"),
        b'\t' => out.extend_from_slice(b"\\t"),
        _ => {
            let _ = write!(out, "\\u{b:04x}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_match_the_proxy_format() {
        let mut out = Vec::new();
        write_entry(
            &mut out,
            "127.0.0.1:8080",
            200,
            Duration::from_micros(412),
            br#"{"message":"Hello!"}"#,
        );
        assert_eq!(
            out,
            br#"{"upstream":"127.0.0.1:8080","status":200,"latency_ms":0.412,"body":"{\"message\":\"Hello!\"}"}"#
        );
    }

    #[test]
    fn shared_part_drops_hop_by_hop_fields() {
        let headers = [
            httparse::Header {
                name: "Host",
                value: b"x",
            },
            httparse::Header {
                name: "Accept",
                value: b"*/*",
            },
            httparse::Header {
                name: "Connection",
                value: b"keep-alive",
            },
        ];
        let mut out = Vec::new();
        write_shared(&mut out, &headers, Some([127, 0, 0, 1].into()));
        assert_eq!(
            out,
            b"Accept: */*\r\nVia: 1.1 percore\r\nX-Forwarded-For: 127.0.0.1\r\n\r\n"
        );
    }
}
