//! The HTTP/1.1 wire pieces shared by the tokio baseline servers and the
//! clients: the fixed request, the fixed response, the request and answer
//! of the `api` cells, and a minimal response framer.
//!
//! What it measures: nothing; it is the protocol. What it does not do:
//! general HTTP. The framer accepts only `200` responses that carry a
//! `Content-Length` (what every server under test sends for the fixed
//! 20-byte JSON body); chunked encoding and other statuses are errors.

/// The JSON body every HTTP server under test answers with (20 bytes).
pub const BODY: &[u8] = br#"{"message":"Hello!"}"#;

/// The tokio baselines' complete response: status line, two headers, body.
pub const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n{\"message\":\"Hello!\"}";

/// The keep-alive GET every client sends.
pub const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

/// [`REQUEST`] asking the server to close after its answer: the one
/// request of a connection made for its handshake.
pub const CLOSING_REQUEST: &[u8] =
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

/// The keep-alive GET of the `api` cells: one user of the JSON API.
pub const API_USER_REQUEST: &[u8] = b"GET /users/42 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

/// The JSON API's answer to [`API_USER_REQUEST`].
pub const API_USER_BODY: &[u8] = br#"{"id":42,"name":"user-42"}"#;

/// Why a response could not be framed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The status line is not `HTTP/1.x 200`.
    Status(String),
    /// No usable `Content-Length` header.
    NoContentLength,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Status(s) => write!(f, "unexpected HTTP status line {s:?}"),
            FrameError::NoContentLength => f.write_str("HTTP response without Content-Length"),
        }
    }
}

impl std::error::Error for FrameError {}

impl From<FrameError> for std::io::Error {
    fn from(e: FrameError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }
}

/// Position just past the first `\r\n\r\n` in `buf`, if any.
pub fn header_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

/// Length of the first complete response at the start of `buf`:
/// `Ok(None)` if more bytes are needed.
pub fn frame_response(buf: &[u8]) -> Result<Option<usize>, FrameError> {
    let Some(head_len) = header_end(buf) else {
        return Ok(None);
    };
    let head = &buf[..head_len];
    let mut lines = head.split(|&b| b == b'\n');
    let status = lines.next().unwrap_or_default();
    let ok = status.starts_with(b"HTTP/1.")
        && status.get(8..12) == Some(b" 200".as_slice())
        && matches!(status.get(12), Some(b' ' | b'\r'));
    if !ok {
        return Err(FrameError::Status(
            String::from_utf8_lossy(status).trim_end().to_string(),
        ));
    }
    let mut len = None;
    for line in lines {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        if line[..colon].eq_ignore_ascii_case(b"content-length") {
            len = std::str::from_utf8(&line[colon + 1..])
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok());
            if len.is_none() {
                return Err(FrameError::NoContentLength);
            }
        }
    }
    let body = len.ok_or(FrameError::NoContentLength)?;
    let total = head_len + body;
    Ok((buf.len() >= total).then_some(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_are_consistent() {
        assert_eq!(BODY.len(), 20);
        assert!(RESPONSE.ends_with(BODY));
        assert_eq!(frame_response(RESPONSE), Ok(Some(RESPONSE.len())));
    }

    #[test]
    fn frames_partial_and_pipelined() {
        assert_eq!(frame_response(&RESPONSE[..10]), Ok(None));
        assert_eq!(frame_response(&RESPONSE[..RESPONSE.len() - 1]), Ok(None));
        let two = [RESPONSE, RESPONSE].concat();
        assert_eq!(frame_response(&two), Ok(Some(RESPONSE.len())));
        let other =
            b"HTTP/1.1 200 OK\r\nserver: x\r\ncontent-length:  20 \r\ndate: y\r\n\r\n{\"message\":\"Hello!\"}";
        assert_eq!(frame_response(other), Ok(Some(other.len())));
    }

    #[test]
    fn rejects_bad_responses() {
        assert!(matches!(
            frame_response(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
            Err(FrameError::Status(_))
        ));
        assert_eq!(
            frame_response(b"HTTP/1.1 200 OK\r\n\r\n"),
            Err(FrameError::NoContentLength)
        );
        assert_eq!(
            frame_response(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"),
            Err(FrameError::NoContentLength)
        );
    }
}
