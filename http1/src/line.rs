//! Raw line scanning that httparse does not do for us: length limits on
//! partial input, and telling an unsupported version (505) from a malformed
//! request line (400).

use super::chars::is_token;
use super::{HttpError, Limits};

/// Where the request line ends, as far as the buffer shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestLine {
    /// The line is not terminated yet.
    Open,
    /// `start..end` is the line without its ending; `next` is the index of
    /// the first byte after its LF.
    Done {
        start: usize,
        end: usize,
        next: usize,
    },
}

/// Finds the request line and applies the 414 limit, before httparse runs.
///
/// Empty lines before the request line are skipped, as httparse does and as
/// RFC 9112 §2.2 allows ("SHOULD ignore at least one empty line (CRLF)
/// received prior to the request-line"), but they count toward the limit
/// so an endless stream of CRLFs cannot hold the connection open.
///
/// Scanning stops after `max_request_line + 2` bytes, so this is O(limit)
/// even on a huge buffer.
pub(crate) fn request_line(buf: &[u8], limits: &Limits) -> Result<RequestLine, HttpError> {
    let max = limits.max_request_line;
    let window = &buf[..buf.len().min(max.saturating_add(2))];
    let mut start = 0;
    while start < window.len() {
        match window[start..].iter().position(|&b| b == b'\n') {
            None => break,
            Some(rel) => {
                let lf = start + rel;
                let end = if lf > start && window[lf - 1] == b'\r' {
                    lf - 1
                } else {
                    lf
                };
                if end > max {
                    return Err(TOO_LONG);
                }
                if end == start {
                    // An empty line before the request line: skip it.
                    start = lf + 1;
                    continue;
                }
                return Ok(RequestLine::Done {
                    start,
                    end,
                    next: lf + 1,
                });
            }
        }
    }
    // No LF yet. A trailing CR may still become CRLF, so it does not count.
    let open = match buf.last() {
        Some(b'\r') => buf.len() - 1,
        _ => buf.len(),
    };
    if open > max {
        return Err(TOO_LONG);
    }
    Ok(RequestLine::Open)
}

const TOO_LONG: HttpError = HttpError::uri_too_long("request line too long");

/// Applies the 431 limits to the field section `fields` (the bytes after the
/// request line, up to the end of the head or of the buffer if the head is
/// incomplete). Both checks only grow with more input, so a partial head
/// fails exactly when the complete one would.
pub(crate) fn check_fields(fields: &[u8], limits: &Limits) -> Result<(), HttpError> {
    if fields.len() > limits.max_header_bytes {
        return Err(HttpError::fields_too_large("header section too large"));
    }
    for line in fields.split(|&b| b == b'\n') {
        let len = match line.last() {
            Some(b'\r') => line.len() - 1,
            _ => line.len(),
        };
        if len > limits.max_field_line {
            return Err(HttpError::fields_too_large("header field line too long"));
        }
    }
    Ok(())
}

/// Decides 505 or 400 when httparse rejected the version.
///
/// The method and target of a complete request line `method SP target SP
/// HTTP/1.x` whose minor version `x` is above 1: RFC 9110 §6.2 has a
/// server answer such a request as the highest minor version it
/// implements, 1.1. httparse refuses any version but 1.0 and 1.1, so the
/// line is checked here as httparse would (a token, then visible ASCII).
pub(crate) fn higher_minor(buf: &[u8], line: RequestLine) -> Option<(&str, &str)> {
    let RequestLine::Done { start, end, .. } = line else {
        return None;
    };
    let mut parts = buf[start..end].split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let minor = match version {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', minor] => *minor,
        _ => return None,
    };
    let visible = |s: &[u8]| !s.is_empty() && s.iter().all(|&b| (0x21..0x7f).contains(&b));
    if !(b'2'..=b'9').contains(&minor) || !is_token(method) || !visible(target) {
        return None;
    }
    // Both are ASCII, checked above.
    Some((
        std::str::from_utf8(method).ok()?,
        std::str::from_utf8(target).ok()?,
    ))
}

/// httparse reports `HTTP/1.2`, `HTTP/2.0` and `GE T / HTTP/1.1` alike as a
/// version error. RFC 9112 §2.3 defines `HTTP-version = HTTP-name "/" DIGIT
/// "." DIGIT`; a request line of exactly `method SP target SP version` with a
/// well-formed version of another major version gets 505 (RFC 9110
/// §15.6.6; a higher 1.x is served as 1.1 before this is asked), and
/// anything else, including `HTTP/0.9` and multi-digit versions such as
/// `HTTP/4294967295.255`, is malformed: 400. `Ok(None)` means the line is
/// still open and could become either, so more bytes are needed.
pub(crate) fn classify_version(buf: &[u8], line: RequestLine) -> Result<Option<()>, HttpError> {
    let (text, open) = match line {
        RequestLine::Done { start, end, .. } => (&buf[start..end], false),
        RequestLine::Open => {
            // Skip the empty lines httparse skipped; a lone trailing CR may
            // still be the start of the line ending.
            let mut rest = buf;
            while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
                rest = &rest[pos + 1..];
            }
            let rest = rest.strip_suffix(b"\r").unwrap_or(rest);
            (rest, true)
        }
    };
    let malformed = HttpError::bad_request("malformed request line");
    let mut parts = text.split(|&b| b == b' ');
    let (Some(_method), Some(_target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed);
    };
    const SHAPE: &[u8] = b"HTTP/d.d";
    if version.len() > SHAPE.len() {
        return Err(malformed);
    }
    let fits = version.iter().zip(SHAPE).all(|(&b, &s)| match s {
        b'd' => b.is_ascii_digit(),
        _ => b == s,
    });
    if !fits {
        return Err(malformed);
    }
    if open || version.len() < SHAPE.len() {
        // `HTTP/1.2` without its line ending could still be `HTTP/1.25`.
        return if open { Ok(None) } else { Err(malformed) };
    }
    match (version[5], version[7]) {
        (b'0', _) => Err(HttpError::bad_request("HTTP/0.x request")),
        (b'1', b'0' | b'1') => Err(malformed),
        _ => Err(HttpError::version("unsupported HTTP version")),
    }
}
