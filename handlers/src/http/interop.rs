//! Conversions to and from the `http` crate's types (feature `http`), for
//! code that already speaks them: a request head as
//! [`http::request::Parts`], an [`http::Response`] as the answer.

use super::{HttpError, Request, Response};

impl Request<'_> {
    /// The head as [`http::request::Parts`] (method, URI, version, header
    /// fields; copied, so it outlives the request). The body is read as
    /// usual, with [`body`](Self::body) or [`chunk`](Self::chunk).
    ///
    /// Needs the `http` feature.
    ///
    /// # Errors
    ///
    /// 400 for a target the `http` crate cannot represent as a URI.
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn to_http_parts(&self) -> Result<http::request::Parts, HttpError> {
        let bad = |what: &str| HttpError::new(400, format!("{what} not representable"));
        let mut builder = http::Request::builder()
            .method(self.method())
            .uri(self.target())
            .version(match self.version() {
                0 => http::Version::HTTP_10,
                2 => http::Version::HTTP_2,
                _ => http::Version::HTTP_11,
            });
        for field in self.headers() {
            builder = builder.header(field.name, field.value);
        }
        let request = builder.body(()).map_err(|e| {
            if e.is::<http::uri::InvalidUri>() {
                bad("request target")
            } else {
                bad("request head")
            }
        })?;
        Ok(request.into_parts().0)
    }
}

impl Response<'_> {
    /// Answers with `response`: its status, its header fields (but those
    /// the server sets itself: `Content-Length`, `Transfer-Encoding`,
    /// `Connection`, `Keep-Alive`, `Date`, which are dropped) and its body.
    ///
    /// Needs the `http` feature.
    ///
    /// ```
    /// # fn f(res: &mut percore_handlers::http::Response<'_>) -> std::io::Result<()> {
    /// let answer = http::Response::builder()
    ///     .status(201)
    ///     .header("Location", "/users/7")
    ///     .body(b"created\n".to_vec())
    ///     .expect("a valid response");
    /// res.set_http(answer)?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send) and [`header`](Self::header): the head
    /// was already sent, or a field value holds a control byte.
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn set_http<B: AsRef<[u8]>>(
        &mut self,
        response: http::Response<B>,
    ) -> Result<(), HttpError> {
        let (parts, body) = response.into_parts();
        self.send(parts.status.as_u16(), None, body.as_ref())?;
        for (name, value) in &parts.headers {
            if !super::response::is_framing_field(name.as_str()) {
                self.header(name.as_str(), value.as_bytes())?;
            }
        }
        Ok(())
    }
}
