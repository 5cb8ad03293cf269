//! One HTTP/1.1 exchange with an upstream: the sub-request's bytes, and an
//! incremental parser of the response (the [`head`] scanner for the head,
//! the HTTP module's [`BodyDecoder`] for `Content-Length` and chunked
//! bodies, or until end of stream).
//!
//! The parser ([`ResponseParser`]) does no I/O, so the unit tests feed it
//! responses split at every byte; [`exchange`] drives it over a connection.

use std::fmt;
use std::io;
use std::net::IpAddr;
use std::ops::Range;

use percore::net::TcpStream;

use super::forward::write_forwarded;
use super::head::{self, Fields, HeadError};
use super::target::OriginForm;
use crate::http::{write_decimal, BodyDecoder, BodyKind, HeadRetry, Limits};

/// Why one branch failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Connecting failed (refused, unreachable, out of descriptors).
    Connect(IoFailure),
    /// Connecting took longer than the connect timeout.
    ConnectTimeout,
    /// Sending or receiving failed (reset, broken pipe).
    Io(IoFailure),
    /// The upstream closed before the first byte of a response.
    Closed,
    /// The upstream closed inside the response.
    Truncated,
    /// The response is malformed, ambiguous or over a limit.
    Bad(&'static str),
    /// The request deadline passed first.
    Deadline,
}

impl Failure {
    /// The status the client gets for it: 504 for time, 502 for the rest.
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
            Failure::Io(e) => write!(f, "connection failed: {e}"),
            Failure::Closed => f.write_str("connection closed before a response"),
            Failure::Truncated => f.write_str("response truncated"),
            Failure::Bad(why) => write!(f, "bad response: {why}"),
            Failure::Deadline => f.write_str("no answer before the deadline"),
        }
    }
}

/// An I/O error as a failed branch keeps it: its kind and, when the OS
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

/// A complete upstream response, its body in the exchange's buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    /// Where the (de-chunked) body lies in the buffer.
    pub(crate) body: Range<usize>,
    /// The connection ended exactly at this response and may serve another.
    pub(crate) reusable: bool,
}

/// A failed exchange, and whether the upstream had started to answer
/// (which rules out a retry: it saw the request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExchangeError {
    pub(crate) failure: Failure,
    pub(crate) response_started: bool,
}

/// Limits on an upstream response.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResponseLimits {
    pub(crate) max_head: usize,
    pub(crate) max_body: usize,
}

// ===== request bytes =====

/// Writes what every branch of a request shares, after its `Host` line:
/// the end-to-end fields, `Via` (ending in `via`), `X-Forwarded-For` (see
/// [`write_forwarded`]), the framing and the body. Every line ends in CRLF
/// whatever the client used. The body is re-framed with
/// `Content-Length` (the HTTP layer has already de-chunked it and rejected
/// ambiguous framing).
pub(crate) fn write_shared(
    out: &mut Vec<u8>,
    headers: &[httparse::Header<'_>],
    client: Option<IpAddr>,
    via: &[u8],
    body: &[u8],
    has_body: bool,
) {
    write_forwarded(out, headers, client, via);
    if has_body || !body.is_empty() {
        out.extend_from_slice(b"Content-Length: ");
        write_decimal(out, body.len() as u64);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
}

/// Writes the request line every sub-request of a request starts with.
pub(crate) fn write_request_line(out: &mut Vec<u8>, method: &str, target: OriginForm<'_>) {
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    target.write_to(out);
    out.extend_from_slice(b" HTTP/1.1\r\n");
}

// ===== the exchange =====

/// Sends `buf` (a whole sub-request) on `conn` and reads one response into
/// the same buffer. Returns the buffer in every case but cancellation
/// (then the driver keeps it until the kernel is done with it).
pub(crate) async fn exchange(
    conn: &TcpStream,
    buf: Vec<u8>,
    limits: ResponseLimits,
    head_only: bool,
) -> (Result<Answer, ExchangeError>, Vec<u8>) {
    let (sent, mut buf) = conn.write_all(buf).await;
    if let Err(e) = sent {
        let err = ExchangeError {
            failure: Failure::Io(IoFailure::from(&e)),
            response_started: false,
        };
        return (Err(err), buf);
    }
    buf.clear();
    let mut parser = ResponseParser::new(limits, head_only);
    loop {
        let eof = match conn.read().await {
            Ok(Some(bytes)) => {
                buf.extend_from_slice(&bytes);
                false
            }
            Ok(None) => true,
            Err(e) => {
                let err = ExchangeError {
                    failure: Failure::Io(IoFailure::from(&e)),
                    response_started: !buf.is_empty(),
                };
                return (Err(err), buf);
            }
        };
        match parser.feed(&mut buf, eof) {
            Ok(Some(answer)) => return (Ok(answer), buf),
            Ok(None) if !eof => {}
            // `feed` decides every end of stream; this is a safety net.
            Ok(None) => {
                let err = ExchangeError {
                    failure: Failure::Truncated,
                    response_started: !buf.is_empty(),
                };
                return (Err(err), buf);
            }
            Err(failure) => {
                let err = ExchangeError {
                    failure,
                    response_started: !buf.is_empty(),
                };
                return (Err(err), buf);
            }
        }
    }
}

// ===== the response parser =====

/// Parses one response from a growing buffer, de-chunking the body in
/// place so it ends up contiguous after the head.
#[derive(Debug)]
pub(crate) struct ResponseParser {
    limits: ResponseLimits,
    head_only: bool,
    state: State,
    /// When a head that spans reads is worth scanning again.
    retry: HeadRetry,
}

#[derive(Debug)]
enum State {
    /// Looking for a complete head starting at `start` (after any interim
    /// 1xx responses).
    Head {
        start: usize,
    },
    Body(Body),
}

#[derive(Debug)]
struct Body {
    status: u16,
    keep_alive: bool,
    /// `None`: delimited by the end of stream.
    decoder: Option<BodyDecoder>,
    start: usize,
    /// End of the de-chunked body bytes so far.
    end: usize,
    /// First raw (undecoded) byte.
    raw: usize,
}

/// What a complete head leads to.
enum Parsed {
    /// The whole response is in the buffer.
    Whole(Answer),
    Next(State),
}

/// How the head said the body is framed.
enum Framing {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

impl ResponseParser {
    pub(crate) fn new(limits: ResponseLimits, head_only: bool) -> Self {
        Self {
            limits,
            head_only,
            state: State::Head { start: 0 },
            retry: HeadRetry::default(),
        }
    }

    /// Parses what `buf` holds so far; `eof` when the upstream has closed.
    /// `Ok(None)`: read more.
    pub(crate) fn feed(&mut self, buf: &mut Vec<u8>, eof: bool) -> Result<Option<Answer>, Failure> {
        loop {
            match &mut self.state {
                State::Head { start } => {
                    let start = *start;
                    let head = buf.get(start..).unwrap_or_default();
                    let max_len = self.limits.max_head.saturating_sub(start);
                    if !eof && !self.retry.due(head, max_len) {
                        return Ok(None);
                    }
                    let parsed = self.parse_head(buf, start)?;
                    if parsed.is_none() {
                        self.retry.tried(head.len());
                    } else {
                        self.retry.reset();
                    }
                    match parsed {
                        None if eof && buf.len() == start && start == 0 => {
                            return Err(Failure::Closed)
                        }
                        None if eof => return Err(Failure::Truncated),
                        None => return Ok(None),
                        Some(Parsed::Whole(answer)) => return Ok(Some(answer)),
                        Some(Parsed::Next(next)) => self.state = next,
                    }
                }
                State::Body(body) => return Self::feed_body(body, buf, eof, self.limits),
            }
        }
    }

    /// `Some` once a whole head is in: the whole response, the body state,
    /// or the next head after an interim response.
    fn parse_head(&self, buf: &[u8], start: usize) -> Result<Option<Parsed>, Failure> {
        let input = buf.get(start..).unwrap_or_default();
        let head = match head::parse(input) {
            // The limit covers the interim responses before this head too:
            // an upstream streaming `100 Continue` forever must not grow
            // the buffer without end.
            Ok(None) => {
                if buf.len() > self.limits.max_head {
                    return Err(Failure::Bad("response head over the limit"));
                }
                return Ok(None);
            }
            Ok(Some(head)) => head,
            Err(HeadError::TooManyFields) => {
                return Err(Failure::Bad("too many response header fields"))
            }
            Err(HeadError::Malformed) => {
                return Err(Failure::Bad("malformed status line or header"))
            }
        };
        let at = start + head.len;
        if at > self.limits.max_head {
            return Err(Failure::Bad("response head over the limit"));
        }
        let status = head.status;
        if status == 101 {
            return Err(Failure::Bad("unexpected protocol switch"));
        }
        if (100..200).contains(&status) {
            // Interim (e.g. 103 Early Hints): the final response follows.
            return Ok(Some(Parsed::Next(State::Head { start: at })));
        }
        let framing = framing(&head.fields, status, self.head_only)?;
        let mut keep_alive = head.minor == 1 && !head.fields.close;
        // Most answers come whole in one read: a body of known length that
        // is all there is taken as it is, without setting up a decoder.
        let whole = match framing {
            Framing::Empty => Some(0),
            Framing::Length(n) => usize::try_from(n)
                .ok()
                .filter(|&n| n <= self.limits.max_body && n <= buf.len() - at),
            Framing::Chunked | Framing::UntilClose => None,
        };
        if let Some(n) = whole {
            return Ok(Some(Parsed::Whole(Answer {
                status,
                body: at..at + n,
                // Bytes after the response were never asked for.
                reusable: keep_alive && at + n == buf.len(),
            })));
        }
        let decoder = match framing {
            Framing::Empty => Some(BodyDecoder::new(BodyKind::None, &self.body_limits())),
            Framing::Length(n) => {
                if n > self.limits.max_body as u64 {
                    return Err(Failure::Bad("response body over the limit"));
                }
                Some(BodyDecoder::new(BodyKind::Length(n), &self.body_limits()))
            }
            Framing::Chunked => Some(BodyDecoder::new(BodyKind::Chunked, &self.body_limits())),
            Framing::UntilClose => {
                keep_alive = false;
                None
            }
        };
        Ok(Some(Parsed::Next(State::Body(Body {
            status,
            keep_alive,
            decoder,
            start: at,
            end: at,
            raw: at,
        }))))
    }

    fn body_limits(&self) -> Limits {
        Limits {
            max_body: self.limits.max_body as u64,
            ..Limits::default()
        }
    }

    fn feed_body(
        body: &mut Body,
        buf: &mut Vec<u8>,
        eof: bool,
        limits: ResponseLimits,
    ) -> Result<Option<Answer>, Failure> {
        let Some(decoder) = &mut body.decoder else {
            // Close-delimited: everything up to the end of stream.
            body.end = buf.len();
            if body.end - body.start > limits.max_body {
                return Err(Failure::Bad("response body over the limit"));
            }
            if eof {
                return Ok(Some(Answer {
                    status: body.status,
                    body: body.start..body.end,
                    reusable: false,
                }));
            }
            return Ok(None);
        };
        loop {
            let input = buf.get(body.raw..).unwrap_or_default();
            let decoded = decoder.decode(input).map_err(|e| Failure::Bad(e.reason))?;
            let data = body.raw + decoded.data.start..body.raw + decoded.data.end;
            if !data.is_empty() {
                // Compact the body: chunk framing between data runs is
                // overwritten. For Content-Length bodies this is a no-op.
                if data.start != body.end {
                    buf.copy_within(data.clone(), body.end);
                }
                body.end += data.len();
            }
            body.raw += decoded.consumed;
            if decoded.done {
                return Ok(Some(Answer {
                    status: body.status,
                    body: body.start..body.end,
                    // Bytes after the response were never asked for.
                    reusable: body.keep_alive && body.raw == buf.len(),
                }));
            }
            if decoded.consumed == 0 || body.raw == buf.len() {
                break;
            }
        }
        if eof {
            return Err(Failure::Truncated);
        }
        // Drop the consumed framing so the buffer holds body + unread raw.
        if body.raw > body.end {
            buf.copy_within(body.raw.., body.end);
            buf.truncate(buf.len() - (body.raw - body.end));
            body.raw = body.end;
        }
        Ok(None)
    }
}

/// The response framing per RFC 9112 §6.3, strictly: `Content-Length`
/// together with `Transfer-Encoding` is refused (a proxy that
/// picks one of them is how response smuggling works), as are differing
/// lengths and any coding but `chunked` (see [`Fields`]).
fn framing(fields: &Fields, status: u16, head_only: bool) -> Result<Framing, Failure> {
    if let Some(why) = fields.invalid {
        return Err(Failure::Bad(why));
    }
    if fields.chunked && fields.length.is_some() {
        return Err(Failure::Bad("Content-Length with Transfer-Encoding"));
    }
    // RFC 9112 §6.3 rule 1: these never have a body, whatever the fields say.
    if head_only || status == 204 || status == 304 {
        return Ok(Framing::Empty);
    }
    Ok(match (fields.chunked, fields.length) {
        (true, _) => Framing::Chunked,
        (false, Some(n)) => Framing::Length(n),
        (false, None) => Framing::UntilClose,
    })
}
