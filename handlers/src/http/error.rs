//! [`Error`]: what a route returns, so that `?` takes any error.
//!
//! A route's failure has two readers: the client, who gets a status and
//! must learn nothing of the server's insides, and the log, which wants
//! the whole cause. [`Error`] keeps the cause as it was raised and leaves
//! the status to the layer: an [`HttpError`] (or an I/O error made from
//! one) keeps its status and reason, any other error is a bare 500.

use std::error::Error as StdError;
use std::fmt;
use std::io;

use super::proto::HttpError;

/// A route's error: any error, kept whole for the log.
///
/// `?` converts every type that implements [`std::error::Error`] (and is
/// `Send + Sync + 'static`): I/O errors, `serde_json::Error`, a
/// `tokio_postgres::Error` from a call made through `percore-tokio`,
/// the [`HttpError`]s of [`Routed::param`](super::Routed::param), your
/// own types. So a route can mix them without `map_err`:
///
/// ```
/// use percore_handlers::http::{self, HttpError, Response, Routed};
///
/// async fn page(_: &(), req: &mut Routed<'_, '_>, res: &mut Response<'_>) -> http::Result {
///     let n: usize = req.param("n")?; // not a number: 400 naming `n`
///     if n == 0 {
///         // Sent to the client: `404 Not Found: no page 0`.
///         return Err(HttpError::new(404, "no page 0").into());
///     }
///     // Any other error: the client gets a bare 500, the log the cause.
///     let home = std::env::var("HOME")?;
///     res.send(200, None, format!("{home} {n}").as_bytes())?;
///     Ok(())
/// }
/// ```
///
/// What the client gets, and what is logged:
///
/// - an [`HttpError`] (or an [`io::Error`] made from one): its status and
///   reason, as for a [`Service`](super::Service);
/// - anything else: `500 Internal Server Error` and nothing more;
/// - the error, with its chain of causes, is logged with the request's
///   method and target: at WARN for a 5xx, at debug for a 4xx.
///
/// `Error` does not implement [`std::error::Error`] itself (it could not
/// then convert from every type that does), as `anyhow::Error` does not.
pub struct Error(Box<dyn StdError + Send + Sync>);

/// A route's result: [`Error`] unless said otherwise, `()` by default.
pub type Result<T = (), E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error it carries.
    pub fn get_ref(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.0
    }

    /// The status the client gets: the [`HttpError`]'s inside, if it is
    /// an error status, else 500.
    pub fn status(&self) -> u16 {
        http_error(&*self.0)
            .map(|e| e.status)
            .filter(|status| (400..=599).contains(status))
            .unwrap_or(500)
    }
}

/// The `HttpError` that `e` is, or that the I/O error `e` wraps.
fn http_error<'a>(e: &'a (dyn StdError + 'static)) -> Option<&'a HttpError> {
    if let Some(e) = e.downcast_ref::<HttpError>() {
        return Some(e);
    }
    e.downcast_ref::<io::Error>()?
        .get_ref()?
        .downcast_ref::<HttpError>()
}

impl<E: StdError + Send + Sync + 'static> From<E> for Error {
    fn from(error: E) -> Self {
        Error(Box::new(error))
    }
}

/// The form the server layer answers and logs: an I/O error stays itself,
/// an [`HttpError`] becomes the I/O error that carries it, anything else
/// is wrapped (its `Display` and causes kept).
impl From<Error> for io::Error {
    fn from(error: Error) -> Self {
        let inner = match error.0.downcast::<io::Error>() {
            Ok(io) => return *io,
            Err(inner) => inner,
        };
        match inner.downcast::<HttpError>() {
            Ok(http) => (*http).into(),
            Err(inner) => io::Error::other(inner),
        }
    }
}

/// The message, then its causes: `a: b: c`.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Chain(&*self.0))
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// An error and its causes on one line, `a: b: c`: a log line that says
/// only `db error` hides the one thing worth reading.
pub(crate) struct Chain<'a>(pub(crate) &'a (dyn StdError + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

/// What a route may return: `io::Result<()>`, or a `Result<(), E>` whose
/// `E` converts into [`Error`] ([`Error`] itself, [`HttpError`], any
/// `std::error::Error`). Sealed: the layer turns it into the
/// `io::Result` a [`Service`](super::Service) returns.
pub trait RouteResult: sealed::Sealed {
    /// The result as the server layer answers it.
    fn into_io(self) -> io::Result<()>;
}

impl<E: Into<Error>> RouteResult for std::result::Result<(), E> {
    #[inline]
    fn into_io(self) -> io::Result<()> {
        self.map_err(|e| io::Error::from(e.into()))
    }
}

impl From<Error> for Box<dyn StdError + Send + Sync> {
    fn from(error: Error) -> Self {
        error.0
    }
}

mod sealed {
    pub trait Sealed {}
    impl<E: Into<super::Error>> Sealed for std::result::Result<(), E> {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(io::Error);

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("cannot load the page")
        }
    }

    impl StdError for Outer {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn statuses_and_causes() {
        let e = Error::from(HttpError::new(404, "no page"));
        assert_eq!(e.status(), 404);
        let io = io::Error::from(e);
        assert_eq!(HttpError::of(&io).map(|e| e.status), Some(404));

        let e = Error::from(io::Error::from(HttpError::new(409, "taken")));
        assert_eq!(e.status(), 409);
        assert_eq!(
            HttpError::of(&io::Error::from(e)).map(|e| e.status),
            Some(409)
        );

        let e = Error::from(HttpError::new(200, "not an error status"));
        assert_eq!(e.status(), 500);

        let e = Error::from(Outer(io::Error::other("disk on fire")));
        assert_eq!(e.status(), 500);
        assert_eq!(e.to_string(), "cannot load the page: disk on fire");
        let io = io::Error::from(e);
        assert_eq!(HttpError::of(&io), None);
        assert_eq!(Chain(&io).to_string(), "cannot load the page: disk on fire");

        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        let io = io::Error::from(Error::from(refused));
        assert_eq!(io.kind(), io::ErrorKind::ConnectionRefused);
    }
}
