//! [`ClientError`]: why a request failed, said with the request it was
//! (`GET http://127.0.0.1:8080/x: reading the response head timed out
//! after 5s`), and sorted by [`ErrorKind`] for code that reacts to it.

use std::error::Error;
use std::fmt;
use std::io;
use std::rc::Rc;
use std::time::Duration;

use super::exchange::{Failure, IoFailure};
use crate::http::HttpError;
use crate::one_line::OneLine;

/// A stage of a request, as a timeout names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// Resolving the host name to addresses.
    Resolve,
    /// Connecting, with the TLS handshake for `https`.
    Connect,
    /// Writing the request.
    Write,
    /// Waiting for the response's status line and header fields.
    ReadHead,
    /// Waiting for the next piece of the response's body.
    ReadBody,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Resolve => "resolving the host name",
            Op::Connect => "connecting",
            Op::Write => "writing the request",
            Op::ReadHead => "reading the response head",
            Op::ReadBody => "reading the response body",
        })
    }
}

/// What went wrong, for code that reacts to it; [`ClientError`]'s
/// `Display` says it in words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The URL cannot be requested, for this reason.
    InvalidUrl(&'static str),
    /// The method or a header field cannot be sent, for this reason.
    InvalidRequest(&'static str),
    /// A value given to [`RequestBuilder::path_segment`] cannot be sent
    /// as one segment (empty, `.`, `..`, or holding `/` or `\`), for
    /// this reason. Most often a client's input, which a service answers
    /// with a 400.
    ///
    /// [`RequestBuilder::path_segment`]: super::RequestBuilder::path_segment
    InvalidSegment(&'static str),
    /// The client cannot do this (`https` without a TLS config).
    Unsupported(&'static str),
    /// The host name did not resolve.
    Resolve,
    /// Connecting failed: refused, unreachable, out of descriptors.
    Connect,
    /// The TLS handshake failed, for this reason.
    Tls(&'static str),
    /// The stage took longer than its timeout.
    Timeout(Op),
    /// The connection failed (reset, broken pipe) after it was made.
    Io,
    /// The response is malformed or over the head limit, for this reason.
    BadResponse(&'static str),
    /// The server closed the connection before the first byte of a
    /// response.
    Closed,
    /// The server closed the connection inside the response.
    Truncated,
    /// The server reset the request's HTTP/2 stream (its reason, as
    /// `Display` says: `INTERNAL_ERROR`, `CANCEL`, ...). A stream it
    /// refused (`REFUSED_STREAM`, nothing done) is retried once first.
    Reset,
    /// The server is closing the HTTP/2 connection (GOAWAY) and did not
    /// take the request; the client retried it once on a new connection
    /// first, and that went the same way.
    GoAway,
    /// The HTTP/2 connection broke the protocol, for this reason.
    Protocol,
    /// The body is longer than the limit [`ClientResponse::body`] reads.
    ///
    /// [`ClientResponse::body`]: super::ClientResponse::body
    TooLarge,
}

/// Why a request failed, naming the request: `Display` gives
/// `METHOD URL: what happened`.
///
/// Boxed, so that a `Result` of it is one word.
#[derive(Debug)]
pub struct ClientError(Box<Inner>);

#[derive(Debug)]
struct Inner {
    request: Rc<Request>,
    kind: ErrorKind,
    /// The OS's error, for `Connect` and `Io`.
    io: Option<IoFailure>,
    /// The timeout that passed, for `Timeout`; the limit, for `TooLarge`.
    timeout: Option<Duration>,
    limit: Option<usize>,
    /// The resolver's own words, for `Resolve`; the HTTP/2 reason, for
    /// `Reset`, `GoAway` and `Protocol`.
    detail: Option<String>,
}

/// The method and URL a request's errors name.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) url: String,
}

impl ClientError {
    pub(crate) fn new(request: &Rc<Request>, kind: ErrorKind) -> Self {
        Self(Box::new(Inner {
            request: Rc::clone(request),
            kind,
            io: None,
            timeout: None,
            limit: None,
            detail: None,
        }))
    }

    pub(crate) fn timeout(request: &Rc<Request>, op: Op, after: Duration) -> Self {
        let mut e = Self::new(request, ErrorKind::Timeout(op));
        e.0.timeout = Some(after);
        e
    }

    pub(crate) fn too_large(request: &Rc<Request>, limit: usize) -> Self {
        let mut e = Self::new(request, ErrorKind::TooLarge);
        e.0.limit = Some(limit);
        e
    }

    pub(crate) fn resolve(request: &Rc<Request>, detail: String) -> Self {
        let mut e = Self::new(request, ErrorKind::Resolve);
        e.0.detail = Some(detail);
        e
    }

    /// The connection failed with `io`.
    #[cfg(feature = "h2")]
    pub(crate) fn io(request: &Rc<Request>, io: IoFailure) -> Self {
        let mut e = Self::new(request, ErrorKind::Io);
        e.0.io = Some(io);
        e
    }

    /// An error of kind `kind` and what it says of it.
    #[cfg(feature = "h2")]
    pub(crate) fn with_detail(request: &Rc<Request>, kind: ErrorKind, detail: String) -> Self {
        let mut e = Self::new(request, kind);
        e.0.detail = Some(detail);
        e
    }

    /// A failed connect or exchange; `timeout` is the connect timeout,
    /// should that be what passed.
    pub(crate) fn failure(request: &Rc<Request>, failure: Failure, timeout: Duration) -> Self {
        let (kind, io) = match failure {
            Failure::Connect(io) => (ErrorKind::Connect, Some(io)),
            Failure::ConnectTimeout => return Self::timeout(request, Op::Connect, timeout),
            Failure::Tls(why) => (ErrorKind::Tls(why), None),
            Failure::Io(io) => (ErrorKind::Io, Some(io)),
            Failure::Closed => (ErrorKind::Closed, None),
            Failure::Truncated => (ErrorKind::Truncated, None),
            Failure::Bad(why) => (ErrorKind::BadResponse(why), None),
            // The client sets no deadline of the proxy's kind.
            Failure::Deadline => return Self::timeout(request, Op::ReadHead, timeout),
        };
        let mut e = Self::new(request, kind);
        e.0.io = io;
        e
    }

    /// The I/O failure behind an `Io` or `Connect` error.
    #[cfg(feature = "h2")]
    pub(crate) fn io_failure(&self) -> Option<IoFailure> {
        self.0.io
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The method of the failed request.
    pub fn method(&self) -> &str {
        &self.0.request.method
    }

    /// The URL of the failed request: as given, or as sent once
    /// [`path_segment`] or [`query_pair`] added to it. An invalid URL is
    /// returned as given, CR and LF included; `Display` escapes them.
    ///
    /// [`path_segment`]: super::RequestBuilder::path_segment
    /// [`query_pair`]: super::RequestBuilder::query_pair
    pub fn url(&self) -> &str {
        &self.0.request.url
    }

    /// Whether a timeout passed, whichever stage it was.
    pub fn is_timeout(&self) -> bool {
        matches!(self.0.kind, ErrorKind::Timeout(_))
    }

    /// The OS error number behind a failed connect or connection.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.0.io.and_then(IoFailure::code)
    }
}

impl fmt::Display for ClientError {
    /// `METHOD URL: what happened`. The method and URL are as given, and
    /// may be what was refused for holding a CR or LF: those and the other
    /// control bytes are written escaped (`\r\n`), so that the message
    /// stays one line in a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let request = &self.0.request;
        let (method, url) = (OneLine(&request.method), OneLine(&request.url));
        write!(f, "{method} {url}: {}", What(&self.0))
    }
}

/// What happened, without the request.
struct What<'a>(&'a Inner);

impl fmt::Display for What<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Inner {
            kind,
            io,
            timeout,
            limit,
            detail,
            ..
        } = self.0;
        match kind {
            ErrorKind::InvalidUrl(why) => write!(f, "invalid URL: {why}"),
            ErrorKind::InvalidRequest(why) => write!(f, "invalid request: {why}"),
            ErrorKind::InvalidSegment(why) => write!(f, "invalid path segment: {why}"),
            ErrorKind::Unsupported(why) => f.write_str(why),
            ErrorKind::Resolve => match detail {
                Some(detail) => write!(f, "resolving the host name failed: {detail}"),
                None => f.write_str("resolving the host name failed"),
            },
            ErrorKind::Connect => match io {
                Some(io) => write!(f, "connecting failed: {io}"),
                None => f.write_str("connecting failed"),
            },
            ErrorKind::Tls(why) => write!(f, "the TLS handshake failed: {why}"),
            ErrorKind::Timeout(op) => match timeout {
                Some(after) => write!(f, "{op} timed out after {after:?}"),
                None => write!(f, "{op} timed out"),
            },
            ErrorKind::Io => match io {
                Some(io) => write!(f, "the connection failed: {io}"),
                None => f.write_str("the connection failed"),
            },
            ErrorKind::BadResponse(why) => write!(f, "bad response: {why}"),
            ErrorKind::Closed => f.write_str("the server closed the connection before answering"),
            ErrorKind::Truncated => {
                f.write_str("the server closed the connection before the response ended")
            }
            ErrorKind::Reset => match detail {
                Some(reason) => write!(f, "the server reset the HTTP/2 stream ({reason})"),
                None => f.write_str("the server reset the HTTP/2 stream"),
            },
            ErrorKind::GoAway => match detail {
                Some(reason) => write!(
                    f,
                    "the server is closing the HTTP/2 connection (GOAWAY {reason}) and did not take the request"
                ),
                None => f.write_str(
                    "the server is closing the HTTP/2 connection (GOAWAY) and did not take the request",
                ),
            },
            ErrorKind::Protocol => match detail {
                Some(why) => write!(f, "HTTP/2 protocol error: {why}"),
                None => f.write_str("HTTP/2 protocol error"),
            },
            ErrorKind::TooLarge => match limit {
                Some(limit) => write!(f, "the response body is over the limit of {limit} bytes"),
                None => f.write_str("the response body is over the limit"),
            },
        }
    }
}

impl Error for ClientError {}

impl From<ClientError> for HttpError {
    /// For a handler that passes a failed call on to its own client:
    /// `504 Gateway Timeout` for a timeout, else `502 Bad Gateway`, saying
    /// what failed but not the URL, which may be an internal address
    /// (`Bad Gateway: upstream: connecting failed: Connection refused (os
    /// error 111)`). Log the [`ClientError`] itself for the whole story.
    fn from(e: ClientError) -> HttpError {
        let status = if e.is_timeout() { 504 } else { 502 };
        HttpError::new(status, format!("upstream: {}", What(&e.0)))
    }
}

impl From<ClientError> for io::Error {
    /// For a [`Service`](crate::http::Service) that calls another service
    /// and passes its failures on with `?`: the [`HttpError`] of
    /// `From<ClientError>` inside, so the client gets a 502 or 504 that
    /// says what failed (and the server logs it); the kind is
    /// [`io::ErrorKind::TimedOut`] for a timeout, else
    /// [`io::ErrorKind::Other`].
    fn from(e: ClientError) -> io::Error {
        let kind = if e.is_timeout() {
            io::ErrorKind::TimedOut
        } else {
            io::ErrorKind::Other
        };
        io::Error::new(kind, HttpError::from(e))
    }
}
