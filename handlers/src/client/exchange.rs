//! One HTTP/1.1 exchange with a server: how it fails ([`Failure`]), and
//! [`Exchange`], which sends a request and reads its response with the
//! grammar's [`ResponseParser`]. The client's requests, the proxy's
//! branches, its drain and its mirror all run their exchanges through it.

use std::fmt;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::pin;
use std::task::{ready, Context, Poll};

use percore::net::Stream;

pub(crate) use percore_http1::response::{Answer, ResponseLimits};
use percore_http1::response::{ResponseError, ResponseParser};

/// Why an exchange (or the connect before it) failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Connecting failed (refused, unreachable, out of descriptors).
    Connect(IoFailure),
    /// Connecting took longer than the connect timeout.
    ConnectTimeout,
    /// The TLS handshake with the server failed, for this reason.
    Tls(&'static str),
    /// Sending or receiving failed (reset, broken pipe).
    Io(IoFailure),
    /// The server closed before the first byte of a response.
    Closed,
    /// The server closed inside the response.
    Truncated,
    /// The response is malformed, ambiguous or over a limit.
    Bad(&'static str),
    /// The proxy's request deadline passed first.
    Deadline,
}

impl Failure {
    /// The status a gateway answers for it: 504 for time, 502 for the rest.
    pub(crate) fn status(self) -> u16 {
        match self {
            Failure::ConnectTimeout | Failure::Deadline => 504,
            _ => 502,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Connect(e) => write!(f, "connect failed: {e}"),
            Failure::ConnectTimeout => f.write_str("connect timed out"),
            Failure::Tls(why) => write!(f, "TLS handshake failed: {why}"),
            Failure::Io(e) => write!(f, "connection failed: {e}"),
            Failure::Closed => f.write_str("connection closed before a response"),
            Failure::Truncated => f.write_str("response truncated"),
            Failure::Bad(why) => write!(f, "bad response: {why}"),
            Failure::Deadline => f.write_str("no answer before the deadline"),
        }
    }
}

impl From<ResponseError> for Failure {
    fn from(e: ResponseError) -> Self {
        match e {
            ResponseError::Closed => Failure::Closed,
            ResponseError::Truncated => Failure::Truncated,
            ResponseError::Bad(why) => Failure::Bad(why),
        }
    }
}

/// Why a TLS handshake with a server failed, in words kept without
/// allocating: a certificate an operator must fix apart from the rest.
pub(crate) fn tls_reason(e: &io::Error) -> &'static str {
    use percore::tls::rustls::{CertificateError as Cert, Error};
    match e.get_ref().and_then(|inner| inner.downcast_ref::<Error>()) {
        Some(Error::InvalidCertificate(cert)) => match cert {
            Cert::NotValidForName | Cert::NotValidForNameContext { .. } => {
                "the certificate is not for this server name"
            }
            // A CA of the same name but another key fails the signature.
            Cert::UnknownIssuer | Cert::BadSignature => {
                "the certificate is not signed by a trusted CA"
            }
            Cert::Expired | Cert::ExpiredContext { .. } => "the certificate has expired",
            Cert::NotValidYet | Cert::NotValidYetContext { .. } => {
                "the certificate is not valid yet"
            }
            _ => "the certificate was refused",
        },
        Some(Error::AlertReceived(_)) => "the server refused it (an alert)",
        Some(_) => "the server's answer is not a handshake rustls accepts",
        None if e.kind() == io::ErrorKind::UnexpectedEof => "the server closed midway",
        None => "the connection failed midway",
    }
}

/// An I/O error as a failed exchange keeps it: its kind and, when the OS
/// gave one, its error number. `io::Error` itself is neither `Copy` nor
/// free to keep (a custom error is boxed); the kind alone loses the reason
/// an operator needs: running out of descriptors (`EMFILE`) has no stable
/// kind and would read "uncategorized error".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IoFailure {
    kind: io::ErrorKind,
    code: Option<i32>,
}

impl IoFailure {
    /// The OS error number, if the error came from the OS.
    pub(crate) fn code(self) -> Option<i32> {
        self.code
    }
}

impl From<&io::Error> for IoFailure {
    fn from(e: &io::Error) -> Self {
        Self {
            kind: e.kind(),
            code: e.raw_os_error(),
        }
    }
}

impl fmt::Display for IoFailure {
    /// The OS's own text and number (`Connection refused (os error 111)`),
    /// else the kind. The OS text is looked up (and allocated) here, on
    /// the failure path only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            Some(code) => io::Error::from_raw_os_error(code).fmt(f),
            None => self.kind.fmt(f),
        }
    }
}

/// A failed exchange, and whether the server had started to answer
/// (which rules out a retry: it saw the request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExchangeError {
    pub(crate) failure: Failure,
    pub(crate) response_started: bool,
}

impl ExchangeError {
    /// The request could not be sent: the server sent none of its
    /// answer, so a retry is allowed.
    pub(crate) fn send_failed(e: &io::Error) -> Self {
        Self {
            failure: Failure::Io(IoFailure::from(e)),
            response_started: false,
        }
    }
}

// ===== the exchange =====

/// One request sent on a connection, and its response being read: the
/// connection, the bytes read so far and the parser's state, together so
/// that a proxy branch cut off while it reads can hand the whole of it to
/// the drain, which reads on from where the branch stopped, and a client
/// response can be read on piece by piece.
#[derive(Debug)]
pub(crate) struct Exchange {
    conn: Stream,
    buf: Vec<u8>,
    parser: ResponseParser,
}

impl Exchange {
    /// Sends `buf` (a whole request) on `conn`; the response is then
    /// read into the same buffer. On a failed send, the error and the
    /// buffer (the connection is closed). Cancelled while sending, the
    /// connection is closed and the driver keeps the buffer until the
    /// kernel is done with it.
    pub(crate) async fn send(
        conn: Stream,
        buf: Vec<u8>,
        limits: ResponseLimits,
        head_only: bool,
    ) -> Result<Self, (ExchangeError, Vec<u8>)> {
        let (sent, buf) = conn.write_all(buf).await;
        match sent {
            Ok(()) => Ok(Self::sent(conn, buf, limits, head_only)),
            Err(e) => Err((ExchangeError::send_failed(&e), buf)),
        }
    }

    /// The exchange of a request already sent on `conn`, its response
    /// to be read into `buf` (emptied here: it held the request).
    pub(crate) fn sent(
        conn: Stream,
        mut buf: Vec<u8>,
        limits: ResponseLimits,
        head_only: bool,
    ) -> Self {
        buf.clear();
        Self {
            conn,
            buf,
            parser: ResponseParser::new(limits, head_only),
        }
    }

    /// Reads until the response is complete (the answer locates its body
    /// in the buffer [`into_parts`](Self::into_parts) gives back) or the
    /// exchange failed; not to be called again after either.
    pub(crate) async fn answer(&mut self) -> Result<Answer, ExchangeError> {
        poll_fn(|cx| self.poll_answer(cx)).await
    }

    /// [`answer`](Self::answer) as a poll: the drain polls it along with
    /// a check the branch does not make ([`may_keep_alive`]).
    ///
    /// [`may_keep_alive`]: Self::may_keep_alive
    pub(crate) fn poll_answer(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Answer, ExchangeError>> {
        loop {
            if let Some(answer) = ready!(self.poll_step(cx))? {
                return Poll::Ready(Ok(answer));
            }
        }
    }

    /// One read, fed to the parser: the answer once the response is
    /// complete, `None` when more is to be read. A client reading a
    /// response piece by piece looks at the parser's progress in between
    /// ([`head`](Self::head), [`body_so_far`](Self::body_so_far)).
    #[inline]
    pub(crate) fn poll_step(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Answer>, ExchangeError>> {
        // A read is cancel-safe and holds no state of its own (the
        // receive belongs to the stream): one made per poll loses
        // nothing, and the exchange stays free to move.
        let eof = match ready!(pin!(self.conn.read()).poll(cx)) {
            Ok(Some(bytes)) => {
                self.buf.extend_from_slice(&bytes);
                false
            }
            Ok(None) => true,
            Err(e) => return Poll::Ready(Err(self.error(Failure::Io(IoFailure::from(&e))))),
        };
        Poll::Ready(match self.parser.feed(&mut self.buf, eof) {
            Ok(Some(answer)) => Ok(Some(answer)),
            Ok(None) if !eof => Ok(None),
            // `feed` decides every end of stream; this is a safety net.
            Ok(None) => Err(self.error(Failure::Truncated)),
            Err(e) => Err(self.error(e.into())),
        })
    }

    /// The final response's head, once read whole.
    pub(crate) fn head(&self) -> Option<&[u8]> {
        self.parser.head().and_then(|range| self.buf.get(range))
    }

    /// The body bytes decoded and not yet taken (see
    /// [`ResponseParser::body_so_far`]).
    pub(crate) fn body_so_far(&self) -> &[u8] {
        self.buf.get(self.parser.body_so_far()).unwrap_or_default()
    }

    /// Drops the bytes of [`body_so_far`](Self::body_so_far).
    pub(crate) fn take_body(&mut self) {
        self.parser.take_body(&mut self.buf);
    }

    fn error(&self, failure: Failure) -> ExchangeError {
        ExchangeError {
            failure,
            response_started: !self.buf.is_empty(),
        }
    }

    /// Whether the response may still end with the connection reusable:
    /// `false` once its head said `Connection: close`, an HTTP/1.0
    /// answer, or a body that runs until the end of stream.
    pub(crate) fn may_keep_alive(&self) -> bool {
        self.parser.may_keep_alive()
    }

    /// From now on, the response's body is only framed, not kept (see
    /// [`ResponseParser::discard_body`]).
    pub(crate) fn discard_body(&mut self) {
        self.parser.discard_body(&mut self.buf);
    }

    /// The connection and the buffer.
    pub(crate) fn into_parts(self) -> (Stream, Vec<u8>) {
        (self.conn, self.buf)
    }
}
