//! The bytes of a sub-request: its request line, and what every branch of
//! a request shares after its `Host` line.

use std::net::IpAddr;

use super::target::OriginForm;
use crate::http::proto::write_decimal;
use percore_http1::forward::write_forwarded;

/// Writes what every branch of a request shares, after its `Host` line:
/// the end-to-end fields, `Via` (ending in `via`), `X-Forwarded-For` (see
/// [`write_forwarded`]), the framing and the body. Every line ends in CRLF
/// whatever the client used. The body is re-framed with
/// `Content-Length` (the HTTP layer has already de-chunked it and rejected
/// ambiguous framing).
pub(crate) fn write_shared(
    out: &mut Vec<u8>,
    headers: &[httparse::Header<'_>],
    client: Option<IpAddr>,
    via: &[u8],
    body: &[u8],
    has_body: bool,
) {
    write_forwarded(out, headers, client, via);
    if has_body || !body.is_empty() {
        out.extend_from_slice(b"Content-Length: ");
        write_decimal(out, body.len() as u64);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
}

/// Writes the request line every sub-request of a request starts with.
pub(crate) fn write_request_line(out: &mut Vec<u8>, method: &str, target: OriginForm<'_>) {
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    target.write_to(out);
    out.extend_from_slice(b" HTTP/1.1\r\n");
}
