//! The part of a sub-request taken from the client's request: its
//! end-to-end fields, and `Via` and `X-Forwarded-For` with the proxy's own
//! elements appended; and the assembly of each sub-request from its parts.
//!
//! Only std, httparse's header type and [`has_token`]: the tokio fan-out
//! baseline (`benches/src/tokio_fanout.rs`) uses this module too, so that
//! both servers forward the same bytes with the same code.

use std::io;
use std::net::IpAddr;

use crate::response::head::has_token;

/// Request fields that are about one connection (RFC 9110 §7.6.1), or that
/// the proxy writes itself, and so are never forwarded as received.
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
    // The proxy sends the whole body at once, so it never waits for 100.
    "expect",
    "proxy-authorization",
    // Appended to below rather than copied.
    "via",
    "x-forwarded-for",
];

/// Writes the fields every sub-request of a request forwards, after its
/// `Host` line: the end-to-end fields, then `Via` (ending in the proxy's
/// own element `via`, such as `1.1 percore-…`) and `X-Forwarded-For` as
/// one line each. Every line ends in CRLF whatever the client used.
pub fn write_forwarded(
    out: &mut Vec<u8>,
    headers: &[httparse::Header<'_>],
    client: Option<IpAddr>,
    via: &[u8],
) {
    // Most requests have no `Connection` field, and then no field is named
    // in one: the lookups per field below are skipped.
    let connection = headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("connection"));
    let hop_only = |name: &str| connection && named_in_connection(headers, name);
    for h in headers {
        if NOT_FORWARDED.iter().any(|n| h.name.eq_ignore_ascii_case(n)) || hop_only(h.name) {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Via: ");
    if !hop_only("via") {
        write_list_elements(out, headers, "via");
    }
    out.extend_from_slice(via);
    out.extend_from_slice(b"\r\n");
    let line = out.len();
    out.extend_from_slice(b"X-Forwarded-For: ");
    let list = out.len();
    if !hop_only("x-forwarded-for") {
        write_list_elements(out, headers, "x-forwarded-for");
    }
    match client {
        Some(ip) => write_ip(out, ip),
        // The client's address is unknown (its socket failed to say): the
        // hops before it still go on, without the trailing ", ".
        None if out.len() > list => out.truncate(out.len() - 2),
        None => out.truncate(line),
    }
    if out.len() > line {
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends the values of every `name` field of `headers`, in order, each
/// followed by `, `, so that the proxy's own element can follow. Several
/// lines of one field are one comma-separated list (RFC 9110 §5.3), and
/// `Via` (§7.6.3) and `X-Forwarded-For` record every hop before this one:
/// keeping only one line would drop hops. Empty values add nothing. (The
/// caller leaves out a field the client named in `Connection`: it was
/// meant for this hop only, like the hop-by-hop lines.)
fn write_list_elements(out: &mut Vec<u8>, headers: &[httparse::Header<'_>], name: &str) {
    for h in headers.iter().filter(|h| h.name.eq_ignore_ascii_case(name)) {
        let value = h.value.trim_ascii();
        if !value.is_empty() {
            out.extend_from_slice(value);
            out.extend_from_slice(b", ");
        }
    }
}

/// Appends `ip` as text: IPv4 (every request's case on most networks)
/// without the formatting machinery, IPv6 through it.
fn write_ip(out: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            // Formatted on the stack and appended in one copy.
            let mut text = [0u8; 15];
            let mut n = 0;
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    text[n] = b'.';
                    n += 1;
                }
                if octet >= 100 {
                    text[n] = b'0' + octet / 100;
                    n += 1;
                }
                if octet >= 10 {
                    text[n] = b'0' + octet / 10 % 10;
                    n += 1;
                }
                text[n] = b'0' + octet % 10;
                n += 1;
            }
            out.extend_from_slice(&text[..n]);
        }
        // io::Write on a Vec cannot fail.
        IpAddr::V6(v6) => drop(io::Write::write_fmt(out, format_args!("{v6}"))),
    }
}
/// Writes one whole sub-request: the request line, the upstream's `Host`
/// line, the shared part (the forwarded fields, the framing, any body).
/// Both parts are written once per request, so each of its sub-requests
/// is three copies.
pub fn write_request(out: &mut Vec<u8>, line: &[u8], host_line: &[u8], shared: &[u8]) {
    out.reserve(line.len() + host_line.len() + shared.len());
    out.extend_from_slice(line);
    out.extend_from_slice(host_line);
    out.extend_from_slice(shared);
}

/// Whether a `Connection` field of `headers` lists `name`.
fn named_in_connection(headers: &[httparse::Header<'_>], name: &str) -> bool {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .any(|h| has_token(h.value, name.as_bytes()))
}
