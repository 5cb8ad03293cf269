//! [`Request`]: a parsed request head borrowed from the connection's input,
//! and its body, read on demand.

use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::pin::pin;
use std::time::Instant;

use percore::buf::RecvBuf;
use percore::future::{select, Either};

pub(crate) use super::failure::{failure_error, Failure};
use super::proto::{BodyDecoder, BodyKind, Header, HttpError, Limits, RequestHead, CONTINUE_100};
use super::wire::{after, StopSlot, Waited, Wire};
use super::Config;

/// One request, as a [`Service`](super::Service) sees it.
///
/// The head (method, target, fields) borrows the bytes as received: no
/// copy, no allocation. The body is not read until the service asks for
/// it, with [`body`](Self::body) (all of it) or [`chunk`](Self::chunk)
/// (piece by piece, as it arrives); either way at most
/// [`Limits::max_body`](super::Limits::max_body) bytes of it (or the
/// service's own limit for the request, see
/// [`Service::body_limit`](super::Service::body_limit)), beyond which the
/// client gets 413. A client that sent
/// `Expect: 100-continue` gets its `100 Continue` only then; a body the
/// service never asks for is read and discarded when the service returns
/// (after its answer, if the rest is still to come; see the
/// [module docs](super)), or the connection is closed if the client is
/// still waiting for permission.
pub struct Request<'r> {
    head: RequestHead<'r, 'r>,
    pub(crate) body: Body<'r>,
}

/// Where a request's body comes from: the HTTP/1 wire, or an HTTP/2
/// stream. The connection loops reach their own kind through
/// [`Body::h1`] and the HTTP/2 stream's task. Not boxed: the HTTP/1
/// reader is the common case, and lives in the exchange's pooled future.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Body<'r> {
    H1(BodyReader<'r>),
    #[cfg(feature = "h2")]
    H2(&'r mut super::h2::StreamBody),
}

impl<'r> Body<'r> {
    /// The HTTP/1 reader. Only the HTTP/1 loop, which made it, asks.
    #[inline(always)]
    pub(crate) fn h1(&mut self) -> &mut BodyReader<'r> {
        match self {
            Body::H1(reader) => reader,
            #[cfg(feature = "h2")]
            Body::H2(_) => unreachable!("the HTTP/1 loop serves HTTP/1 requests only"),
        }
    }
}

impl<'r> Request<'r> {
    pub(crate) fn new(head: RequestHead<'r, 'r>, body: BodyReader<'r>) -> Self {
        Self {
            head,
            body: Body::H1(body),
        }
    }

    /// A request of an HTTP/2 stream.
    #[cfg(feature = "h2")]
    pub(crate) fn new_h2(head: RequestHead<'r, 'r>, body: &'r mut super::h2::StreamBody) -> Self {
        Self {
            head,
            body: Body::H2(body),
        }
    }

    /// The method token, e.g. `GET` (case-sensitive).
    pub fn method(&self) -> &'r str {
        self.head.method
    }

    /// The request target as sent, e.g. `/search?q=1` (or in absolute
    /// form, `http://example.com/search?q=1`).
    pub fn target(&self) -> &'r str {
        self.head.target
    }

    /// The target's path, e.g. `/search` for `/search?q=1` and for
    /// `http://example.com/search?q=1` (`/` when the absolute form has
    /// none), as sent: not percent-decoded. `*` for `OPTIONS *`, and an
    /// authority-form target (`CONNECT host:port`) whole.
    pub fn path(&self) -> &'r str {
        self.head.path()
    }

    /// The target's query, without its `?` (`q=1` for `/search?q=1`), as
    /// sent: not percent-decoded. `None` when the target has no `?`.
    pub fn query(&self) -> Option<&'r str> {
        self.head.query()
    }

    /// The minor version, 0 for HTTP/1.0 and 1 for HTTP/1.1; or 2 for a
    /// request of an HTTP/2 stream.
    pub fn version(&self) -> u8 {
        self.head.version
    }

    /// The value of the first field named `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&'r [u8]> {
        self.head
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    }

    /// All header fields in the order received, names as sent.
    ///
    /// ```
    /// use percore_handlers::http::Header;
    ///
    /// /// Every `Cookie` field's value, say of `req.headers()`.
    /// fn cookies<'a>(headers: &'a [Header<'a>]) -> Vec<&'a [u8]> {
    ///     headers
    ///         .iter()
    ///         .filter(|h| h.name.eq_ignore_ascii_case("cookie"))
    ///         .map(|h| h.value)
    ///         .collect()
    /// }
    ///
    /// let headers = [
    ///     Header { name: "Host", value: b"example.com" },
    ///     Header { name: "cookie", value: b"a=1" },
    /// ];
    /// assert_eq!(cookies(&headers), [b"a=1"]);
    /// ```
    pub fn headers(&self) -> &'r [Header<'r>] {
        self.head.headers
    }

    /// The first `Content-Type` value, if any.
    pub fn content_type(&self) -> Option<&'r [u8]> {
        self.head.content_type
    }

    /// How the body is framed (none, `Content-Length`, chunked).
    pub fn body_kind(&self) -> BodyKind {
        self.head.body
    }

    /// The whole parsed head, for anything the accessors above do not show.
    pub fn head(&self) -> &RequestHead<'r, 'r> {
        &self.head
    }

    /// The client's address.
    ///
    /// # Errors
    ///
    /// When the socket is no longer connected.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        match &self.body {
            Body::H1(reader) => reader.wire.conn.peer_addr(),
            #[cfg(feature = "h2")]
            Body::H2(body) => body.peer_addr(),
        }
    }

    /// The rest of the body, read to its end. Empty when there is none.
    ///
    /// When a `Content-Length` body arrived with the head it is returned in
    /// place, with no copy; otherwise it is gathered into a buffer the
    /// connection reuses. Calling it again returns the same bytes. After
    /// [`chunk`](Self::chunk) it returns only what `chunk` had not.
    ///
    /// # Errors
    ///
    /// The body is malformed (400) or over the limit (413), its deadline
    /// passed (408), or the client closed or reset the connection first.
    /// Return the error from the service: the server answers with the
    /// right status itself, whatever the service wrote, and closes.
    pub async fn body(&mut self) -> io::Result<&[u8]> {
        match &mut self.body {
            Body::H1(reader) => reader.collect().await,
            #[cfg(feature = "h2")]
            Body::H2(body) => body.collect().await,
        }
    }

    /// The next piece of the body as it arrives, or `None` at its end.
    /// Nothing is gathered, but the body as a whole is still bounded by
    /// [`Limits::max_body`](super::Limits::max_body), or by the service's
    /// [`body_limit`](super::Service::body_limit) for the request.
    ///
    /// # Errors
    ///
    /// As [`body`](Self::body).
    pub async fn chunk(&mut self) -> io::Result<Option<&[u8]>> {
        match &mut self.body {
            Body::H1(reader) => reader.chunk().await,
            #[cfg(feature = "h2")]
            Body::H2(body) => body.chunk().await,
        }
    }
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.head.method)
            .field("target", &self.head.target)
            .field("version", &self.head.version)
            .field("body", &self.head.body)
            .finish_non_exhaustive()
    }
}

/// Where a run of body bytes lies.
#[derive(Debug, Clone, Copy)]
enum Src {
    /// In the input the head was parsed from.
    Input,
    /// In the lease read after the input ran out.
    Lease,
}

enum Step {
    Data(Src, Range<usize>),
    Done,
    NeedMore,
}

/// `Expect: 100-continue` progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    No,
    /// The client waits for `100 Continue` before it sends the body.
    Waiting,
    Sent,
}

/// What the body left behind, for the connection loop.
pub(crate) struct BodyEnd {
    /// Bytes of the input after the head that belonged to the body.
    pub(crate) input_used: usize,
    /// When reading went past the input: the last lease read and where the
    /// next request starts in it.
    pub(crate) lease: Option<(RecvBuf, usize)>,
    pub(crate) failure: Option<Failure>,
    /// Some of the body is still unread, so the next request's position is
    /// unknown: close after the response.
    pub(crate) abandoned: bool,
}

impl BodyEnd {
    /// Stands for the end of a body whose rest is yet to be read and
    /// dropped, while its answer is made: nothing failed or left so far.
    pub(crate) fn unknown() -> Self {
        Self {
            input_used: 0,
            lease: None,
            failure: None,
            abandoned: false,
        }
    }
}

/// Reads one request body from the input after the head, then from the
/// socket, through a [`BodyDecoder`].
pub(crate) struct BodyReader<'r> {
    wire: &'r Wire,
    config: &'r Config,
    input: &'r [u8],
    input_used: usize,
    lease: Option<RecvBuf>,
    lease_used: usize,
    decoder: BodyDecoder,
    /// The connection's body buffer, for bodies that are not contiguous.
    gather: &'r mut Vec<u8>,
    /// `Some` once [`collect`](Self::collect) finished: the body is in the
    /// input (`Some(range)`) or in `gather` (`None`).
    collected: Option<Option<Range<usize>>>,
    expect: Expect,
    deadline: Option<Instant>,
    failure: Option<Failure>,
    /// Waiting for the client's next body bytes (set across the read's
    /// await, so it stays set if the call is cut off there).
    awaiting_client: bool,
}

impl<'r> BodyReader<'r> {
    pub(crate) fn new(
        wire: &'r Wire,
        config: &'r Config,
        head: &RequestHead<'_, '_>,
        max_body: u64,
        input: &'r [u8],
        gather: &'r mut Vec<u8>,
    ) -> Self {
        let limits = Limits {
            max_body,
            ..config.limits
        };
        Self {
            wire,
            config,
            input,
            input_used: 0,
            lease: None,
            lease_used: 0,
            decoder: BodyDecoder::new(head.body, &limits),
            gather,
            collected: None,
            expect: if head.expect_continue {
                Expect::Waiting
            } else {
                Expect::No
            },
            deadline: None,
            failure: None,
            awaiting_client: false,
        }
    }

    async fn collect(&mut self) -> io::Result<&[u8]> {
        if self.collected.is_none() {
            self.collected = Some(self.gather_rest().await?);
        }
        Ok(match self.collected.clone().flatten() {
            Some(range) => self.input.get(range).unwrap_or_default(),
            None => self.gather.as_slice(),
        })
    }

    /// Reads the rest of the body; `Some(range)` when it lies whole in the
    /// input (the zero-copy case), else `None` with the bytes in `gather`.
    async fn gather_rest(&mut self) -> io::Result<Option<Range<usize>>> {
        self.gather.clear();
        if self.lease.is_none() && self.failure.is_none() {
            let rest = self.input.get(self.input_used..).unwrap_or_default();
            if self
                .decoder
                .remaining()
                .is_some_and(|n| n <= rest.len() as u64)
            {
                let decoded = self.decoder.decode(rest).map_err(|e| self.fail_with(e))?;
                let start = self.input_used;
                self.input_used += decoded.consumed;
                return Ok(Some(start + decoded.data.start..start + decoded.data.end));
            }
        }
        loop {
            match self.step()? {
                Step::Data(src, range) => {
                    let bytes = match src {
                        Src::Input => self.input.get(range),
                        Src::Lease => self.lease.as_deref().and_then(|l| l.get(range)),
                    };
                    self.gather.extend_from_slice(bytes.unwrap_or_default());
                }
                Step::Done => return Ok(None),
                Step::NeedMore => self.fill(None).await?,
            }
        }
    }

    async fn chunk(&mut self) -> io::Result<Option<&[u8]>> {
        loop {
            match self.step()? {
                Step::Data(Src::Input, range) => return Ok(self.input.get(range)),
                Step::Data(Src::Lease, range) => {
                    return Ok(self.lease.as_deref().and_then(|l| l.get(range)))
                }
                Step::Done => return Ok(None),
                Step::NeedMore => self.fill(None).await?,
            }
        }
    }

    /// Decodes from the bytes at hand without waiting.
    fn step(&mut self) -> io::Result<Step> {
        if let Some(f) = &self.failure {
            return Err(failure_error(f.clone()));
        }
        loop {
            if self.decoder.is_done() {
                return Ok(Step::Done);
            }
            let (src, bytes, used) = match &self.lease {
                Some(lease) => (Src::Lease, &lease[..], &mut self.lease_used),
                None => (Src::Input, self.input, &mut self.input_used),
            };
            let rest = bytes.get(*used..).unwrap_or_default();
            if rest.is_empty() {
                return Ok(Step::NeedMore);
            }
            let start = *used;
            match self.decoder.decode(rest) {
                Ok(d) => {
                    *used += d.consumed;
                    if !d.data.is_empty() {
                        return Ok(Step::Data(src, start + d.data.start..start + d.data.end));
                    }
                    // No data and not done: framing bytes only; go on.
                }
                Err(e) => return Err(self.fail_with(e)),
            }
        }
    }

    /// Waits for more body bytes from the socket, first sending what the
    /// client may be waiting for: earlier pipelined responses, and
    /// `100 Continue` if it asked for one. Not after the response's head
    /// (RFC 9110 §15.2: interim answers come before the final one): the
    /// client has that head instead, and sends the body on seeing it or
    /// after its own wait; the expectation stays unmet, so a body left
    /// unread closes the connection. With `stop`, the wait also ends when
    /// the server begins to stop.
    async fn fill(&mut self, stop: Option<&StopSlot>) -> io::Result<()> {
        if self.expect == Expect::Waiting && !self.wire.head_out() {
            self.expect = Expect::Sent;
            self.wire
                .with_out(|out| out.extend_from_slice(CONTINUE_100));
        }
        if let Err(e) = self.wire.flush().await {
            self.failure = Some(Failure::Gone);
            return Err(e);
        }
        let deadline = self.next_read();
        let wire = self.wire;
        self.awaiting_client = true;
        let waited = wire.wait(wire.conn.read(), deadline, stop).await;
        self.awaiting_client = false;
        self.took(waited)
    }

    /// Returns the last lease, fully used, before another is read; the
    /// body's deadline.
    fn next_read(&mut self) -> Instant {
        self.lease = None;
        self.lease_used = 0;
        *self
            .deadline
            .get_or_insert_with(|| after(percore::time::now(), self.config.body_timeout))
    }

    /// Takes what a read of body bytes came to.
    fn took(&mut self, waited: Waited<io::Result<Option<RecvBuf>>>) -> io::Result<()> {
        match waited {
            Waited::Done(Ok(Some(buf))) => {
                self.lease = Some(buf);
                Ok(())
            }
            Waited::Done(Ok(None)) => {
                self.failure = Some(Failure::Gone);
                Err(failure_error(Failure::Gone))
            }
            Waited::Done(Err(e)) => {
                self.failure = Some(Failure::Gone);
                Err(e)
            }
            Waited::TimedOut | Waited::Stopped => {
                let e = HttpError::timeout("request body timed out");
                self.failure = Some(Failure::Refused(e.clone()));
                Err(failure_error(Failure::Refused(e)))
            }
        }
    }

    fn fail_with(&mut self, e: HttpError) -> io::Error {
        self.failure = Some(Failure::Refused(e.clone()));
        io::Error::new(io::ErrorKind::InvalidData, e)
    }

    /// Whether the body's reader was waiting for the client's bytes
    /// (when a call cut off by the stop was reading a slow body).
    pub(crate) fn awaiting_client(&self) -> bool {
        self.awaiting_client
    }

    /// The [`BodyEnd`] when nothing is left to read (no body, the service
    /// read all of it, or reading failed): the common case, without the
    /// await of [`finish`](Self::finish).
    pub(crate) fn end_now(&mut self) -> Option<BodyEnd> {
        (self.failure.is_some() || self.decoder.is_done()).then(|| self.end(false))
    }

    /// Decodes the body bytes at hand (after the service returned) and
    /// says whether the rest is still to come from the client, so that the
    /// answer can go out before it is read and dropped. Not when the body
    /// ended or failed (a refusal answers instead), nor for a client that
    /// waits for `100 Continue` (it may never send the rest: the
    /// connection closes after the answer).
    pub(crate) fn rest_to_come(&mut self) -> bool {
        if self.expect == Expect::Waiting {
            return false;
        }
        loop {
            match self.step() {
                Ok(Step::Data(..)) => {}
                Ok(Step::Done) | Err(_) => return false,
                Ok(Step::NeedMore) => return true,
            }
        }
    }

    /// Ends the body after the service returned. With `discard` (the
    /// answer is in the output), writes the answer while it reads and
    /// drops what the service left, bounded by the body limit and deadline
    /// and by the stop the slot watches, so that the connection can serve
    /// the next request; without, leaves it and asks for a close.
    pub(crate) async fn finish(&mut self, discard: Option<&StopSlot>) -> BodyEnd {
        if let Some(stop) = discard.filter(|_| self.expect != Expect::Waiting) {
            self.flush_dropping(stop).await;
        }
        let mut abandoned = false;
        loop {
            match self.step() {
                Ok(Step::Data(..)) => {}
                Ok(Step::Done) | Err(_) => break,
                // RFC 9110 §10.1.1: a server that answers without reading
                // the body of an `Expect: 100-continue` request must close
                // (or read it anyway, but the client may never send it).
                Ok(Step::NeedMore) if discard.is_none() || self.expect == Expect::Waiting => {
                    abandoned = true;
                    break;
                }
                Ok(Step::NeedMore) => {
                    if self.fill(discard).await.is_err() {
                        break;
                    }
                }
            }
        }
        self.end(abandoned)
    }

    /// Writes the pending output (the answer) while reading and dropping
    /// the body's rest; if the rest ends or fails first, the output is
    /// still written whole. Written before the rest is read, an answer
    /// larger than the socket buffers can hold would never get out to a
    /// client that sends its whole request before it reads (as many do):
    /// each side would wait for the other to read until the write timed
    /// out and reset the connection.
    async fn flush_dropping(&mut self, stop: &StopSlot) {
        let wire = self.wire;
        let mut flush = pin!(wire.flush());
        let flushed = 'flushed: loop {
            match self.step() {
                Ok(Step::Data(..)) => continue,
                Ok(Step::NeedMore) => {}
                // What follows the body is the next request's.
                Ok(Step::Done) => break flush.as_mut().await,
                // A body over the limit or malformed closes the connection
                // after the answer: what the client still sends meanwhile
                // is dropped, as the close's lingering does, the flush
                // polled first as below. (One that timed out, or was cut
                // short by the stop, is not waited on again.)
                Err(_) if matches!(self.failure, Some(Failure::Refused(ref e)) if e.status != 408) =>
                {
                    let until = after(percore::time::now(), self.config.linger_timeout);
                    loop {
                        let read = wire.wait(wire.conn.read(), until, Some(stop));
                        match select(read, flush.as_mut()).await {
                            Either::Right(flushed) => break 'flushed flushed,
                            Either::Left(Waited::Done(Ok(Some(_dropped)))) => {}
                            Either::Left(_) => break 'flushed flush.as_mut().await,
                        }
                    }
                }
                Err(_) => break flush.as_mut().await,
            }
            let deadline = self.next_read();
            let read = wire.wait(wire.conn.read(), deadline, Some(stop));
            // The flush is polled through its pin: whichever ends first,
            // it is never dropped half-written. It is the select's second
            // future, which a new select polls first: a read that is always
            // ready (a client that streams its rest) must not keep the
            // flush, and its timeout, waiting until the task's I/O budget
            // runs out every 128 reads.
            match select(read, flush.as_mut()).await {
                Either::Right(flushed) => break flushed,
                Either::Left(waited) => {
                    if self.took(waited).is_err() {
                        break flush.as_mut().await;
                    }
                }
            }
        };
        if flushed.is_err() {
            self.failure = Some(Failure::Gone);
        }
    }

    fn end(&mut self, abandoned: bool) -> BodyEnd {
        let lease = match self.lease.take() {
            Some(lease) if self.lease_used < lease.len() => Some((lease, self.lease_used)),
            _ => None,
        };
        BodyEnd {
            input_used: self.input_used,
            lease,
            failure: self.failure.clone(),
            abandoned,
        }
    }
}
