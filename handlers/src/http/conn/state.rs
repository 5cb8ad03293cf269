//! What a connection keeps between reads ([`State`]), the buffers it
//! lends each exchange ([`Buffers`]), and the input of one read
//! ([`Turn`]), with the steps that move them along.

use std::io;
use std::mem;
use std::time::Instant;

use percore::buf::RecvBuf;
use percore::Connection;

use super::cutoff::cut_at;
use super::lend::{Pool, Reusable};
use super::moment::Moment;
use crate::http::config::Config;
use crate::http::layer::Layer;
use crate::http::proto::{BodyKind, HeadRetry, HttpError, RequestHead};
use crate::http::request::BodyEnd;
use crate::http::service::Service;
use crate::http::stats::Reason;
use crate::http::wire::{after, StopSlot, Waited, Wire, KEEP_CAPACITY};

/// The parts of a connection that every step needs: its core's layer
/// (the service and its settings), the stop slot and the wire. The
/// loop's steps (`mod.rs`), the layer's own answers (`answers.rs`), the
/// end of an exchange (`complete.rs`) and the close (`close.rs`) are its
/// methods.
pub(super) struct Conn<'l, S> {
    pub(super) layer: &'l Layer<S>,
    /// Declared before `wire`, so dropped before it.
    pub(super) stop: StopSlot,
    pub(super) wire: Wire,
}

impl<'l, S> Conn<'l, S> {
    /// The parts of `conn`, accepted at `started`: its first head is due
    /// a head timeout later.
    pub(super) fn new(layer: &'l Layer<S>, conn: Connection, started: Instant) -> Self {
        let config = &layer.config;
        let wire = Wire::new(
            conn,
            after(started, config.head_timeout),
            config.write_timeout,
        );
        Self {
            layer,
            stop: layer.stop.register(),
            wire,
        }
    }
}

/// What a connection keeps between reads.
pub(super) struct State {
    /// The bytes of a request head that spans reads, from its first byte;
    /// empty otherwise. Lent to a turn as [`Input::Carry`].
    pub(super) carry: Vec<u8>,
    /// Requests begun; the one that reaches [`Config::max_requests`] is
    /// answered as the last.
    pub(super) served: u32,
    /// The last request starts before this ([`Config::max_age`]).
    retire_at: Moment,
    /// When a connection with no request begun is closed: the head timeout
    /// for a new one, the idle timeout after an answer, sooner at a stop.
    idle_deadline: Moment,
    /// When the first byte of the incomplete head in `carry` arrived.
    head_started: Option<Moment>,
    /// When to parse the incomplete head in `carry` again.
    pub(super) retry: HeadRetry,
    /// The server's stop was seen while waiting for a request.
    pub(super) stopping: bool,
    /// Once stopping: see [`stop_cut_off`].
    head_cut: Option<Moment>,
    /// When the last refusal for overload went out (see `shed`).
    pub(super) refused_at: Option<Moment>,
    /// The connection's requests per interval, for the move policy's
    /// budget (a moved connection starts a new one).
    pub(super) meter: percore::MoveMeter,
}

/// What a connection carries to the core it moves to, beside its unread
/// bytes (see `move_out`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Carried {
    /// Requests begun, for [`Config::max_requests`].
    served: u32,
    /// When the last request may start ([`Config::max_age`]).
    retire_at: Instant,
    /// When it closes if no request comes: its idle timeout runs on.
    idle_at: Instant,
}

/// The buffers an exchange lends its request and response. The core
/// lends them to a connection for the requests of a read
/// ([`LentBuffers`]), and keeps their capacity between requests (see
/// [`shrink`]).
#[derive(Default)]
pub(super) struct Buffers {
    /// A request body that is not contiguous in the input.
    pub(super) gather: Vec<u8>,
    /// The response's header fields, as the service adds them.
    pub(super) res_headers: Vec<u8>,
    /// The response's body, as the service writes it.
    pub(super) res_body: Vec<u8>,
}

/// The input of one read, served request by request.
pub(super) struct Turn {
    pub(super) input: Input,
    /// Where the next request starts in `input`.
    pub(super) pos: usize,
}

/// Where the bytes of a turn are.
pub(super) enum Input {
    /// In a receive lease (the common case).
    Lease(RecvBuf),
    /// In the connection's `carry` buffer, lent to the turn (a head
    /// spanned reads).
    Carry(Vec<u8>),
}

/// What a read brought.
pub(super) enum Read {
    /// Input to serve.
    Turn(Turn),
    /// Nothing to serve yet: read again.
    Again,
    /// A head timed out, answered 408 in the output: close.
    Close,
    /// The connection is over, with this as [`serve`](super::serve)'s result.
    End(io::Result<()>),
}

// ===== impl State =====

impl State {
    pub(super) fn new(config: &Config, started: Instant) -> Self {
        let started = Moment::from(started);
        Self {
            carry: Vec::new(),
            served: 0,
            retire_at: started.after(config.max_age),
            // A new connection that sends nothing is closed after the head
            // timeout.
            idle_deadline: started.after(config.head_timeout),
            head_started: None,
            retry: HeadRetry::default(),
            stopping: false,
            head_cut: None,
            refused_at: None,
            meter: percore::MoveMeter::new(),
        }
    }

    /// What the connection carries when it moves (its unread bytes are
    /// taken from `carry` apart).
    pub(super) fn carried(&self) -> Carried {
        Carried {
            served: self.served,
            retire_at: self.retire_at.instant(),
            idle_at: self.idle_deadline.instant(),
        }
    }

    /// Takes up what a connection that moved here carried: it is no new
    /// connection, so its idle timeout, not the head timeout, bounds the
    /// wait for its next request.
    pub(super) fn arrived(&mut self, moved: Carried) {
        self.served = moved.served;
        self.retire_at = Moment::from(moved.retire_at);
        self.idle_deadline = Moment::from(moved.idle_at);
    }

    /// The deadline of the next read: the head timeout of a head begun,
    /// else the idle one.
    #[inline]
    pub(super) fn read_deadline(&self, config: &Config) -> Instant {
        let deadline = match self.head_started {
            Some(t) => {
                let end = t.after(config.head_timeout);
                self.head_cut.map_or(end, |cut| end.min(cut))
            }
            None => self.idle_deadline,
        };
        deadline.instant()
    }

    /// Takes what the wait for a read brought. A head timed out is
    /// answered here; the close is the caller's.
    #[inline]
    pub(super) fn after_read<S: Service>(
        &mut self,
        conn: &Conn<'_, S>,
        read: Waited<io::Result<Option<RecvBuf>>>,
    ) -> Read {
        match read {
            Waited::Done(Ok(Some(lease))) => self.turn(lease, conn.layer.max_head),
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
                self.head_cut = stop_cut_off().map(Moment::from);
                let end = Moment::now().after(conn.layer.config.stop_grace);
                let end = self.head_cut.map_or(end, |c| c.min(end));
                self.idle_deadline = self.idle_deadline.min(end);
                Read::Again
            }
        }
    }

    /// The turn of a new `lease`: the lease itself, or, when a head spans
    /// reads, `carry` with the lease added. The head is parsed again only
    /// when the new bytes may end it; until then, read again.
    #[inline]
    pub(super) fn turn(&mut self, lease: RecvBuf, max_head: usize) -> Read {
        if self.carry.is_empty() {
            return Read::Turn(Turn {
                input: Input::Lease(lease),
                pos: 0,
            });
        }
        self.carry.extend_from_slice(&lease);
        drop(lease);
        if !self.retry.due(&self.carry, max_head) {
            // Still incomplete: nothing in the new bytes can end it.
            return Read::Again;
        }
        Read::Turn(Turn {
            input: Input::Carry(mem::take(&mut self.carry)),
            pos: 0,
        })
    }

    /// Counts a request whose head just parsed; whether the connection
    /// is kept after it, as far as the client (`keep_alive`), the
    /// connection's age and the number of its requests go.
    #[inline]
    pub(super) fn begin(&mut self, config: &Config, keep_alive: bool) -> bool {
        self.head_started = None;
        self.retry.reset();
        self.served = self.served.saturating_add(1);
        percore::count_requests(1);
        keep_alive
            && self.served < config.max_requests
            && Moment::now() < self.retire_at
            && !percore::is_shutting_down()
    }

    /// The next request is answered: the connection may idle until
    /// `timeout` from now.
    #[inline]
    pub(super) fn idle_from_now(&mut self, timeout: std::time::Duration) {
        self.idle_deadline = Moment::now().after(timeout);
    }

    /// After a turn that used up its input: takes back the `carry` buffer
    /// if it was lent.
    #[inline]
    pub(super) fn used_up(&mut self, turn: Turn) {
        if let Input::Carry(mut carry) = turn.input {
            shrink(&mut carry);
            self.put_back(carry);
        }
    }

    /// After a turn that ended in an incomplete head: keeps the head's
    /// bytes in `carry`, and notes when it began.
    pub(super) fn keep_partial(&mut self, turn: Turn) {
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
        self.head_started.get_or_insert_with(Moment::now);
    }

    /// Takes back, emptied, the `carry` buffer lent to a turn.
    pub(super) fn put_back(&mut self, mut carry: Vec<u8>) {
        carry.clear();
        self.carry = carry;
    }
}

thread_local! {
    static BUFFERS: Pool<Box<Buffers>> = const { Pool::new() };
}

/// A read's [`Buffers`], lent by the core; back in its pool when dropped,
/// so an idle connection holds none. Boxed, so lending moves a pointer.
pub(super) struct LentBuffers(Option<Box<Buffers>>);

impl LentBuffers {
    #[inline]
    pub(super) fn take() -> Self {
        LentBuffers(Some(BUFFERS.try_with(Pool::take).unwrap_or_default()))
    }

    /// The buffers (always there until the drop).
    #[inline]
    pub(super) fn get(&mut self) -> &mut Buffers {
        self.0.get_or_insert_with(Box::default)
    }
}

impl Drop for LentBuffers {
    #[inline]
    fn drop(&mut self) {
        if let Some(bufs) = self.0.take() {
            let _ = BUFFERS.try_with(|pool| pool.give(bufs));
        }
    }
}

impl Reusable for Box<Buffers> {
    /// Emptied, so no byte of one connection's exchange can reach
    /// another's; the large ones are freed.
    #[inline]
    fn reset(&mut self) -> bool {
        self.shrink();
        self.gather.clear();
        self.res_headers.clear();
        self.res_body.clear();
        true
    }

    #[inline]
    fn is_unallocated(&self) -> bool {
        false
    }
}

// ===== impl Buffers =====

impl Buffers {
    /// Frees the buffers that grew large for one exchange (see [`shrink`]).
    #[inline]
    pub(super) fn shrink(&mut self) {
        shrink(&mut self.res_body);
        shrink(&mut self.gather);
    }
}

// ===== impl Turn =====

impl Turn {
    /// Whether the request `head`, at the start of `bytes`, is in a
    /// receive lease and its body does not end in it: the exchange would
    /// hold the lease while the body's rest comes. A chunked body counts
    /// as ended when the input ends as its last chunk does.
    #[inline]
    pub(super) fn waits_for_body(&self, head: &RequestHead<'_, '_>, bytes: &[u8]) -> bool {
        if !matches!(self.input, Input::Lease(_)) {
            return false;
        }
        let after_head = bytes.len().saturating_sub(head.head_len) as u64;
        match head.body {
            BodyKind::None => false,
            BodyKind::Length(n) => n > after_head,
            BodyKind::Chunked => !bytes.ends_with(b"0\r\n\r\n"),
        }
    }

    /// Moves the turn's bytes from the next request on out of its lease
    /// into the connection's `carry` buffer, and gives the lease back.
    /// Cold: only a request whose body spans reads comes here, and the
    /// copy is at most one read.
    #[cold]
    pub(super) fn spill(&mut self, state: &mut State) {
        if let Input::Lease(lease) = &self.input {
            let mut carry = mem::take(&mut state.carry);
            carry.clear();
            carry.extend_from_slice(lease.get(self.pos..).unwrap_or_default());
            self.input = Input::Carry(carry);
            self.pos = 0;
        }
    }

    /// The turn's bytes from the next request on.
    #[inline]
    pub(super) fn rest(&self) -> &[u8] {
        match &self.input {
            Input::Lease(lease) => lease.get(self.pos..).unwrap_or_default(),
            Input::Carry(carry) => carry.get(self.pos..).unwrap_or_default(),
        }
    }

    /// Moves past a request whose head was `head_len` bytes, and past its
    /// body as `end` says.
    #[inline]
    pub(super) fn advance(&mut self, head_len: usize, end: BodyEnd, state: &mut State) {
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
pub(super) fn names_head(request: &[u8]) -> bool {
    request.starts_with(b"HEAD ")
}

/// Frees a buffer that grew past [`KEEP_CAPACITY`] for one large message,
/// so idle connections do not keep it.
fn shrink(buf: &mut Vec<u8>) {
    if buf.capacity() > KEEP_CAPACITY {
        *buf = Vec::new();
    }
}
