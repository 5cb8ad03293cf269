//! The connection loop: reads, splits the input into requests, calls the
//! service for each, and writes the answers of one read in one send.
//!
//! A connection is a [`Conn`] (the handler, the wire and the stop slot,
//! which the layer's answers and the close need), the [`State`] it keeps
//! between reads, and the [`Buffers`] each exchange lends its request and
//! response. [`serve`] is the loop: a write, a read, then a turn that
//! serves the requests the read completed, one exchange each.
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
//! [`KEEP_CAPACITY`]), so steady-state requests allocate nothing.

use std::io;
use std::mem;
use std::pin::pin;
use std::time::Instant;

use percore::buf::RecvBuf;
use percore::Connection;

use super::access::Exchange;
use super::close::quiet;
use super::complete::Outcome;
use super::config::Config;
use super::cutoff::{cut_at, Cutoff};
use super::proto::{
    header_storage, max_head_len, parse_head, BodyKind, HeadRetry, HttpError, Limits, RequestHead,
};
use super::request::{BodyEnd, BodyReader};
use super::service::HttpHandler;
use super::stats::Reason;
use super::unwind::CatchUnwind;
use super::wire::{after, StopSlot, Waited, Wire, KEEP_CAPACITY};
use super::{Request, Response, Service};

/// Header storage per request. [`Limits::max_headers`](super::Limits)
/// above this is capped to it.
const HEADER_SLOTS: usize = 100;

/// Output above this is sent before more pipelined requests are processed,
/// which bounds the output of a connection that pipelines many requests.
const OUT_HIGH_WATER: usize = 32 * 1024;

/// Serves HTTP/1.1 on `conn` until the client leaves, a timeout or an
/// error ends it, or the server stops.
pub(crate) async fn serve<S: Service>(h: &HttpHandler<S>, conn: Connection) -> io::Result<()> {
    let mut serving = Serving::new(h, conn);
    loop {
        // The one write of this turn's answers, then the next read.
        if let Err(e) = serving.conn.wire.flush().await {
            return quiet(e);
        }
        let turn = match serving.read().await {
            Ok(Some(lease)) => serving.turn(lease).await,
            // The stop was seen: wait again, within its grace.
            Ok(None) => Ok(()),
            Err(end) => Err(end),
        };
        if let Err(End(result)) = turn {
            return result;
        }
    }
}

/// The connection is over, with this as [`serve`]'s result. The steps of
/// the loop return it as their error, so that `?` ends the loop.
struct End(io::Result<()>);

/// The connection's fixed parts: the handler that serves it, its stop slot
/// and its wire. The layer's own answers (`answers.rs`), the end of an
/// exchange (`complete.rs`) and the close (`close.rs`) are its methods,
/// which an exchange calls while its request and response hold the
/// [`Buffers`].
pub(super) struct Conn<'h, S> {
    pub(super) h: &'h HttpHandler<S>,
    /// Declared before `wire`, so dropped before it.
    pub(super) stop: StopSlot,
    pub(super) wire: Wire,
}

/// A connection being served, in three parts so that an exchange can lend
/// the buffers to its request and response and still call on `conn`.
struct Serving<'h, S> {
    conn: Conn<'h, S>,
    state: State,
    bufs: Buffers,
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
    /// The limits the parser checks: the configured ones, but for the
    /// body's, which is the service's to choose per request (see
    /// [`Conn::body_limit`]), so the parser does not check
    /// `Content-Length`.
    parse_limits: Limits,
    /// The server's stop was seen while waiting for a request.
    stopping: bool,
    /// Once stopping: see [`stop_cut_off`].
    head_cut: Option<Instant>,
}

/// The buffers an exchange lends its request and response; they keep
/// their capacity between requests (see [`shrink`]).
struct Buffers {
    /// A request body that is not contiguous in the input.
    gather: Vec<u8>,
    /// The response's header fields, as the service adds them.
    res_headers: Vec<u8>,
    /// The response's body, as the service writes it.
    res_body: Vec<u8>,
}

/// Where the bytes of this turn are.
enum Input {
    /// In a receive lease (the common case).
    Lease(RecvBuf),
    /// In the connection's `carry` buffer, lent to the turn (a head
    /// spanned reads).
    Carry(Vec<u8>),
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

/// How one request of a turn went.
enum Exchanged {
    /// Its head is incomplete.
    Partial,
    /// Its head was refused; the answer is in the output.
    Refused,
    /// It was answered: its head was `head_len` bytes, and `end` says
    /// what its body left.
    Answered {
        outcome: Outcome,
        head_len: usize,
        end: BodyEnd,
    },
}

// ===== impl Serving =====

impl<'h, S: Service> Serving<'h, S> {
    fn new(h: &'h HttpHandler<S>, conn: Connection) -> Self {
        let config = &h.config;
        let started = percore::time::now();
        Self {
            conn: Conn {
                h,
                stop: h.stop.register(),
                wire: Wire::new(
                    conn,
                    after(started, config.head_timeout),
                    config.write_timeout,
                ),
            },
            state: State {
                carry: Vec::new(),
                served: 0,
                retire_at: after(started, config.max_age),
                // A new connection that sends nothing is closed after the
                // head timeout.
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
            },
            bufs: Buffers {
                gather: Vec::new(),
                res_headers: Vec::new(),
                res_body: Vec::new(),
            },
        }
    }

    /// Waits for the next read, within the deadline of the head begun or
    /// of the idle connection. `None`: the server's stop was seen, and the
    /// wait starts again with the stop's grace.
    async fn read(&mut self) -> Result<Option<RecvBuf>, End> {
        let (conn, state) = (&self.conn, &mut self.state);
        let config = &conn.h.config;
        let watch = (!state.stopping).then_some(&conn.stop);
        let deadline = match state.head_started {
            Some(t) => {
                let end = after(t, config.head_timeout);
                state.head_cut.map_or(end, |cut| end.min(cut))
            }
            None => state.idle_deadline,
        };
        match conn.wire.wait(conn.wire.conn.read(), deadline, watch).await {
            Waited::Done(Ok(Some(buf))) => Ok(Some(buf)),
            // End of stream: everything complete was answered; an
            // incomplete head can never be, so it is dropped.
            Waited::Done(Ok(None)) => Err(End(Ok(()))),
            Waited::Done(Err(e)) => Err(End(Err(e))),
            Waited::TimedOut if state.head_started.is_some() => {
                let e = HttpError::timeout("request head timed out");
                conn.sent(None, e.status, Some(Reason::Timeout));
                conn.answer_error(&e, names_head(&state.carry));
                Err(End(conn.close().await))
            }
            // Idle: close without a word (no 408, see Config).
            Waited::TimedOut => Err(End(Ok(()))),
            // A request may be on its way: wait a little for it (it is
            // answered with `Connection: close`) rather than close under it.
            // The read dropped loses nothing: a head begun stays in `carry`.
            Waited::Stopped => {
                state.stopping = true;
                state.head_cut = stop_cut_off();
                let grace_end = after(percore::time::now(), config.stop_grace);
                let end = state.head_cut.map_or(grace_end, |c| c.min(grace_end));
                state.idle_deadline = state.idle_deadline.min(end);
                Ok(None)
            }
        }
    }

    /// Serves the requests that `lease` completes, in order, until the
    /// input is used up, a head is incomplete or the connection is to end.
    async fn turn(&mut self, lease: RecvBuf) -> Result<(), End> {
        let (mut input, parse) = if self.state.carry.is_empty() {
            (Input::Lease(lease), true)
        } else {
            // The head in `carry` continues in this read.
            let mut carry = mem::take(&mut self.state.carry);
            carry.extend_from_slice(&lease);
            let parse = self.state.retry.due(&carry, self.state.max_head);
            (Input::Carry(carry), parse)
        };
        let mut pos = 0;
        let next = loop {
            if !parse {
                // Still incomplete: nothing in the new bytes can end it.
                break Next::Partial;
            }
            let bytes = input.from(pos);
            if bytes.is_empty() {
                break Next::Read;
            }
            let (outcome, head_len, end) = match self.exchange(bytes).await? {
                Exchanged::Partial => break Next::Partial,
                Exchanged::Refused => break Next::Close,
                Exchanged::Answered {
                    outcome,
                    head_len,
                    end,
                } => (outcome, head_len, end),
            };
            match end.lease {
                Some((lease, used)) => {
                    // The body ran past this turn's input: the rest of the
                    // input was body, and the new lease is the input now.
                    if let Input::Carry(carry) = mem::replace(&mut input, Input::Lease(lease)) {
                        self.state.put_back(carry);
                    }
                    pos = used;
                }
                None => pos += head_len + end.input_used,
            }
            match outcome {
                Outcome::Keep => {}
                Outcome::Close => break Next::Close,
                Outcome::Abort => break Next::Abort,
            }
            let idle_timeout = self.conn.h.config.idle_timeout;
            self.state.idle_deadline = after(percore::time::now(), idle_timeout);
            if self.conn.wire.pending() >= OUT_HIGH_WATER {
                self.conn.wire.flush().await.map_err(|e| End(quiet(e)))?;
            }
        };

        match next {
            Next::Read => self.state.used_up(input),
            Next::Partial => self.state.keep_partial(input, pos),
            Next::Close => {
                drop(input);
                return Err(End(self.conn.close().await));
            }
            Next::Abort => return Err(End(Ok(()))),
        }
        Ok(())
    }

    /// Serves the request at the start of `bytes`: parses its head, calls
    /// the service, and puts the answer in the output.
    async fn exchange(&mut self, bytes: &[u8]) -> Result<Exchanged, End> {
        let Self { conn, state, bufs } = self;
        let mut storage = header_storage::<HEADER_SLOTS>();
        let (head, max_body) = match parse_head(bytes, &mut storage, &state.parse_limits)
            .map_err(|e| (e, None))
            .and_then(|head| conn.body_limit(head))
        {
            Ok(Some(limited)) => limited,
            Ok(None) => {
                state.retry.tried(bytes.len());
                return Ok(Exchanged::Partial);
            }
            Err((e, parsed)) => {
                conn.refuse_head(&e, parsed, bytes);
                return Ok(Exchanged::Refused);
            }
        };
        let config = &conn.h.config;
        let now = percore::time::now();
        let keep_alive = state.begin(config, now) && head.keep_alive;
        let head_len = head.head_len;
        let version = head.version;
        let head_only = head.method == "HEAD";
        let rest = bytes.get(head_len..).unwrap_or_default();
        let exchange = Exchange {
            method: head.method,
            target: head.target,
            started: now,
        };

        let body = BodyReader::new(&conn.wire, config, &head, max_body, rest, &mut bufs.gather);
        let mut req = Request::new(head, body);
        let mut res = Response::new(
            &conn.wire,
            &conn.h.date,
            &mut bufs.res_headers,
            &mut bufs.res_body,
            version,
            head_only,
            keep_alive,
        );
        let called = {
            let call = pin!(conn.h.service.call(&mut req, &mut res));
            Cutoff::new(CatchUnwind(call), &conn.stop).await
        };
        let result = match called {
            Some(Ok(Ok(()))) => match res.length_mismatch() {
                Some(e) => Err(e.into()),
                None => Ok(()),
            },
            Some(Ok(result)) => result,
            Some(Err(panic)) => return Err(End(conn.answer_panic(exchange, &res, panic).await)),
            None => {
                let slow_body = req.body.awaiting_client();
                return Err(End(conn.answer_stopping(exchange, &res, slow_body).await));
            }
        };
        let (outcome, end) = conn.settle(exchange, &mut req, &mut res, result).await;
        // `res` and `req` end here, releasing the buffers they borrow.
        shrink(&mut bufs.res_body);
        shrink(&mut bufs.gather);
        Ok(Exchanged::Answered {
            outcome,
            head_len,
            end,
        })
    }
}

// ===== impl State =====

impl State {
    /// Counts a request whose head parsed at `now`; whether the
    /// connection may be kept after it, as far as its age and the number
    /// of its requests go.
    fn begin(&mut self, config: &Config, now: Instant) -> bool {
        self.head_started = None;
        self.retry.reset();
        self.served = self.served.saturating_add(1);
        percore::count_requests(1);
        self.served < config.max_requests && now < self.retire_at && !percore::is_shutting_down()
    }

    /// After a turn that used up its input: takes back the `carry` buffer
    /// if it was lent, emptied.
    fn used_up(&mut self, input: Input) {
        if let Input::Carry(mut carry) = input {
            shrink(&mut carry);
            self.put_back(carry);
        }
    }

    /// After a turn that ended in an incomplete head at `pos`: keeps the
    /// head's bytes in `carry`, and notes when it began.
    fn keep_partial(&mut self, input: Input, pos: usize) {
        match input {
            Input::Lease(lease) => {
                let rest = lease.get(pos..).unwrap_or_default();
                self.carry.extend_from_slice(rest);
            }
            Input::Carry(mut carry) => {
                carry.drain(..pos.min(carry.len()));
                self.carry = carry;
            }
        }
        self.head_started.get_or_insert_with(percore::time::now);
    }

    /// Takes back, emptied, the `carry` buffer lent to a turn that used up
    /// the head in it.
    fn put_back(&mut self, mut carry: Vec<u8>) {
        carry.clear();
        self.carry = carry;
    }
}

// ===== impl Input =====

impl Input {
    /// The turn's bytes from `pos` on.
    fn from(&self, pos: usize) -> &[u8] {
        match self {
            Input::Lease(lease) => lease.get(pos..).unwrap_or_default(),
            Input::Carry(carry) => carry.get(pos..).unwrap_or_default(),
        }
    }
}

// ===== impl Conn =====

impl<S: Service> Conn<'_, S> {
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
    /// ([`Service::body_limit`], asked only when the request has a body). A
    /// `Content-Length` over the limit is refused here, before the service is
    /// called, as the parser would with the configured limit.
    /// The refusal carries the request's method and target, for the access log.
    fn body_limit<'q, 'b>(
        &self,
        head: Option<RequestHead<'q, 'b>>,
    ) -> Result<Option<(RequestHead<'q, 'b>, u64)>, Refusal<'b>> {
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
