//! The connection loop: reads, splits the input into requests, calls the
//! service for each, and writes the answers of one read in one send.
//!
//! A connection is three parts. [`Conn`] is what every step needs: the
//! handler, the stop slot and the wire; the layer's answers and the close
//! are its methods. [`State`] is what the connection keeps between reads.
//! [`Buffers`] are lent to each exchange's request and response, which
//! can then still answer through the `Conn`.
//!
//! [`serve`] is the loop, and every wait of a request is in its one body.
//! The steps between the waits are plain methods: a step that waits would
//! be a future nested in `serve`'s, copied and polled through on every
//! request, which costs instructions that the loop does not.
//!
//! # Buffers
//!
//! The input of a turn is the receive lease itself whenever the requests
//! in it are complete, so the common case copies nothing and an idle
//! connection holds no lease. Only when a request head spans reads are its
//! bytes copied into the connection's `carry` buffer (bounded by the head
//! limits, which [`parse_head`] enforces on partial input too). Bodies that
//! span reads are read by the [`BodyReader`] straight from the socket; what
//! it reads past the body is where the next request starts. Responses gather
//! in one output buffer that is written once per turn. All of these are
//! per-connection `Vec`s that keep their capacity (up to
//! [`KEEP_CAPACITY`]), so steady-state requests allocate nothing. The
//! header slots a parse needs are lent per exchange by the core
//! ([`Slots`]), so an idle connection's future holds none.

use std::io;
use std::mem;
use std::pin::pin;
use std::time::Instant;

use percore::buf::RecvBuf;
use percore::Connection;

use super::access::Exchange;
use super::close::quiet;
use super::complete::{after_discard, drains, Outcome};
use super::config::Config;
use super::cutoff::{cut_at, Cutoff};
use super::proto::{
    max_head_len, parse_head, BodyKind, HeadRetry, HeaderSlot, HttpError, Limits, RequestHead,
};
use super::request::{BodyEnd, BodyReader};
use super::service::HttpHandler;
use super::slots::Slots;
use super::stats::Reason;
use super::unwind::CatchUnwind;
use super::wire::{after, StopSlot, Waited, Wire, KEEP_CAPACITY};
use super::{Request, Response, Service};

/// Output above this is sent before more pipelined requests are processed,
/// which bounds the output of a connection that pipelines many requests.
const OUT_HIGH_WATER: usize = 32 * 1024;

/// Serves HTTP/1.1 on `conn` until the client leaves, a timeout or an
/// error ends it, or the server stops.
pub(crate) async fn serve<S: Service>(h: &HttpHandler<S>, conn: Connection) -> io::Result<()> {
    let config = &h.config;
    let started = percore::time::now();
    let conn = Conn::new(h, conn, started);
    let mut state = State::new(config, started);
    let mut bufs = Buffers::default();
    loop {
        // The one write of this turn's answers, then the next read.
        if let Err(e) = conn.wire.flush().await {
            return quiet(e);
        }
        let watch = (!state.stopping).then_some(&conn.stop);
        let deadline = state.read_deadline(config);
        let read = conn.wire.wait(conn.wire.conn.read(), deadline, watch).await;
        let mut turn = match state.after_read(&conn, read) {
            Read::Turn(turn) => turn,
            Read::Again => continue,
            Read::Close => return conn.close().await,
            Read::End(result) => return result,
        };

        // The requests of this read, in order, one exchange each.
        let next = loop {
            let bytes = turn.rest();
            if bytes.is_empty() {
                break Next::Read;
            }
            let mut slots = Slots::take();
            let (head, max_body) = match conn.parse(&mut state, bytes, slots.get()) {
                Ok(parsed) => parsed,
                Err(next) => break next,
            };
            let head_len = head.head_len;
            let (exchange, mut req, mut res) =
                conn.exchange(&mut state, &mut bufs, head, max_body, bytes);
            let called = {
                let call = pin!(h.service.call(&mut req, &mut res));
                Cutoff::new(CatchUnwind(call), &conn.stop).await
            };
            let result = match called {
                Some(Ok(result)) => returned(result, &res),
                Some(Err(panic)) => return conn.answer_panic(exchange, &res, panic).await,
                None => {
                    let slow_body = req.body.awaiting_client();
                    return conn.answer_stopping(exchange, &res, slow_body).await;
                }
            };
            // Answered before the rest of the body is read and dropped
            // (`first`), as nginx does: a client still uploading gets the
            // service's answer (a 401, a 404) now, not after its upload.
            // The answer stands even if the upload then fails, which only
            // closes the connection.
            let mut first = false;
            let end = match req.body.end_now() {
                Some(end) => end,
                None if drains(&result, &res) && req.body.rest_to_come() => {
                    first = true;
                    BodyEnd::unknown()
                }
                // The body ended (or failed) in what had come; or a rest
                // still to come is left, and the connection closes.
                None => req.body.finish(None).await,
            };
            let outcome = conn.settle(exchange, &req, &mut res, result, &end);
            let (outcome, end) = if first {
                let discard = (outcome == Outcome::Keep).then_some(&conn.stop);
                let end = req.body.finish(discard).await;
                (after_discard(outcome, &end), end)
            } else {
                (outcome, end)
            };
            // `res` and `req` end here, releasing the buffers they borrow.
            bufs.shrink();
            turn.advance(head_len, end, &mut state);
            match outcome {
                Outcome::Keep => {}
                Outcome::Close => break Next::Close,
                Outcome::Abort => break Next::Abort,
            }
            state.idle_deadline = after(percore::time::now(), config.idle_timeout);
            if conn.wire.pending() >= OUT_HIGH_WATER {
                if let Err(e) = conn.wire.flush().await {
                    return quiet(e);
                }
            }
        };

        match next {
            Next::Read => state.used_up(turn),
            Next::Partial => state.keep_partial(turn),
            Next::Close => {
                drop(turn);
                return conn.close().await;
            }
            Next::Abort => return Ok(()),
        }
    }
}

/// The parts of a connection that every step needs. The layer's own
/// answers (`answers.rs`), the end of an exchange (`complete.rs`) and the
/// close (`close.rs`) are its methods.
pub(super) struct Conn<'h, S> {
    pub(super) h: &'h HttpHandler<S>,
    /// Declared before `wire`, so dropped before it.
    pub(super) stop: StopSlot,
    pub(super) wire: Wire,
}

/// What a connection keeps between reads.
struct State {
    /// The bytes of a request head that spans reads, from its first byte;
    /// empty otherwise. Lent to a turn as [`Input::Carry`].
    carry: Vec<u8>,
    /// Requests begun; the one that reaches [`Config::max_requests`] is
    /// answered as the last.
    served: u32,
    /// The last request starts before this ([`Config::max_age`]).
    retire_at: Instant,
    /// When a connection with no request begun is closed: the head timeout
    /// for a new one, the idle timeout after an answer, sooner at a stop.
    idle_deadline: Instant,
    /// When the first byte of the incomplete head in `carry` arrived.
    head_started: Option<Instant>,
    /// When to parse the incomplete head in `carry` again.
    retry: HeadRetry,
    /// The longest a complete head may be, under the configured limits.
    max_head: usize,
    /// The limits the parser checks: the configured ones but the body's.
    /// That one is the service's to choose per request (see
    /// [`Conn::parse`]), so the parser does not check `Content-Length`.
    parse_limits: Limits,
    /// The server's stop was seen while waiting for a request.
    stopping: bool,
    /// Once stopping: see [`stop_cut_off`].
    head_cut: Option<Instant>,
}

/// The buffers an exchange lends its request and response. They keep
/// their capacity between requests (see [`shrink`]).
#[derive(Default)]
struct Buffers {
    /// A request body that is not contiguous in the input.
    gather: Vec<u8>,
    /// The response's header fields, as the service adds them.
    res_headers: Vec<u8>,
    /// The response's body, as the service writes it.
    res_body: Vec<u8>,
}

/// The input of one read, served request by request.
struct Turn {
    input: Input,
    /// Where the next request starts in `input`.
    pos: usize,
}

/// Where the bytes of a turn are.
enum Input {
    /// In a receive lease (the common case).
    Lease(RecvBuf),
    /// In the connection's `carry` buffer, lent to the turn (a head
    /// spanned reads).
    Carry(Vec<u8>),
}

/// What a read brought.
enum Read {
    /// Input to serve.
    Turn(Turn),
    /// Nothing to serve yet: read again.
    Again,
    /// A head timed out, answered 408 in the output: close.
    Close,
    /// The connection is over, with this as [`serve`]'s result.
    End(io::Result<()>),
}

/// How one turn's requests ended.
enum Next {
    /// All input used: read more.
    Read,
    /// A head is incomplete: keep its bytes and read more.
    Partial,
    /// The last response closes the connection (it is in the output).
    Close,
    /// The connection is unusable: close without another byte.
    Abort,
}

/// A service's call that returned: its result, or the error of a
/// response whose body did not match its declared length.
#[inline]
fn returned(result: io::Result<()>, res: &Response<'_>) -> io::Result<()> {
    match result {
        Ok(()) => match res.length_mismatch() {
            Some(e) => Err(e.into()),
            None => Ok(()),
        },
        result => result,
    }
}

// ===== impl Conn =====

impl<'h, S: Service> Conn<'h, S> {
    fn new(h: &'h HttpHandler<S>, conn: Connection, started: Instant) -> Self {
        let config = &h.config;
        let wire = Wire::new(
            conn,
            after(started, config.head_timeout),
            config.write_timeout,
        );
        Self {
            h,
            stop: h.stop.register(),
            wire,
        }
    }

    /// Parses the request head at the start of `bytes`, with its body
    /// limit. `Err` ends the turn: the head is incomplete
    /// ([`Next::Partial`]), or was refused, its answer in the output
    /// ([`Next::Close`]).
    #[inline]
    fn parse<'s, 'b>(
        &self,
        state: &mut State,
        bytes: &'b [u8],
        storage: &'s mut [HeaderSlot<'b>],
    ) -> Result<(RequestHead<'s, 'b>, u64), Next> {
        match parse_head(bytes, storage, &state.parse_limits)
            .map_err(|e| (e, None))
            .and_then(|head| self.body_limit(head))
        {
            Ok(Some(limited)) => Ok(limited),
            Ok(None) => {
                state.retry.tried(bytes.len());
                Err(Next::Partial)
            }
            Err((e, parsed)) => {
                self.refuse_head(&e, parsed, bytes);
                Err(Next::Close)
            }
        }
    }

    /// Begins the exchange of a request whose head parsed: counts it, and
    /// makes the request and the response its service is called with, the
    /// request's body the bytes after its head in `bytes`.
    #[inline(always)]
    fn exchange<'a>(
        &'a self,
        state: &mut State,
        bufs: &'a mut Buffers,
        head: RequestHead<'a, 'a>,
        max_body: u64,
        bytes: &'a [u8],
    ) -> (Exchange<'a>, Request<'a>, Response<'a>) {
        let config = &self.h.config;
        let now = percore::time::now();
        let keep_alive = state.begin(config, now, head.keep_alive);
        let exchange = Exchange {
            method: head.method,
            target: head.target,
            started: now,
        };
        let (version, head_only) = (head.version, head.method == "HEAD");
        let rest = bytes.get(head.head_len..).unwrap_or_default();
        let body = BodyReader::new(&self.wire, config, &head, max_body, rest, &mut bufs.gather);
        let req = Request::new(head, body);
        let res = Response::new(
            &self.wire,
            &self.h.date,
            &mut bufs.res_headers,
            &mut bufs.res_body,
            version,
            head_only,
            keep_alive,
        );
        (exchange, req, res)
    }

    /// Answers a request refused on its head; the connection closes after.
    fn refuse_head(&self, e: &HttpError, parsed: Option<(&str, &str)>, bytes: &[u8]) {
        tracing::debug!(error = %e, "bad request");
        let exchange = parsed.map(|(method, target)| Exchange {
            method,
            target,
            started: percore::time::now(),
        });
        self.sent(exchange, e.status, Some(Reason::refusal(e.status)));
        self.answer_error(e, names_head(bytes));
    }

    /// A parsed request with its body limit: the service's for it
    /// ([`Service::body_limit`], asked only when the request has a body).
    /// A `Content-Length` over the limit is refused here, before the
    /// service is called, as the parser would with the configured limit.
    /// The refusal carries the request's method and target, for the
    /// access log.
    fn body_limit<'s, 'b>(
        &self,
        head: Option<RequestHead<'s, 'b>>,
    ) -> Result<Option<(RequestHead<'s, 'b>, u64)>, Refusal<'b>> {
        let Some(head) = head else {
            return Ok(None);
        };
        let configured = self.h.config.limits.max_body;
        let max = match head.body {
            BodyKind::None | BodyKind::Length(0) => return Ok(Some((head, configured))),
            _ => self.h.service.body_limit(&head, configured),
        };
        match head.body {
            BodyKind::Length(n) if n > max => Err((
                HttpError::too_large("Content-Length over limit"),
                Some((head.method, head.target)),
            )),
            _ => Ok(Some((head, max))),
        }
    }
}

/// A request refused on its head: why, and its method and target when the
/// head parsed.
type Refusal<'b> = (HttpError, Option<(&'b str, &'b str)>);

// ===== impl State =====

impl State {
    fn new(config: &Config, started: Instant) -> Self {
        Self {
            carry: Vec::new(),
            served: 0,
            retire_at: after(started, config.max_age),
            // A new connection that sends nothing is closed after the head
            // timeout.
            idle_deadline: after(started, config.head_timeout),
            head_started: None,
            retry: HeadRetry::default(),
            max_head: max_head_len(&config.limits),
            parse_limits: Limits {
                max_body: u64::MAX,
                ..config.limits
            },
            stopping: false,
            head_cut: None,
        }
    }

    /// The deadline of the next read: the head timeout of a head begun,
    /// else the idle one.
    #[inline]
    fn read_deadline(&self, config: &Config) -> Instant {
        match self.head_started {
            Some(t) => {
                let end = after(t, config.head_timeout);
                self.head_cut.map_or(end, |cut| end.min(cut))
            }
            None => self.idle_deadline,
        }
    }

    /// Takes what the wait for a read brought. A head timed out is
    /// answered here; the close is the caller's.
    #[inline]
    fn after_read<S: Service>(
        &mut self,
        conn: &Conn<'_, S>,
        read: Waited<io::Result<Option<RecvBuf>>>,
    ) -> Read {
        match read {
            Waited::Done(Ok(Some(lease))) => self.turn(lease),
            // End of stream: everything complete was answered; an
            // incomplete head can never be, so it is dropped.
            Waited::Done(Ok(None)) => Read::End(Ok(())),
            Waited::Done(Err(e)) => Read::End(Err(e)),
            Waited::TimedOut if self.head_started.is_some() => {
                let e = HttpError::timeout("request head timed out");
                conn.sent(None, e.status, Some(Reason::Timeout));
                conn.answer_error(&e, names_head(&self.carry));
                Read::Close
            }
            // Idle: close without a word (no 408, see Config).
            Waited::TimedOut => Read::End(Ok(())),
            // A request may be on its way: wait a little for it (it is
            // answered with `Connection: close`) rather than close under
            // it. The read dropped loses nothing: a head begun stays in
            // `carry`.
            Waited::Stopped => {
                self.stopping = true;
                self.head_cut = stop_cut_off();
                let grace_end = after(percore::time::now(), conn.h.config.stop_grace);
                let end = self.head_cut.map_or(grace_end, |c| c.min(grace_end));
                self.idle_deadline = self.idle_deadline.min(end);
                Read::Again
            }
        }
    }

    /// The turn of a new `lease`: the lease itself, or, when a head spans
    /// reads, `carry` with the lease added. The head is parsed again only
    /// when the new bytes may end it; until then, read again.
    #[inline]
    fn turn(&mut self, lease: RecvBuf) -> Read {
        if self.carry.is_empty() {
            return Read::Turn(Turn {
                input: Input::Lease(lease),
                pos: 0,
            });
        }
        self.carry.extend_from_slice(&lease);
        drop(lease);
        if !self.retry.due(&self.carry, self.max_head) {
            // Still incomplete: nothing in the new bytes can end it.
            return Read::Again;
        }
        Read::Turn(Turn {
            input: Input::Carry(mem::take(&mut self.carry)),
            pos: 0,
        })
    }

    /// Counts a request whose head parsed at `now`; whether the connection
    /// is kept after it, as far as the client (`keep_alive`), the
    /// connection's age and the number of its requests go.
    #[inline]
    fn begin(&mut self, config: &Config, now: Instant, keep_alive: bool) -> bool {
        self.head_started = None;
        self.retry.reset();
        self.served = self.served.saturating_add(1);
        percore::count_requests(1);
        keep_alive
            && self.served < config.max_requests
            && now < self.retire_at
            && !percore::is_shutting_down()
    }

    /// After a turn that used up its input: takes back the `carry` buffer
    /// if it was lent.
    #[inline]
    fn used_up(&mut self, turn: Turn) {
        if let Input::Carry(mut carry) = turn.input {
            shrink(&mut carry);
            self.put_back(carry);
        }
    }

    /// After a turn that ended in an incomplete head: keeps the head's
    /// bytes in `carry`, and notes when it began.
    fn keep_partial(&mut self, turn: Turn) {
        match turn.input {
            Input::Lease(lease) => {
                let rest = lease.get(turn.pos..).unwrap_or_default();
                self.carry.extend_from_slice(rest);
            }
            Input::Carry(mut carry) => {
                carry.drain(..turn.pos.min(carry.len()));
                self.carry = carry;
            }
        }
        self.head_started.get_or_insert_with(percore::time::now);
    }

    /// Takes back, emptied, the `carry` buffer lent to a turn.
    fn put_back(&mut self, mut carry: Vec<u8>) {
        carry.clear();
        self.carry = carry;
    }
}

// ===== impl Buffers =====

impl Buffers {
    /// Frees the buffers that grew large for one exchange (see [`shrink`]).
    #[inline]
    fn shrink(&mut self) {
        shrink(&mut self.res_body);
        shrink(&mut self.gather);
    }
}

// ===== impl Turn =====

impl Turn {
    /// The turn's bytes from the next request on.
    #[inline]
    fn rest(&self) -> &[u8] {
        match &self.input {
            Input::Lease(lease) => lease.get(self.pos..).unwrap_or_default(),
            Input::Carry(carry) => carry.get(self.pos..).unwrap_or_default(),
        }
    }

    /// Moves past a request whose head was `head_len` bytes, and past its
    /// body as `end` says.
    #[inline]
    fn advance(&mut self, head_len: usize, end: BodyEnd, state: &mut State) {
        match end.lease {
            Some((lease, used)) => {
                // The body ran past this turn's input: the rest of the
                // input was body, and the new lease is the input now.
                if let Input::Carry(carry) = mem::replace(&mut self.input, Input::Lease(lease)) {
                    state.put_back(carry);
                }
                self.pos = used;
            }
            None => self.pos += head_len + end.input_used,
        }
    }
}

/// For a connection that learns of the stop now, the cut-off before the
/// drain deadline (`None` when no drain bounds the stop): the end of its
/// grace at the latest, as a request after it would only be answered 503,
/// and when a head still arriving is answered 408 rather than cancelled
/// with its connection at the deadline, without a word.
fn stop_cut_off() -> Option<Instant> {
    percore::drain_deadline().map(|deadline| cut_at(deadline, percore::time::now()))
}

/// Whether a request, complete or not, is a `HEAD`: the answer to one
/// has no body, even when it refuses the request (RFC 9110 §9.3.2).
fn names_head(request: &[u8]) -> bool {
    request.starts_with(b"HEAD ")
}

/// Frees a buffer that grew past [`KEEP_CAPACITY`] for one large message,
/// so idle connections do not keep it.
fn shrink(buf: &mut Vec<u8>) {
    if buf.capacity() > KEEP_CAPACITY {
        *buf = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::HttpEcho;

    /// The size of the future `f` returns, without calling it.
    fn future_size<'a, S: 'a, F>(_: fn(&'a HttpHandler<S>, Connection) -> F) -> usize {
        mem::size_of::<F>()
    }

    /// Every connection's task holds its `serve` future, idle or not, and
    /// a future is as large as its largest state. With the 100 header
    /// slots inside it was 5,128 bytes; lent per exchange, 1,936 (rustc
    /// 1.95, a debug build). The bound leaves room for compilers to lay it
    /// out otherwise, not for the slots to come back.
    #[test]
    fn an_idle_connection_holds_no_header_slots() {
        let size = future_size(serve::<HttpEcho>);
        assert!(size <= 2560, "the connection's future is {size} bytes");
    }
}
