//! Decoded query strings and form bodies (`application/x-www-form-urlencoded`):
//! pairs with `%XX` and `+` decoded by `form_urlencoded` (the `url`
//! crate's decoder), values parsed with `FromStr`, and with the `serde`
//! feature whole structs.

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::str::FromStr;

use super::{HttpError, Request};

impl<'r> Request<'r> {
    /// The query's `name=value` pairs in order, decoded: `%XX` escapes and
    /// `+` as a space (bytes that do not form UTF-8 become U+FFFD).
    /// Borrowed from the request where nothing needed decoding.
    ///
    /// ```
    /// # fn show(req: &percore_handlers::http::Request<'_>) {
    /// // `/search?q=caf%C3%A9+au+lait&page=2`
    /// for (name, value) in req.query_pairs() {
    ///     println!("{name} = {value}"); // q = café au lait, page = 2
    /// }
    /// # }
    /// ```
    pub fn query_pairs(&self) -> impl Iterator<Item = (Cow<'r, str>, Cow<'r, str>)> {
        form_urlencoded::parse(self.query().unwrap_or_default().as_bytes())
    }

    /// The decoded value of the query's first `name` parameter (compared
    /// after decoding), if any.
    pub fn query_value(&self, name: &str) -> Option<Cow<'r, str>> {
        self.query_pairs().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// The query's first `name` parameter parsed with [`FromStr`]:
    /// `Ok(None)` when it is absent.
    ///
    /// # Errors
    ///
    /// 400 naming the parameter and why it did not parse
    /// (`query parameter `limit`: invalid digit found in string`).
    pub fn query_as<T>(&self, name: &str) -> Result<Option<T>, HttpError>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        self.query_value(name)
            .map(|v| v.parse())
            .transpose()
            .map_err(|e| HttpError::new(400, format!("query parameter `{name}`: {e}")))
    }

    /// The body's decoded `name=value` pairs, read as [`body`](Self::body)
    /// reads it (within the body limit).
    ///
    /// # Errors
    ///
    /// 415 when the request's `Content-Type` is not
    /// `application/x-www-form-urlencoded`, or as [`body`](Self::body).
    pub async fn form_pairs(
        &mut self,
    ) -> io::Result<impl Iterator<Item = (Cow<'_, str>, Cow<'_, str>)>> {
        self.expect_type(is_form, FORM)?;
        Ok(form_urlencoded::parse(self.body().await?))
    }

    /// The query decoded into a `T` (a struct of named fields, say) by
    /// `serde_urlencoded`.
    ///
    /// Needs the `serde` feature (or `json`, which enables it).
    ///
    /// ```
    /// # fn show(req: &percore_handlers::http::Request<'_>) -> std::io::Result<()> {
    /// #[derive(serde::Deserialize)]
    /// struct Search {
    ///     q: String,
    ///     #[serde(default)]
    ///     limit: Option<u32>,
    /// }
    /// let search: Search = req.query_into()?; // 400 if `q` is missing
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// 400 saying what did not fit (`invalid query: missing field `q``).
    #[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
    #[cfg(feature = "serde")]
    pub fn query_into<T: serde::de::DeserializeOwned>(&self) -> Result<T, HttpError> {
        serde_urlencoded::from_str(self.query().unwrap_or_default())
            .map_err(|e| HttpError::new(400, format!("invalid query: {e}")))
    }

    /// The body, an `application/x-www-form-urlencoded` form, decoded into
    /// a `T` by `serde_urlencoded`.
    ///
    /// Needs the `serde` feature (or `json`, which enables it).
    ///
    /// # Errors
    ///
    /// 415 for another `Content-Type`, 400 for a form that does not fit,
    /// or as [`body`](Self::body).
    #[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
    #[cfg(feature = "serde")]
    pub async fn form<T: serde::de::DeserializeOwned>(&mut self) -> io::Result<T> {
        self.expect_type(is_form, FORM)?;
        let body = self.body().await?;
        serde_urlencoded::from_bytes(body)
            .map_err(|e| HttpError::new(400, format!("invalid form: {e}")).into())
    }

    /// A 415 naming `wanted` unless the `Content-Type`'s media type
    /// passes `accept`.
    pub(crate) fn expect_type(
        &self,
        accept: fn(&[u8]) -> bool,
        wanted: &'static str,
    ) -> Result<(), HttpError> {
        let media = self.content_type().map(media_type).unwrap_or_default();
        if accept(media) {
            return Ok(());
        }
        Err(HttpError::new(
            415,
            format!("expected Content-Type: {wanted}"),
        ))
    }
}

/// The media type of a `Content-Type` value, without parameters or
/// surrounding whitespace.
pub(crate) fn media_type(value: &[u8]) -> &[u8] {
    let end = value.iter().position(|&b| b == b';').unwrap_or(value.len());
    value[..end].trim_ascii()
}

const FORM: &str = "application/x-www-form-urlencoded";

fn is_form(media: &[u8]) -> bool {
    media.eq_ignore_ascii_case(FORM.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::media_type;

    #[test]
    fn media_types_lose_their_parameters() {
        assert_eq!(
            media_type(b"application/json; charset=utf-8"),
            b"application/json"
        );
        assert_eq!(media_type(b" text/plain "), b"text/plain");
        assert_eq!(media_type(b""), b"");
    }
}
