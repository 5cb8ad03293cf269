//! [`Routed`]: a request as a route's handler sees it, with the route it
//! matched and the path's parameters.

use std::borrow::Cow;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::str::FromStr;

use percent_encoding::percent_decode_str;

use super::super::{HttpError, Request};

/// A request that matched a route: the [`Request`] itself (through `Deref`,
/// so `req.method()`, `req.body().await` and the rest work as they do
/// for a [`Service`](super::super::Service)), the route's pattern, and the
/// values of the pattern's parameters, borrowed from the path as sent.
///
/// ```
/// use std::io;
/// use percore_handlers::http::{Response, Routed};
///
/// async fn file(_: &(), req: &mut Routed<'_, '_>, res: &mut Response<'_>) -> io::Result<()> {
///     // `/files/{user}/{*path}` matched `/files/7/notes/a%20b.txt`:
///     let user: u64 = req.param("user")?; // 7
///     let path = req.param_str("path")?; // "notes/a b.txt", decoded
///     res.send(200, Some(b"text/plain"), format!("{user}: {path}").as_bytes())?;
///     Ok(())
/// }
/// ```
pub struct Routed<'a, 'r> {
    req: &'a mut Request<'r>,
    route: &'a str,
    params: matchit::Params<'a, 'r>,
}

impl<'a, 'r> Routed<'a, 'r> {
    pub(super) fn new(
        req: &'a mut Request<'r>,
        route: &'a str,
        params: matchit::Params<'a, 'r>,
    ) -> Self {
        Self { req, route, params }
    }

    /// The pattern the request matched, as given to the router (with
    /// prefixes), e.g. `/users/{id}`: a label for logs and metrics that
    /// does not grow with the number of users.
    pub fn route(&self) -> &'a str {
        self.route
    }

    /// Parameter `name`'s value as sent, not percent-decoded; `None` if
    /// the route has no such parameter.
    pub fn param_raw(&self, name: &str) -> Option<&'r str> {
        self.params.get(name)
    }

    /// Every parameter, in the pattern's order, values as sent.
    pub fn params(&self) -> impl Iterator<Item = (&str, &'r str)> + '_ {
        self.params.iter()
    }

    /// Parameter `name`, percent-decoded (borrowed when it holds no `%`).
    ///
    /// # Errors
    ///
    /// 400 when the decoded bytes are not UTF-8; 500 when the route has no
    /// such parameter (a mistake in the service, not the client's).
    pub fn param_str(&self, name: &str) -> Result<Cow<'r, str>, HttpError> {
        let raw = self
            .params
            .get(name)
            .ok_or_else(|| missing(name, self.route))?;
        if !raw.contains('%') {
            // Nothing to decode, and already a `str`: checking it as UTF-8
            // again cost a routed request 50 instructions per parameter.
            return Ok(Cow::Borrowed(raw));
        }
        percent_decode_str(raw)
            .decode_utf8()
            .map_err(|_| HttpError::new(400, format!("path parameter `{name}` is not UTF-8")))
    }

    /// Parameter `name`, percent-decoded and parsed with [`FromStr`].
    ///
    /// # Errors
    ///
    /// 400 naming the parameter and why it did not parse
    /// (`path parameter `id`: invalid digit found in string`), or as
    /// [`param_str`](Self::param_str).
    pub fn param<T>(&self, name: &str) -> Result<T, HttpError>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        self.param_str(name)?
            .parse()
            .map_err(|e| HttpError::new(400, format!("path parameter `{name}`: {e}")))
    }
}

fn missing(name: &str, route: &str) -> HttpError {
    HttpError::new(500, format!("route {route} has no parameter `{name}`"))
}

impl<'r> Deref for Routed<'_, 'r> {
    type Target = Request<'r>;

    fn deref(&self) -> &Request<'r> {
        self.req
    }
}

impl DerefMut for Routed<'_, '_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.req
    }
}

impl fmt::Debug for Routed<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Routed")
            .field("route", &self.route)
            .field("request", &self.req)
            .finish_non_exhaustive()
    }
}
