//! percore's HTTP/1.1 grammar, for both roles and with no I/O: request
//! heads parsed in place, response heads scanned, bodies framed and
//! decoded (`Content-Length`, chunked), responses and error answers
//! encoded, the fields a proxy forwards, and the limits that bound them.
//!
//! # Why a crate of its own
//!
//! One grammar serves every side of percore's HTTP: the server
//! (`percore-handlers`' `http`, which re-exports the request side as
//! `http::proto`), its client (`client`, which reads responses with
//! [`response::ResponseParser`]) and the fan-out proxy (`proxy`, which
//! does both and forwards with [`forward`]). Rules such as "a bare LF
//! inside chunked framing is refused" or "`Content-Length` together with
//! `Transfer-Encoding` is refused" are written once and hold for all three,
//! as hyper keeps one `Http1Transaction` for both roles. The tokio
//! baselines in `percore-benches` use the same code (the response head
//! scanner, the forwarded fields), so that a comparison with them measures
//! the runtimes and not two parsers. They do not build percore's runtime,
//! and this crate does not need it: only std and httparse, no sockets, no
//! timers, no executor.
//!
//! Being plain functions over byte slices, the parsers are driven byte by
//! byte in their tests (shotgun splits, mutation fuzzing, a differential
//! test against httparse), which is where request smuggling bugs hide.
//!
//! # Server: reading requests
//!
//! A connection loop drives the request side like this:
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
//! let mut storage = percore_http1::header_storage::<100>();
//! match percore_http1::parse_head(&inbuf, &mut storage, &limits) {
//!     Ok(None) => { /* read more */ }
//!     Ok(Some(head)) => { /* decode body from inbuf[head.head_len..] */ }
//!     Err(e) => { percore_http1::error_response(&mut out, &e, inbuf.starts_with(b"HEAD "), &date); /* close */ }
//! }
//! ```
//!
//! # Client: reading responses
//!
//! [`response::head::parse`] scans a response head in one pass, noting
//! the fields that decide framing and reuse; [`response::ResponseParser`]
//! builds on it and on [`BodyDecoder`] to read a whole response from a
//! growing buffer, interim responses, chunked bodies and bodies delimited
//! by the end of stream included.
#![doc(test(attr(deny(warnings))))]

mod body;
pub mod chars;
mod chunked;
mod date;
mod encode;
mod error;
mod fields;
pub mod forward;
mod limits;
mod line;
mod request;
pub mod response;
mod status;
pub mod tchar;

pub use body::{BodyDecoder, Decoded};
pub use date::DateCache;
pub use encode::{
    decimal, encode_chunk, encode_last_chunk, error_response, error_response_kept_if,
    error_response_with, error_text, method_not_allowed, write_decimal, Framing, ResponseHead,
    CONTINUE_100, ERROR_TEXT_TYPE,
};
pub use error::HttpError;
/// A request header field, as [`RequestHead::headers`] lists them:
/// re-exported so that code naming it needs no `httparse` dependency of
/// its own.
pub use httparse::Header;
pub use limits::Limits;
pub use request::{
    header_storage, max_head_len, parse_head, too_many_fields, BodyKind, HeadRetry, HeaderSlot,
    RequestHead,
};
pub use status::reason_phrase;

#[cfg(test)]
mod tests;
