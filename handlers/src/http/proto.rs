//! The sans-I/O protocol core of HTTP/1.1 that the server layer in
//! [`http`](super) drives: request heads parsed in place, bodies decoded,
//! responses and error answers encoded, with the limits that bound them.
//!
//! It is the request side of [`percore_http1`], the grammar the server,
//! the [`client`](crate::client) and the [`proxy`](crate::proxy) share,
//! re-exported here for those who want the protocol pieces on their own
//! without naming another crate; see that crate for how a connection loop
//! drives them.

pub(crate) use percore_http1::{chars, error_response_kept_if, too_many_fields, write_decimal};
pub use percore_http1::{
    encode_chunk, encode_last_chunk, error_response, error_response_with, error_text,
    header_storage, max_head_len, method_not_allowed, parse_head, reason_phrase, BodyDecoder,
    BodyKind, DateCache, Decoded, Framing, HeadRetry, Header, HeaderSlot, HttpError, Limits,
    RequestHead, ResponseHead, CONTINUE_100, ERROR_TEXT_TYPE,
};
