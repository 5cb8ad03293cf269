//! JSON bodies (feature `json`): requests deserialized and responses
//! serialized by `serde_json`, the response straight into the
//! connection's reused body buffer.

use std::io;

use serde::{Deserialize, Serialize};

use super::{HttpError, Request, Response};

/// The content type of [`Response::json`]'s answers.
///
/// Needs the `json` feature.
#[cfg_attr(docsrs, doc(cfg(feature = "json")))]
pub const JSON_TYPE: &str = "application/json";

impl Request<'_> {
    /// The body, JSON, deserialized into a `T`. The body is read as
    /// [`body`](Self::body) reads it, within the route's body limit. `T`
    /// may borrow from the body: a `Cow<str>` marked `#[serde(borrow)]` is
    /// borrowed unless the string holds escapes (a `&str` field refuses
    /// those, with a 400).
    ///
    /// Needs the `json` feature.
    ///
    /// ```
    /// # async fn f(req: &mut percore_handlers::http::Request<'_>) -> std::io::Result<()> {
    /// use std::borrow::Cow;
    ///
    /// #[derive(serde::Deserialize)]
    /// struct NewUser<'a> {
    ///     #[serde(borrow)]
    ///     name: Cow<'a, str>,
    /// }
    /// let user: NewUser<'_> = req.json().await?;
    /// # let _ = user.name; Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// 415 unless the `Content-Type` is `application/json` (or a
    /// `+json` type), 413 over the limit, 400 for a body that is not JSON
    /// or does not fit `T`, saying where (`invalid JSON: missing field
    /// `name` at line 1 column 2`), or as [`body`](Self::body).
    #[cfg_attr(docsrs, doc(cfg(feature = "json")))]
    pub async fn json<'a, T: Deserialize<'a>>(&'a mut self) -> io::Result<T> {
        self.expect_type(is_json, JSON_TYPE)?;
        let body = self.body().await?;
        serde_json::from_slice(body)
            .map_err(|e| HttpError::new(400, format!("invalid JSON: {e}")).into())
    }
}

impl Response<'_> {
    /// The whole response: `status`, `Content-Type: application/json`, and
    /// `value` serialized into the body buffer (no intermediate string).
    ///
    /// Needs the `json` feature.
    ///
    /// ```
    /// # fn f(res: &mut percore_handlers::http::Response<'_>) -> std::io::Result<()> {
    /// #[derive(serde::Serialize)]
    /// struct User<'a> {
    ///     id: u64,
    ///     name: &'a str,
    /// }
    /// res.json(200, &User { id: 7, name: "ann" })?; // {"id":7,"name":"ann"}
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A 500 [`HttpError`] when `value` cannot be serialized (a map with
    /// non-string keys, a `Serialize` impl that fails), the body then
    /// empty; or as [`send`](Self::send).
    #[cfg_attr(docsrs, doc(cfg(feature = "json")))]
    pub fn json<T: Serialize + ?Sized>(&mut self, status: u16, value: &T) -> Result<(), HttpError> {
        self.send_with(status, Some(JSON_TYPE.as_bytes()), |body| {
            serde_json::to_writer(body, value).map_err(|e| {
                tracing::warn!("response not serialized as JSON: {e}");
                HttpError::new(500, "response not serialized")
            })
        })
    }
}

/// `application/json`, or a structured `+json` type
/// (`application/problem+json`).
fn is_json(media: &[u8]) -> bool {
    media.eq_ignore_ascii_case(JSON_TYPE.as_bytes())
        || (media.len() > 5
            && media[media.len() - 5..].eq_ignore_ascii_case(b"+json")
            && media.contains(&b'/'))
}

#[cfg(test)]
mod tests {
    use super::is_json;

    #[test]
    fn json_media_types() {
        assert!(is_json(b"application/json"));
        assert!(is_json(b"Application/JSON"));
        assert!(is_json(b"application/problem+json"));
        assert!(!is_json(b"text/plain"));
        assert!(!is_json(b"+json"));
        assert!(!is_json(b""));
    }
}
