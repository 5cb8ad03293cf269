//! Trailer fields: sent after the body, on HTTP/2 (where gRPC, for one,
//! puts its status).

use super::{chars, invalid, is_framing_field, HttpError, Response};

impl Response<'_> {
    /// Adds a trailer field, sent after the body. On HTTP/2 the trailers
    /// end the stream as a HEADERS frame of their own; on HTTP/1.1 they are
    /// not sent (a client must ask for them with `TE: trailers`, and few
    /// do), nor for `HEAD`, 204 or 304. [`Request::version`] tells which
    /// the client speaks.
    ///
    /// [`Request::version`]: crate::http::Request::version
    ///
    /// # Errors
    ///
    /// A 500 [`HttpError`] when `name` is not a token or is a framing
    /// field, or `value` holds CR, LF or another control byte, as for
    /// [`header`](Self::header).
    pub fn trailer(&mut self, name: &str, value: &[u8]) -> Result<(), HttpError> {
        if is_framing_field(name) || !chars::is_token(name.as_bytes()) || name.starts_with(':') {
            return Err(invalid("invalid trailer field"));
        }
        if !chars::is_field_value(value) {
            return Err(invalid("invalid trailer field"));
        }
        let t = &mut self.trailers;
        t.reserve(name.len() + value.len() + 4);
        t.extend_from_slice(name.as_bytes());
        t.extend_from_slice(b": ");
        t.extend_from_slice(value);
        t.extend_from_slice(b"\r\n");
        Ok(())
    }
}
