//! The one error type of the protocol core: which status to answer, and why.

use std::borrow::Cow;
use std::fmt;

/// A request the server refuses to process.
///
/// Carries the status code to send back and a static reason, which is
/// logged and also sent to the client as the body of the error response
/// (see [`error_response`](super::error_response)), so it must say what
/// was wrong with the request without revealing anything else.
///
/// An `HttpError` of the protocol core (a refused head or body) ends the
/// connection: once framing is in doubt, no later byte on the connection
/// can be trusted to start a new request (RFC 9112 §11.2, request
/// smuggling). One a service returns with a 4xx status, after its request
/// was read to its end, is its answer to a sound request and keeps the
/// connection; see `percore-handlers`' `http::Service` for when.
///
/// Only error statuses are sent as such: a service that returns an
/// `HttpError` whose status is outside 400–599 gets a bare 500 instead
/// (to answer with another status, set it on the
/// response and return `Ok`).
///
/// ```
/// use std::io;
/// use percore_http1::HttpError;
///
/// fn busy() -> io::Result<()> {
///     // The client gets `503 Service Unavailable: try again later`.
///     Err(HttpError::new(503, "try again later").into())
/// }
///
/// let e = busy().unwrap_err();
/// assert_eq!(HttpError::of(&e).map(|e| e.status), Some(503));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    /// Status code to answer with: 400, 408, 413, 414, 417, 431, 500, 501,
    /// 503 or 505 from the server itself; any 400–599 from a service.
    pub status: u16,
    /// Short description of the cause, for the client and the log; empty
    /// when the status says all there is to say. Static text costs
    /// nothing; an owned one (`format!("no user {id}")`) lets an answer
    /// say which thing was wrong.
    pub reason: Cow<'static, str>,
}

impl HttpError {
    /// An error with `status` (400–599 to be answered as such, see above)
    /// and `reason`, static or owned.
    ///
    /// ```
    /// use percore_http1::HttpError;
    ///
    /// let id = 7;
    /// let e = HttpError::new(404, format!("no user {id}"));
    /// assert_eq!(e.to_string(), "404 no user 7");
    /// ```
    pub fn new(status: u16, reason: impl Into<Cow<'static, str>>) -> Self {
        Self {
            status,
            reason: reason.into(),
        }
    }

    /// 400 Bad Request: malformed syntax or ambiguous framing.
    #[inline]
    pub const fn bad_request(reason: &'static str) -> Self {
        Self {
            status: 400,
            reason: Cow::Borrowed(reason),
        }
    }

    /// 408 Request Timeout: the head or body did not arrive in time.
    #[inline]
    pub const fn timeout(reason: &'static str) -> Self {
        Self {
            status: 408,
            reason: Cow::Borrowed(reason),
        }
    }

    /// 500 Internal Server Error, with nothing for the client to learn.
    #[inline]
    pub const fn internal() -> Self {
        Self {
            status: 500,
            reason: Cow::Borrowed(""),
        }
    }

    /// 413 Content Too Large: the body is over [`super::Limits::max_body`].
    #[inline]
    pub const fn too_large(reason: &'static str) -> Self {
        Self {
            status: 413,
            reason: Cow::Borrowed(reason),
        }
    }

    /// 414 URI Too Long: the request line is over its limit.
    #[inline]
    pub const fn uri_too_long(reason: &'static str) -> Self {
        Self {
            status: 414,
            reason: Cow::Borrowed(reason),
        }
    }

    /// 417 Expectation Failed: an `Expect` other than `100-continue`.
    #[inline]
    pub const fn expectation(reason: &'static str) -> Self {
        Self {
            status: 417,
            reason: Cow::Borrowed(reason),
        }
    }

    /// 431 Request Header Fields Too Large.
    #[inline]
    pub const fn fields_too_large(reason: &'static str) -> Self {
        Self {
            status: 431,
            reason: Cow::Borrowed(reason),
        }
    }

    /// 501 Not Implemented: a transfer coding we do not understand.
    #[inline]
    pub const fn not_implemented(reason: &'static str) -> Self {
        Self {
            status: 501,
            reason: Cow::Borrowed(reason),
        }
    }

    /// 503 Service Unavailable: the server stopped before the service
    /// answered (see the HTTP module's docs on stopping).
    #[inline]
    pub const fn stopping() -> Self {
        Self {
            status: 503,
            reason: Cow::Borrowed("the server is stopping"),
        }
    }

    /// 505 HTTP Version Not Supported.
    #[inline]
    pub const fn version(reason: &'static str) -> Self {
        Self {
            status: 505,
            reason: Cow::Borrowed(reason),
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reason.is_empty() {
            write!(f, "{}", self.status)
        } else {
            write!(f, "{} {}", self.status, self.reason)
        }
    }
}

impl std::error::Error for HttpError {}

/// Lets a service return an `HttpError` with `?`; the server answers with its status (see [`HttpError::of`]).
impl From<HttpError> for std::io::Error {
    fn from(e: HttpError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }
}

impl HttpError {
    /// The reason if it is static text, else a generic one: for callers
    /// that keep reasons without allocating.
    #[inline]
    pub fn static_reason(&self) -> &'static str {
        match self.reason {
            Cow::Borrowed(reason) => reason,
            Cow::Owned(_) => "malformed",
        }
    }

    /// The `HttpError` inside an I/O error made from one, if any.
    pub fn of(e: &std::io::Error) -> Option<HttpError> {
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<HttpError>())
            .cloned()
    }
}
