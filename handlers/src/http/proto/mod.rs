//! The sans-I/O protocol core of HTTP/1.1: request heads parsed in place,
//! bodies decoded, responses and error answers encoded, with the limits
//! that bound them. The server layer in [`http`](super) drives these; they
//! are public for those who want the protocol pieces on their own.
//!
//! The parsing and framing underneath are plain functions with no I/O, so
//! the shotgun and fuzz tests drive them byte by byte, which is where
//! request smuggling bugs hide. A connection loop drives them like this:
//!
//! 1. Append received bytes to one input buffer and call [`parse_head`]
//!    with caller-provided header storage. `Ok(None)` means "read more";
//!    the limits of [`Limits`] are enforced on partial input too, so an
//!    endless request line fails with 414 without waiting for a CRLF. For
//!    a head that spans reads, ask [`HeadRetry::due`] before parsing again,
//!    so that a head trickled a byte at a time is not parsed once per byte.
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
//! let mut storage = proto::header_storage::<100>();
//! match proto::parse_head(&inbuf, &mut storage, &limits) {
//!     Ok(None) => { /* read more */ }
//!     Ok(Some(head)) => { /* decode body from inbuf[head.head_len..] */ }
//!     Err(e) => { proto::error_response(&mut out, &e, inbuf.starts_with(b"HEAD "), &date); /* close */ }
//! }
//! ```

mod body;
pub(crate) mod chars;
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
    encode_chunk, encode_last_chunk, error_response, error_response_with, error_text,
    method_not_allowed, reason_phrase, Framing, ResponseHead, CONTINUE_100, ERROR_TEXT_TYPE,
};
pub(crate) use encode::{error_response_kept_if, write_decimal};
pub use error::HttpError;
pub(crate) use head::too_many_fields;
pub use head::{
    header_storage, max_head_len, parse_head, BodyKind, HeadRetry, HeaderSlot, RequestHead,
};
/// A request header field, as [`RequestHead::headers`] lists them:
/// re-exported so that code naming it needs no `httparse` dependency of
/// its own.
pub use httparse::Header;
pub use limits::Limits;

#[cfg(test)]
mod tests;
