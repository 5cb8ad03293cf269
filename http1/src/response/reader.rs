//! The parser of a server's response: incremental over a growing
//! buffer, with the [`head`](super::head) scanner for the head and
//! [`BodyDecoder`] for `Content-Length` and chunked bodies (or the body
//! runs until end of stream), de-chunking in place.
//!
//! It does no I/O, so the unit tests feed it responses split at every
//! byte; `percore-handlers` drives it over a connection: for a client
//! request, in a proxy branch and, for a branch cut off, in the proxy's
//! drain.

use std::fmt;
use std::ops::Range;

use super::head::{self, Fields, HeadError};
use crate::{BodyDecoder, BodyKind, HeadRetry, Limits};

/// A complete response, its body in the caller's buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The final status code (never 1xx).
    pub status: u16,
    /// Where the (de-chunked) body lies in the buffer.
    pub body: Range<usize>,
    /// The connection ended exactly at this response and may serve another.
    pub reusable: bool,
}

/// Limits on a response.
#[derive(Debug, Clone, Copy)]
pub struct ResponseLimits {
    /// Longest head, interim responses before it included.
    pub max_head: usize,
    /// Largest (de-chunked) body.
    pub max_body: usize,
}

/// Why a response was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseError {
    /// The server closed before the first byte of a response.
    Closed,
    /// The server closed inside the response.
    Truncated,
    /// The response is malformed, ambiguous or over a limit.
    Bad(&'static str),
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResponseError::Closed => f.write_str("connection closed before a response"),
            ResponseError::Truncated => f.write_str("response truncated"),
            ResponseError::Bad(why) => write!(f, "bad response: {why}"),
        }
    }
}

impl std::error::Error for ResponseError {}

/// Parses one response from a growing buffer, de-chunking the body in
/// place so it ends up contiguous after the head.
#[derive(Debug)]
pub struct ResponseParser {
    limits: ResponseLimits,
    head_only: bool,
    state: State,
    /// When a head that spans reads is worth scanning again.
    retry: HeadRetry,
    /// Body bytes are dropped as they are decoded (see
    /// [`discard_body`](Self::discard_body)).
    discard: bool,
    /// Where the final response's head lies in the buffer, once read.
    /// Taking body bytes leaves it in place: they come after it.
    head: Option<Range<usize>>,
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
    /// A parser for one response; `head_only` when it answers a `HEAD`
    /// request, whose response has no body whatever its head says.
    pub fn new(limits: ResponseLimits, head_only: bool) -> Self {
        Self {
            limits,
            head_only,
            state: State::Head { start: 0 },
            retry: HeadRetry::default(),
            discard: false,
            head: None,
        }
    }

    /// Where the final response's head (status line to the empty line)
    /// lies in the buffer, once it was read whole.
    pub fn head(&self) -> Option<Range<usize>> {
        self.head.clone()
    }

    /// Where the body bytes decoded so far, and not yet taken, lie in the
    /// buffer; empty before the head is in. Once `feed` gave the answer,
    /// the answer's body says it instead.
    pub fn body_so_far(&self) -> Range<usize> {
        match &self.state {
            State::Body(body) => body.start..body.end,
            State::Head { .. } => 0..0,
        }
    }

    /// Drops the body bytes of [`body_so_far`](Self::body_so_far) from
    /// `buf`, once the caller has passed them on: a body read piece by
    /// piece holds a read's worth at a time. For a body delimited by the
    /// end of stream the body limit then counts the bytes not taken.
    pub fn take_body(&mut self, buf: &mut Vec<u8>) {
        if let State::Body(body) = &mut self.state {
            if body.decoder.is_some() {
                body.forget(buf);
            } else {
                buf.truncate(body.start);
                body.end = body.start;
            }
        }
    }

    /// From now on the body is framed but not kept: its bytes, those in
    /// `buf` already and those to come, are dropped as they are decoded,
    /// so reading a response to its end holds no more than a read's worth
    /// at a time. The drain needs to know where a response ends, not what
    /// it says. Limits still count every byte; the answer then locates an
    /// empty body. A body delimited by the end of stream is kept whole
    /// (its limit is the buffer's length), but it is never drained: its
    /// connection cannot be reused.
    pub fn discard_body(&mut self, buf: &mut Vec<u8>) {
        self.discard = true;
        if let State::Body(body) = &mut self.state {
            body.forget(buf);
        }
    }

    /// Parses what `buf` holds so far; `eof` when the upstream has closed.
    /// `Ok(None)`: read more.
    pub fn feed(&mut self, buf: &mut Vec<u8>, eof: bool) -> Result<Option<Answer>, ResponseError> {
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
                            return Err(ResponseError::Closed)
                        }
                        None if eof => return Err(ResponseError::Truncated),
                        None => return Ok(None),
                        Some(Parsed::Whole(mut answer)) => {
                            self.head = Some(start..answer.body.start);
                            if self.discard {
                                answer.body.end = answer.body.start;
                            }
                            return Ok(Some(answer));
                        }
                        Some(Parsed::Next(next)) => {
                            if let State::Body(body) = &next {
                                self.head = Some(start..body.start);
                            }
                            self.state = next;
                        }
                    }
                }
                State::Body(body) => {
                    return Self::feed_body(body, buf, eof, self.limits, self.discard)
                }
            }
        }
    }

    /// Whether the response may still leave the connection reusable: not
    /// once a head that rules it out (`Connection: close`, HTTP/1.0, a
    /// body delimited by the end of stream) has been read.
    pub fn may_keep_alive(&self) -> bool {
        match &self.state {
            State::Head { .. } => true,
            State::Body(body) => body.keep_alive,
        }
    }

    /// `Some` once a whole head is in: the whole response, the body state,
    /// or the next head after an interim response.
    fn parse_head(&self, buf: &[u8], start: usize) -> Result<Option<Parsed>, ResponseError> {
        let input = buf.get(start..).unwrap_or_default();
        let head = match head::parse(input) {
            // The limit covers the interim responses before this head too:
            // an upstream streaming `100 Continue` forever must not grow
            // the buffer without end.
            Ok(None) => {
                if buf.len() > self.limits.max_head {
                    return Err(ResponseError::Bad("response head over the limit"));
                }
                return Ok(None);
            }
            Ok(Some(head)) => head,
            Err(HeadError::TooManyFields) => {
                return Err(ResponseError::Bad("too many response header fields"))
            }
            Err(HeadError::Malformed) => {
                return Err(ResponseError::Bad("malformed status line or header"))
            }
        };
        let at = start + head.len;
        if at > self.limits.max_head {
            return Err(ResponseError::Bad("response head over the limit"));
        }
        let status = head.status;
        if status == 101 {
            return Err(ResponseError::Bad("unexpected protocol switch"));
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
                    return Err(ResponseError::Bad("response body over the limit"));
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
        discard: bool,
    ) -> Result<Option<Answer>, ResponseError> {
        let Some(decoder) = &mut body.decoder else {
            // Close-delimited: everything up to the end of stream.
            body.end = buf.len();
            if body.end - body.start > limits.max_body {
                return Err(ResponseError::Bad("response body over the limit"));
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
            let decoded = decoder
                .decode(input)
                .map_err(|e| ResponseError::Bad(e.static_reason()))?;
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
                if discard {
                    body.forget(buf);
                }
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
            return Err(ResponseError::Truncated);
        }
        // Drop the consumed framing so the buffer holds body + unread raw.
        if body.raw > body.end {
            buf.copy_within(body.raw.., body.end);
            buf.truncate(buf.len() - (body.raw - body.end));
            body.raw = body.end;
        }
        if discard {
            body.forget(buf);
        }
        Ok(None)
    }
}

impl Body {
    /// Drops the body bytes decoded so far from `buf`, keeping the raw
    /// bytes after them. Not for a body delimited by the end of stream,
    /// whose length is the buffer's.
    fn forget(&mut self, buf: &mut Vec<u8>) {
        if self.decoder.is_some() && self.end > self.start {
            buf.drain(self.start..self.end);
            self.raw -= self.end - self.start;
            self.end = self.start;
        }
    }
}

/// The response framing per RFC 9112 §6.3, strictly: `Content-Length`
/// together with `Transfer-Encoding` is refused (a proxy that
/// picks one of them is how response smuggling works), as are differing
/// lengths and any coding but `chunked` (see [`Fields`]).
fn framing(fields: &Fields, status: u16, head_only: bool) -> Result<Framing, ResponseError> {
    if let Some(why) = fields.invalid {
        return Err(ResponseError::Bad(why));
    }
    if fields.chunked && fields.length.is_some() {
        return Err(ResponseError::Bad("Content-Length with Transfer-Encoding"));
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
