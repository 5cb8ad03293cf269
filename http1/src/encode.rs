//! Response encoding into a caller-owned, reused `Vec<u8>`.
//!
//! Nothing here allocates once the buffer has grown to its working size:
//! numbers are formatted by hand into a stack array, and every header is a
//! slice copy.

use super::chars::{is_field_value, is_token};
use super::{DateCache, HttpError};
use crate::status::{named_status_line, reason_phrase};

/// The interim response sent when a client waits on `Expect: 100-continue`
/// (RFC 9110 §15.2.1). Send it only once the handler wants the body.
pub const CONTINUE_100: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// How the response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Content-Length: n`. For a response to HEAD, send this head with the
    /// length the GET would have and no body (RFC 9110 §9.3.2).
    Length(u64),
    /// `Transfer-Encoding: chunked`; write the body with [`encode_chunk`]
    /// and end it with [`encode_last_chunk`]. Only for HTTP/1.1 requests.
    Chunked,
    /// No framing header and no body, for 1xx, 204 and 304 responses,
    /// which RFC 9110 §8.6 forbids to carry Content-Length semantics.
    Empty,
}

/// A response status line and header section.
#[derive(Debug, Clone, Copy)]
pub struct ResponseHead<'a> {
    /// Status code, 100..=999.
    pub status: u16,
    /// Body framing.
    pub framing: Framing,
    /// `Content-Type` value, if any.
    pub content_type: Option<&'a [u8]>,
    /// Keep the connection for another request. `false` adds
    /// `Connection: close`, and the caller must close after writing.
    pub keep_alive: bool,
    /// Minor version of the request. A kept HTTP/1.0 connection needs an
    /// explicit `Connection: keep-alive` (RFC 9112 §9.3).
    pub version: u8,
    /// Further header fields, written as given after the standard ones.
    pub extra: &'a [(&'a str, &'a [u8])],
}

impl<'a> ResponseHead<'a> {
    /// A keep-alive HTTP/1.1 response head with no content type or extras.
    #[inline]
    pub fn new(status: u16, framing: Framing) -> Self {
        Self {
            status,
            framing,
            content_type: None,
            keep_alive: true,
            version: 1,
            extra: &[],
        }
    }

    /// Appends the status line and header section, ending with the blank
    /// line, to `out`. The body, if any, follows directly.
    ///
    /// # Errors
    ///
    /// A 500 [`HttpError`] if a header name is not a token or a value holds
    /// CR, LF or another control byte (which would let a handler split the
    /// response); `out` is then left as it was.
    pub fn encode(&self, date: &DateCache, out: &mut Vec<u8>) -> Result<(), HttpError> {
        self.validate()?;
        self.write_head(date, &[], out);
        Ok(())
    }

    fn validate(&self) -> Result<(), HttpError> {
        let valid = self.content_type.is_none_or(is_field_value)
            && self
                .extra
                .iter()
                .all(|(n, v)| is_token(n.as_bytes()) && is_field_value(v));
        if !valid {
            return Err(HttpError::new(500, "invalid response header"));
        }
        Ok(())
    }

    /// Like [`encode`](Self::encode), with `raw` appended after the other
    /// fields: `Name: value\r\n` lines the caller has already validated
    /// (the service layer checks each as the service adds it).
    pub fn encode_raw(
        &self,
        date: &DateCache,
        raw: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), HttpError> {
        self.validate()?;
        self.write_head(date, raw, out);
        Ok(())
    }

    fn write_head(&self, date: &DateCache, raw: &[u8], out: &mut Vec<u8>) {
        status_line(out, self.status);
        out.extend_from_slice(date.line());
        if let Some(ct) = self.content_type {
            header(out, b"Content-Type", ct);
        }
        match self.framing {
            Framing::Length(n) => content_length(out, n),
            Framing::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
            Framing::Empty => {}
        }
        if !self.keep_alive {
            out.extend_from_slice(CLOSE);
        } else if self.version == 0 {
            out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        for (name, value) in self.extra {
            header(out, name.as_bytes(), value);
        }
        out.extend_from_slice(raw);
        out.extend_from_slice(b"\r\n");
    }
}

const CLOSE: &[u8] = b"Connection: close\r\n";

/// Appends one chunk of a chunked body. Empty `data` writes nothing, since
/// a zero-size chunk would end the body.
pub fn encode_chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let mut digits = [0u8; 16];
    let mut n = data.len();
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b"0123456789abcdef"[n & 0xf];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Appends the last chunk and an empty trailer section, ending the body.
#[inline]
pub fn encode_last_chunk(out: &mut Vec<u8>) {
    out.extend_from_slice(b"0\r\n\r\n");
}

/// Appends a complete error response: `Connection: close` and a one-line
/// text body, the reason phrase followed by the error's own reason when it
/// has one (`Bad Request: duplicate Content-Length`, see [`error_text`]),
/// so that whoever reads the answer learns what to fix. The answer to a
/// `HEAD` request (`head_only`) has the same fields and no body (RFC 9110
/// §9.3.2). The caller must close the connection after writing it: after
/// an error the position of the next request is unknown, so every error
/// answer closes.
pub fn error_response(out: &mut Vec<u8>, error: &HttpError, head_only: bool, date: &DateCache) {
    let (phrase, separator, detail) = error_text_parts(error);
    let len = phrase.len() + separator.len() + detail.len() + 1;
    let head = ResponseHead {
        content_type: Some(ERROR_TEXT_TYPE.as_bytes()),
        keep_alive: false,
        ..ResponseHead::new(error.status, Framing::Length(len as u64))
    };
    head.write_head(date, &[], out);
    if !head_only {
        out.extend_from_slice(phrase);
        out.extend_from_slice(separator);
        out.extend_from_slice(detail);
        out.extend_from_slice(b"\n");
    }
}

/// As [`error_response`], with a body and content type of the caller's
/// (which must be a valid field value).
pub fn error_response_with(
    out: &mut Vec<u8>,
    status: u16,
    content_type: &[u8],
    body: &[u8],
    head_only: bool,
    date: &DateCache,
) {
    error_response_kept_if(out, status, content_type, body, head_only, date, None);
}

/// As [`error_response_with`]; with `kept` (the request's minor version),
/// the head keeps the connection instead of closing it.
pub fn error_response_kept_if(
    out: &mut Vec<u8>,
    status: u16,
    content_type: &[u8],
    body: &[u8],
    head_only: bool,
    date: &DateCache,
    kept: Option<u8>,
) {
    let head = ResponseHead {
        content_type: Some(content_type),
        keep_alive: kept.is_some(),
        version: kept.unwrap_or(1),
        ..ResponseHead::new(status, Framing::Length(body.len() as u64))
    };
    head.write_head(date, &[], out);
    if !head_only {
        out.extend_from_slice(body);
    }
}

/// The content type of [`error_text`]'s body.
pub const ERROR_TEXT_TYPE: &str = "text/plain; charset=utf-8";

/// Appends the body [`error_response`] sends: the reason phrase, the
/// error's own reason after a colon when it has one, and a newline.
pub fn error_text(error: &HttpError, body: &mut Vec<u8>) {
    let (phrase, separator, detail) = error_text_parts(error);
    body.extend_from_slice(phrase);
    body.extend_from_slice(separator);
    body.extend_from_slice(detail);
    body.push(b'\n');
}

fn error_text_parts(error: &HttpError) -> (&'static [u8], &'static [u8], &[u8]) {
    let phrase = reason_phrase(error.status).as_bytes();
    let detail = error.reason.as_bytes();
    // A reason that is the phrase itself (the layer's own answers carry
    // their phrase as reason) is said once.
    let detail = if detail == phrase { b"" } else { detail };
    let separator: &[u8] = if phrase.is_empty() || detail.is_empty() {
        b""
    } else {
        b": "
    };
    (phrase, separator, detail)
}

/// Appends a complete 405 response with the `Allow` header RFC 9110 §15.5.6
/// requires, e.g. `allow = b"GET, HEAD"`. The answer to a `HEAD` request
/// (`head_only`) has the same fields and no body (RFC 9110 §9.3.2), as with
/// [`error_response`].
///
/// # Errors
///
/// A 500 [`HttpError`] if `allow` is not a valid field value.
pub fn method_not_allowed(
    out: &mut Vec<u8>,
    allow: &[u8],
    date: &DateCache,
    keep_alive: bool,
    version: u8,
    head_only: bool,
) -> Result<(), HttpError> {
    const BODY: &[u8] = b"Method Not Allowed\n";
    let head = ResponseHead {
        content_type: Some(b"text/plain; charset=utf-8"),
        keep_alive,
        version,
        extra: &[("Allow", allow)],
        ..ResponseHead::new(405, Framing::Length(BODY.len() as u64))
    };
    head.encode(date, out)?;
    if !head_only {
        out.extend_from_slice(BODY);
    }
    Ok(())
}

/// Writes `HTTP/1.1 NNN Reason\r\n`. We always answer as HTTP/1.1, the
/// highest version we implement (RFC 9110 §6.2), even to 1.0 clients.
fn status_line(out: &mut Vec<u8>, status: u16) {
    if let Some(line) = named_status_line(status) {
        out.extend_from_slice(line);
        return;
    }
    // Clamp to three digits: a status outside 100..=999 is a caller bug,
    // and a malformed status line would be worse than a 500.
    let status = if (100..=999).contains(&status) {
        status
    } else {
        500
    };
    out.extend_from_slice(b"HTTP/1.1 ");
    write_decimal(out, u64::from(status));
    out.push(b' ');
    out.extend_from_slice(reason_phrase(status).as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Appends `Content-Length: n\r\n`, assembled on the stack (the digits
/// right to left, then the name in front of them) so that the line costs
/// one copy into `out` rather than three.
fn content_length(out: &mut Vec<u8>, n: u64) {
    const NAME: &[u8; 16] = b"Content-Length: ";
    let mut line = [0u8; NAME.len() + MAX_DIGITS + 2];
    let digits_end = line.len() - 2;
    line[digits_end..].copy_from_slice(b"\r\n");
    let start = fill_decimal(&mut line[..digits_end], n) - NAME.len();
    line[start..start + NAME.len()].copy_from_slice(NAME);
    out.extend_from_slice(&line[start..]);
}

/// Digits of the largest `u64`.
const MAX_DIGITS: usize = 20;

/// Appends `n` in decimal.
#[inline]
pub fn write_decimal(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; MAX_DIGITS];
    out.extend_from_slice(decimal(n, &mut digits));
}

/// `n` in decimal, written at the end of `digits` (room for any `u64`):
/// for a value that goes somewhere other than a `Vec`, an HTTP/2 field.
#[inline]
pub fn decimal(n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let start = fill_decimal(digits, n);
    &digits[start..]
}

/// Writes `n` in decimal at the end of `buf` (at least [`MAX_DIGITS`]
/// long) and returns where its first digit is.
fn fill_decimal(buf: &mut [u8], mut n: u64) -> usize {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return i;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_writes_every_u64() {
        let mut digits = [0; 20];
        assert_eq!(decimal(0, &mut digits), b"0");
        assert_eq!(decimal(u64::MAX, &mut digits), b"18446744073709551615");
    }
    use std::time::{Duration, UNIX_EPOCH};

    fn date() -> DateCache {
        DateCache::new(UNIX_EPOCH + Duration::from_secs(784_111_777))
    }

    #[test]
    fn encodes_head_and_reuses_capacity() {
        let mut out = Vec::with_capacity(256);
        let head = ResponseHead {
            content_type: Some(b"text/plain"),
            ..ResponseHead::new(200, Framing::Length(5))
        };
        head.encode(&date(), &mut out).expect("valid head");
        let expected: &[u8] = b"HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
              Content-Type: text/plain\r\nContent-Length: 5\r\n\r\n";
        assert_eq!(out, expected);
        let ptr = out.as_ptr();
        for _ in 0..100 {
            out.clear();
            head.encode(&date(), &mut out).expect("valid head");
        }
        assert_eq!(
            out.as_ptr(),
            ptr,
            "no reallocation once capacity is reached"
        );
    }

    #[test]
    fn connection_headers() {
        let mut out = Vec::new();
        let close = ResponseHead {
            keep_alive: false,
            ..ResponseHead::new(204, Framing::Empty)
        };
        close.encode(&date(), &mut out).expect("valid head");
        assert!(out.ends_with(b"Connection: close\r\n\r\n"));
        assert!(!out.windows(14).any(|w| w == b"Content-Length"));
        out.clear();
        let ka10 = ResponseHead {
            version: 0,
            ..ResponseHead::new(200, Framing::Length(0))
        };
        ka10.encode(&date(), &mut out).expect("valid head");
        assert!(out.ends_with(b"Connection: keep-alive\r\n\r\n"));
    }

    #[test]
    fn rejects_header_injection() {
        let mut out = b"keep".to_vec();
        let head = ResponseHead {
            extra: &[("X", b"a\r\nSet-Cookie: x")],
            ..ResponseHead::new(200, Framing::Length(0))
        };
        assert_eq!(
            head.encode(&date(), &mut out).map_err(|e| e.status),
            Err(500)
        );
        assert_eq!(out, b"keep");
    }

    #[test]
    fn named_status_lines_match_the_reason_phrases() {
        for status in 100..=999 {
            if let Some(line) = named_status_line(status) {
                let expected = format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status));
                assert_eq!(line, expected.as_bytes());
            }
        }
        let mut out = Vec::new();
        status_line(&mut out, 299);
        assert_eq!(out, b"HTTP/1.1 299 \r\n");
        out.clear();
        status_line(&mut out, 1000);
        assert_eq!(out, b"HTTP/1.1 500 Internal Server Error\r\n");
    }

    #[test]
    fn every_registered_status_has_its_phrase() {
        // IANA's HTTP Status Code Registry, every assigned code but the
        // unused 306 and 418.
        let registered = [
            100, 101, 102, 103, 200, 201, 202, 203, 204, 205, 206, 207, 208, 226, 300, 301, 302,
            303, 304, 305, 307, 308, 400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411,
            412, 413, 414, 415, 416, 417, 421, 422, 423, 424, 425, 426, 428, 429, 431, 451, 500,
            501, 502, 503, 504, 505, 506, 507, 508, 510, 511,
        ];
        for status in registered {
            assert_ne!(reason_phrase(status), "", "status {status}");
        }
        assert_eq!(reason_phrase(422), "Unprocessable Content");
        assert_eq!(reason_phrase(451), "Unavailable For Legal Reasons");
        let mut out = Vec::new();
        status_line(&mut out, 409);
        assert_eq!(out, b"HTTP/1.1 409 Conflict\r\n");
        out.clear();
        error_text(&HttpError::new(409, "taken"), &mut out);
        assert_eq!(out, b"Conflict: taken\n");
    }

    #[test]
    fn error_text_says_the_phrase_once() {
        let mut out = Vec::new();
        error_text(&HttpError::new(404, "Not Found"), &mut out);
        assert_eq!(out, b"Not Found\n");
    }

    #[test]
    fn chunks_and_errors() {
        let mut out = Vec::new();
        encode_chunk(&mut out, b"");
        encode_chunk(&mut out, &[b'x'; 26]);
        encode_last_chunk(&mut out);
        let mut expected = b"1a\r\n".to_vec();
        expected.extend_from_slice(&[b'x'; 26]);
        expected.extend_from_slice(b"\r\n0\r\n\r\n");
        assert_eq!(out, expected);

        out.clear();
        error_response(
            &mut out,
            &HttpError::fields_too_large("too many header fields"),
            false,
            &date(),
        );
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
        assert!(text.contains("\r\nConnection: close\r\n"));
        assert!(text.contains("\r\nContent-Length: 56\r\n"));
        assert!(text.ends_with("\r\n\r\nRequest Header Fields Too Large: too many header fields\n"));

        out.clear();
        error_response(&mut out, &HttpError::internal(), false, &date());
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("\r\nContent-Length: 22\r\n"));
        assert!(text.ends_with("\r\n\r\nInternal Server Error\n"));

        out.clear();
        error_response(&mut out, &HttpError::internal(), true, &date());
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.contains("\r\nContent-Length: 22\r\n"),
            "the length GET would get"
        );
        assert!(
            text.ends_with("\r\nConnection: close\r\n\r\n"),
            "no body: {text:?}"
        );

        out.clear();
        method_not_allowed(&mut out, b"GET, HEAD", &date(), true, 1, false).expect("valid Allow");
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"));
        assert!(text.contains("\r\nAllow: GET, HEAD\r\n"));
        assert!(text.ends_with("\r\n\r\nMethod Not Allowed\n"));

        out.clear();
        method_not_allowed(&mut out, b"GET", &date(), true, 1, true).expect("valid Allow");
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.contains("\r\nContent-Length: 19\r\n"),
            "the length GET would get: {text:?}"
        );
        assert!(
            text.ends_with("\r\nAllow: GET\r\n\r\n"),
            "no body: {text:?}"
        );
        assert_eq!(CONTINUE_100, b"HTTP/1.1 100 Continue\r\n\r\n");
    }
}
