//! The answer to plain HTTP sent to a TLS port: `400 Bad Request` in the
//! clear, as nginx gives it, instead of a TLS alert that a browser or
//! curl shows as garbage (`Received HTTP/0.9 when not allowed`).
//!
//! A TLS connection opens with a handshake record, whose first byte is
//! 22 (RFC 8446 §5.1); an HTTP/1 request opens with its method, a token
//! that in practice is ASCII capitals, then a space (RFC 9112 §3). The two
//! cannot be mistaken for each other in the first bytes.

use std::time::Duration;

use crate::core::context;
use crate::net::Stream;

/// The body nginx sends, word for word, so that the one who reads it
/// recognises it.
const BODY: &str = "The plain HTTP request was sent to HTTPS port\n";

/// The longest method we take for one (`OPTIONS` is 7, WebDAV's
/// `VERSION-CONTROL` would be longer, but is not capitals alone).
const MAX_METHOD: usize = 16;

/// Most bytes read and dropped after the answer, so that a request body
/// still coming does not turn the close into a reset that destroys it.
const MAX_DRAIN: usize = 64 * 1024;

/// Longest wait for the client's end of stream after the answer: a
/// client that keeps its connection open must not hold it until the
/// handshake's deadline.
const LINGER: Duration = Duration::from_secs(2);

/// Whether a connection's first bytes are an HTTP/1 request line's start:
/// one to [`MAX_METHOD`] ASCII capitals, then a space.
pub(super) fn looks_like_http(first: &[u8]) -> bool {
    let method = first.iter().take_while(|b| b.is_ascii_uppercase()).count();
    (1..=MAX_METHOD).contains(&method) && first.get(method) == Some(&b' ')
}

/// The complete answer: status line, fields, body.
fn answer() -> Vec<u8> {
    format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
        BODY.len()
    )
    .into_bytes()
}

/// Counts and logs the connection, sends the answer, shuts the write
/// side and reads (and drops) what the client still sends, up to
/// [`MAX_DRAIN`] bytes, its end of stream or [`LINGER`]. The caller
/// closes.
pub(super) async fn refuse(stream: &Stream) {
    context::try_with_core(|core| core.shared.stats.tls_plain_http.add(1));
    tracing::debug!("plain HTTP sent to the TLS port; answered 400 Bad Request and closing");
    let (sent, _) = stream.write_all(answer()).await;
    if sent.is_err() || stream.shutdown_write().is_err() {
        return;
    }
    let drain = async {
        let mut drained = 0;
        while drained < MAX_DRAIN {
            match stream.read().await {
                Ok(Some(bytes)) => drained += bytes.len(),
                Ok(None) | Err(_) => return,
            }
        }
    };
    // Either way the connection closes now.
    let _ = crate::time::timeout(LINGER, drain).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_a_request_line_from_a_client_hello() {
        for first in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"POST /x",
            b"OPTIONS * HTTP/1.1",
            b"PRI * HTTP/2.0",
        ] {
            assert!(
                looks_like_http(first),
                "{:?}",
                String::from_utf8_lossy(first)
            );
        }
        let hello = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01];
        for first in [
            &hello[..],
            b"",
            b"GET",
            b" GET /",
            b"get / HTTP/1.1",
            b"ABCDEFGHIJKLMNOPQ /",
        ] {
            assert!(
                !looks_like_http(first),
                "{:?}",
                String::from_utf8_lossy(first)
            );
        }
    }

    #[test]
    fn the_answer_is_framed() {
        let answer = String::from_utf8(answer()).expect("text");
        let (head, body) = answer.split_once("\r\n\r\n").expect("a head");
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
        assert!(head.contains("\r\nConnection: close"), "{head}");
        assert!(
            head.contains(&format!("\r\nContent-Length: {}", body.len())),
            "{head}"
        );
        assert_eq!(body, BODY);
    }
}
