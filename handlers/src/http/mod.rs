//! Pure HTTP/1.1 protocol core: request-head parsing, body framing and
//! response encoding, with no I/O and no dependency on the runtime.
//!
//! The connection loop (the service layer) owns the socket and the buffers;
//! this module only looks at bytes and says what they mean. Keeping the
//! protocol free of I/O lets the shotgun and fuzz tests drive it directly,
//! byte by byte, which is where request smuggling bugs hide.
//!
//! # How a connection loop drives it
//!
//! 1. Append received bytes to one input buffer and call [`parse_head`]
//!    with caller-provided header storage. `Ok(None)` means "read more";
//!    the limits of [`Limits`] are enforced on partial input too, so an
//!    endless request line fails with 414 without waiting for a CRLF.
//! 2. On `Ok(Some(head))`, note [`RequestHead::head_len`], answer 417/100
//!    per [`RequestHead::expect_continue`], and build a [`BodyDecoder`] from
//!    [`RequestHead::body`].
//! 3. Feed the bytes after the head to [`BodyDecoder::decode`] until it
//!    reports `done`; whatever it did not consume is the next pipelined
//!    request (RFC 9112 §9.3.2 requires responses in request order).
//! 4. Encode the response with [`ResponseHead`] into a reused `Vec<u8>`.
//!    On any [`HttpError`], send [`error_response`] and close: after a
//!    framing error the position of the next request is unknown.
//!
//! ```ignore
//! let mut storage = [httparse::EMPTY_HEADER; 100];
//! match http::parse_head(&inbuf, &mut storage, &limits) {
//!     Ok(None) => { /* read more */ }
//!     Ok(Some(head)) => { /* decode body from inbuf[head.head_len..] */ }
//!     Err(e) => { http::error_response(&mut out, e.status, &date); /* close */ }
//! }
//! ```

mod body;
mod chunked;
mod date;
mod encode;
mod error;
mod fields;
mod head;
mod limits;
mod line;

pub use body::{BodyDecoder, Decoded};
pub use date::DateCache;
pub use encode::{
    encode_chunk, encode_last_chunk, error_response, method_not_allowed, reason_phrase, Framing,
    ResponseHead, CONTINUE_100,
};
pub use error::HttpError;
pub use head::{parse_head, BodyKind, RequestHead};
pub use limits::Limits;

#[cfg(test)]
mod tests;
