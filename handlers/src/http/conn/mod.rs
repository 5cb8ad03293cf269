//! One HTTP connection: the loop that reads, splits the input into
//! requests, calls the service for each, and writes the answers of one
//! read in one send. [`serve`] is the folder's one entry, which the
//! [`HttpHandler`](super::HttpHandler) runs for each connection; what
//! it needs of its core comes in the [`Layer`].
//!
//! A connection is two parts and a loan. [`Conn`] is what every step
//! needs: the core's layer, the stop slot and the wire. [`State`] is what
//! the connection keeps between reads. [`Buffers`] are lent by the core to
//! each exchange's request and response, which can then still answer
//! through the `Conn`. All three are in [`state`]. The steps are `Conn`'s
//! methods: the start of an exchange here, its end in [`complete`], the
//! answers the layer writes itself (and its count and access-log line) in
//! [`answers`] and [`access`], and the close in [`close`].
//!
//! [`serve`] is the loop of reads and writes, the only waits of an idle
//! connection; [`serve_turn`] serves the requests of one read, every wait
//! of an exchange in its one body, in a future of its own that the core
//! lends per read ([`Pooled`]): an idle connection's task holds no room
//! for an exchange. The steps between the waits are plain methods: a step
//! that waits would be a future nested in `serve_turn`'s, copied and
//! polled through on every request, which costs instructions that the
//! loop does not.
//!
//! # Buffers
//!
//! The input of a turn is the receive lease itself whenever the requests
//! in it are complete, so the common case copies nothing and an idle
//! connection holds no lease. When a request head spans reads, or a body
//! does not end in its read, the bytes from that request on are copied
//! into the connection's `carry` buffer (bounded by the head limits, which
//! [`parse_head`](super::proto::parse_head) enforces on partial input too) and the lease goes back:
//! a slow client holds what it sent, not a receive buffer. The rest of a
//! body is read by the [`BodyReader`] straight from the socket; what it
//! reads past the body is where the next request starts. Responses gather
//! in one output buffer that is written once per turn; the connection
//! keeps it (up to [`KEEP_CAPACITY`](super::wire::KEEP_CAPACITY)). The
//! [`Buffers`] are lent by the core per exchange and kept by it between
//! loans, as are the header slots a parse needs ([`Slots`]), so
//! steady-state requests allocate nothing and an idle connection holds
//! neither: [`lend`] and [`pooled`] keep them. [`State`], [`Buffers`] and
//! each read's [`Turn`](state::Turn) are in [`state`].

pub(super) mod access;
pub(super) mod answers;
mod close;
mod complete;
mod cutoff;
pub(super) mod lend;
mod moment;
pub(super) mod pooled;
mod shed;
mod slots;
mod state;
pub(super) mod unwind;
mod upgrade;

use std::future::Future;
use std::io;
use std::pin::pin;

use percore::{Connection, MoveOutcome};

use access::Exchange;
use close::quiet;
use complete::{after_discard, drains, Outcome};
use cutoff::Cutoff;
use pooled::Pooled;
use shed::{overloaded, Refused};
use slots::Slots;
pub(super) use state::Carried;
use state::{names_head, Buffers, Conn, LentBuffers, Read, State, Turn};
use unwind::CatchUnwind;

use super::layer::Layer;
use super::proto::{BodyKind, HttpError, RequestHead};
use super::request::{BodyEnd, BodyReader, Request};
use super::response::Response;
use super::service::Service;
use super::stats::Reason;
use super::tunnel::Tunnel;
use super::upgrade::{OnUpgrade, Upgraded, UpgradedFuture};

/// Output above this is sent before more pipelined requests are processed,
/// which bounds the output of a connection that pipelines many requests.
const OUT_HIGH_WATER: usize = 32 * 1024;

/// Serves HTTP/1.1 on `conn` until the client leaves, a timeout or an
/// error ends it, or the server stops.
///
/// Not an `async fn`: its arguments would stay in the future beside the
/// `Conn` made of them, on every connection, idle or not.
pub(super) fn serve<S: Service>(
    layer: &Layer<S>,
    conn: Connection,
) -> impl Future<Output = io::Result<()>> + '_ {
    serve_from(layer, conn, None)
}

/// [`serve`] for a connection that another core moved here, with what it
/// carried (`None`: a new connection, or state that did not come).
pub(super) fn serve_moved<S: Service>(
    layer: &Layer<S>,
    conn: Connection,
    moved: Option<Carried>,
) -> impl Future<Output = io::Result<()>> + '_ {
    serve_from(layer, conn, moved)
}

/// [`serve`], from the state a move carried if there is one.
fn serve_from<S: Service>(
    layer: &Layer<S>,
    conn: Connection,
    moved: Option<Carried>,
) -> impl Future<Output = io::Result<()>> + '_ {
    let config = &layer.config;
    let started = percore::time::now();
    let conn = Conn::new(layer, conn, started);
    let mut state = State::new(config, started);
    if let Some(moved) = moved {
        state.arrived(moved);
    }
    async move {
        // The loop ends in a close or a result. The close's wait is after
        // it: awaited inside, it would keep the read's or the turn's
        // values beside its own in every connection's future.
        let ended = loop {
            // The turn before wrote its answers (in one send), so the next
            // read is all an idle connection waits for.
            let watch = (!state.stopping).then_some(&conn.stop);
            let deadline = state.read_deadline(config);
            let read = conn.wire.wait(conn.wire.conn.read(), deadline, watch).await;
            let turn = match state.after_read(&conn, read) {
                Read::Turn(turn) => turn,
                Read::Again => continue,
                Read::Close => break Exit::Close,
                Read::End(result) => break Exit::Done(result),
            };

            // The requests of this read, served by a future of their own in a
            // pooled allocation that owns the turn: an idle connection's
            // future holds no room for an exchange's states or a turn.
            match Pooled::with(|| serve_turn(&conn, &mut state, turn)).await {
                Ended::Turn(Next::Read | Next::Partial) => {
                    // A request boundary: every answer is written.
                    if let Some(core) = state.meter.move_wanted() {
                        break Exit::Move(core);
                    }
                }
                Ended::Turn(Next::Close) => break Exit::Close,
                Ended::Turn(Next::Abort) => break Exit::Done(Ok(())),
                Ended::Connection(result) => break Exit::Done(result),
                Ended::Upgrade(handover) => break Exit::Upgrade(handover),
            }
        };
        match ended {
            // A write behind still out goes out before the connection is
            // dropped, which would cancel it; in a pooled future, as the
            // close, so that its wait takes no room in an idle connection's.
            Exit::Done(result) if conn.wire.conn.writing_behind() => {
                Pooled::with(|| conn.settle_then(result)).await
            }
            Exit::Done(result) => result,
            Exit::Close => Pooled::with(|| conn.close()).await,
            Exit::Move(core) => move_out(conn, state, core).await,
            Exit::Upgrade(handover) => {
                // The connection leaves HTTP: its task runs the new
                // protocol on the stream, with what was read past the
                // head, until that ends. Boxed, so the connection's
                // future holds a pointer for it.
                hand_over(conn, *handover).await
            }
        }
    }
}

/// The future of the protocol an upgrade switched `conn` to. Not in the
/// `async` block: a part of `conn` taken apart there would keep a slot of
/// its own in every connection's future.
fn hand_over<S>(conn: Conn<'_, S>, (then, read): (OnUpgrade, Vec<u8>)) -> UpgradedFuture {
    let Conn { wire, stop, .. } = conn;
    drop(stop);
    then(Upgraded::new(Tunnel::H1(wire.into_conn()), read))
}

/// Moves `conn` to core `core` with what its next requests need: the
/// bytes of a head begun, the requests it served, when it retires. One
/// that stays is served on here. Boxed: the connection's future holds a
/// pointer for it, and a move is rare.
fn move_out<'a, S: Service>(
    conn: Conn<'a, S>,
    mut state: State,
    core: usize,
) -> std::pin::Pin<Box<dyn Future<Output = io::Result<()>> + 'a>> {
    let Conn { layer, wire, stop } = conn;
    drop(stop);
    let unread = std::mem::take(&mut state.carry);
    let carried = state.carried();
    drop(state);
    Box::pin(async move {
        match percore::move_connection(wire.into_conn(), core, unread, carried).await {
            MoveOutcome::Moved => Ok(()),
            MoveOutcome::Stayed { conn, state, .. } => serve_from(layer, conn, Some(state)).await,
            MoveOutcome::Closed(e) => Err(e),
        }
    })
}

/// How a connection's loop ended.
enum Exit {
    /// With this result.
    Done(io::Result<()>),
    /// With a close, after its last answer.
    Close,
    /// With an upgrade (see [`Ended::Upgrade`]).
    Upgrade(Box<(OnUpgrade, Vec<u8>)>),
    /// At a request boundary, to move to this core.
    Move(usize),
}

/// Serves the requests of one read, in order, one exchange each, and
/// leaves in `state` what the next read needs of the turn.
///
/// Not an `async fn`: its arguments would be kept twice in the future,
/// as captures and as the locals they are moved into.
fn serve_turn<'a, S: Service>(
    conn: &'a Conn<'_, S>,
    state: &'a mut State,
    mut turn: Turn,
) -> impl Future<Output = Ended> + 'a {
    async move {
        let (layer, config) = (conn.layer, &conn.layer.config);
        // The body limit of a request whose bytes were just spilled: its head
        // is parsed again, but the service is not asked twice.
        let mut spilled: Option<u64> = None;
        // A request refused (shed) in this turn, and when the refusals may
        // go out if the client asked again too soon (see `shed`).
        let (mut refused, mut hold) = (false, None);
        // A clear-text client with prior knowledge of HTTP/2 begins with
        // its preface, before any HTTP/1 request. Checked here, in the
        // turn's pooled future, so an idle connection's holds no room
        // for the handover.
        #[cfg(feature = "h2")]
        if state.served == 0 && super::h2::is_preface(turn.rest()) {
            let read = turn.rest().to_vec();
            drop(turn);
            let http2 = super::h2::serve(layer, &conn.wire.conn, read, &conn.stop);
            return Ended::Connection(http2.await);
        }
        loop {
            let bytes = turn.rest();
            if bytes.is_empty() {
                state.used_up(turn);
                if refused {
                    conn.hold_refusal(state, hold).await;
                }
                // The turn's one write of its answers, in the turn's future,
                // so the connection's own holds no room for a write; behind
                // the connection's back where it can (see `write_behind`).
                if !conn.wire.write_behind() {
                    if let Err(e) = conn.wire.flush().await {
                        return Ended::Connection(quiet(e));
                    }
                }
                return Ended::Turn(Next::Read);
            }
            let mut slots = Slots::take();
            let (head, max_body) = match conn.parse(state, bytes, &mut slots, spilled.take()) {
                Ok(parsed) => parsed,
                Err(Next::Partial) => {
                    // Refusals before a partial head go out at once.
                    if refused {
                        state.refused_at = Some(moment::Moment::now());
                    }
                    if !conn.wire.write_behind() {
                        if let Err(e) = conn.wire.flush().await {
                            return Ended::Connection(quiet(e));
                        }
                    }
                    state.keep_partial(turn);
                    return Ended::Turn(Next::Partial);
                }
                // A refusal's answer goes out with the close.
                Err(next) => return Ended::Turn(next),
            };
            if turn.waits_for_body(&head, bytes) {
                // The body's rest is still to come, perhaps slowly: the
                // connection keeps what it has, not the receive buffer.
                turn.spill(state);
                spilled = Some(max_body);
                continue;
            }
            if let Some(bound) = config.shed_queue_delay {
                if overloaded(bound) {
                    if let Refused::Close = conn.refuse(state, &head, &mut hold) {
                        return Ended::Turn(Next::Close);
                    }
                    turn.advance(head.head_len, BodyEnd::unknown(), state);
                    refused = true;
                    continue;
                }
            }
            let head_len = head.head_len;
            // Lent for the exchange, as the header slots are; declared before
            // the request and response that borrow them, so given back after.
            let mut lent = LentBuffers::take();
            let bufs = lent.get();
            let (exchange, mut req, mut res) = conn.exchange(state, bufs, head, max_body, bytes);
            let called = {
                let call = pin!(layer.service.call(&mut req, &mut res));
                Cutoff::new(CatchUnwind(call), &conn.stop).await
            };
            let result = match called {
                Some(Ok(result)) if res.upgrade.is_some() => {
                    match conn.switch(&req, &mut res, result) {
                        Ok(then) => {
                            conn.sent(Some(exchange), 101, None);
                            let read = bytes.get(head_len..).unwrap_or_default().to_vec();
                            drop((req, res));
                            return match conn.wire.flush().await {
                                Ok(()) => Ended::Upgrade(Box::new((then, read))),
                                Err(e) => Ended::Connection(quiet(e)),
                            };
                        }
                        Err(result) => result,
                    }
                }
                Some(Ok(result)) => returned(result, &res),
                Some(Err(panic)) => {
                    return Ended::Connection(conn.answer_panic(exchange, &res, panic).await)
                }
                None => {
                    let slow_body = req.body.h1().awaiting_client();
                    return Ended::Connection(
                        conn.answer_stopping(exchange, &res, slow_body).await,
                    );
                }
            };
            // Answered before the rest of the body is read and dropped
            // (`first`), as nginx does: a client still uploading gets the
            // service's answer (a 401, a 404) now, not after its upload.
            // The answer stands even if the upload then fails, which only
            // closes the connection.
            let mut first = false;
            let end = match req.body.h1().end_now() {
                Some(end) => end,
                None if drains(&result, &res) && req.body.h1().rest_to_come() => {
                    first = true;
                    BodyEnd::unknown()
                }
                // The body ended (or failed) in what had come; or a rest
                // still to come is left, and the connection closes.
                None => req.body.h1().finish(None).await,
            };
            let outcome = conn.settle(exchange, &req, &mut res, result, &end);
            let (outcome, end) = if first {
                let discard = (outcome == Outcome::Keep).then_some(&conn.stop);
                let end = req.body.h1().finish(discard).await;
                (after_discard(outcome, &end), end)
            } else {
                (outcome, end)
            };
            // `res` and `req` end here, releasing the buffers they borrow.
            bufs.shrink();
            turn.advance(head_len, end, state);
            match outcome {
                Outcome::Keep => {}
                Outcome::Close => return Ended::Turn(Next::Close),
                Outcome::Abort => return Ended::Turn(Next::Abort),
            }
            state.idle_from_now(config.idle_timeout);
            if conn.wire.pending() >= OUT_HIGH_WATER && !conn.wire.write_behind() {
                if let Err(e) = conn.wire.flush().await {
                    return Ended::Connection(quiet(e));
                }
            }
        }
    }
}

/// How a turn ended: the connection goes on as [`Next`] says, or is over
/// with this result.
enum Ended {
    Turn(Next),
    Connection(io::Result<()>),
    /// The service accepted an upgrade and its 101 is out: the connection
    /// is handed to the new protocol, with the bytes read past the head.
    /// Boxed: the connection's future keeps a pointer for it.
    Upgrade(Box<(OnUpgrade, Vec<u8>)>),
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

impl<S: Service> Conn<'_, S> {
    /// Parses the request head at the start of `bytes`, with its body
    /// limit (`decided` when known already). `Err` ends the turn: the head is incomplete
    /// ([`Next::Partial`]), or was refused, its answer in the output
    /// ([`Next::Close`]).
    #[inline]
    fn parse<'s, 'b>(
        &self,
        state: &mut State,
        bytes: &'b [u8],
        slots: &'s mut Slots,
        decided: Option<u64>,
    ) -> Result<(RequestHead<'s, 'b>, u64), Next> {
        match slots
            .parse(bytes, &self.layer.parse_limits)
            .map_err(|e| (e, None))
            .and_then(|head| self.body_limit(head, decided))
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
        let config = &self.layer.config;
        let now = percore::time::now();
        let keep_alive = state.begin(config, head.keep_alive);
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
            &self.layer.date,
            &mut bufs.res_headers,
            &mut bufs.res_body,
            version,
            head_only,
            keep_alive,
        );
        (exchange, req, res)
    }

    /// The connection's `result`, once the write behind that is out went
    /// out (or failed: its error, unless the connection already had one).
    async fn settle_then(&self, result: io::Result<()>) -> io::Result<()> {
        match self.wire.settle().await {
            Err(e) if result.is_ok() => quiet(e),
            _ => result,
        }
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
        decided: Option<u64>,
    ) -> Result<Option<(RequestHead<'s, 'b>, u64)>, Refusal<'b>> {
        let Some(head) = head else {
            return Ok(None);
        };
        let configured = self.layer.config.limits.max_body;
        let max = match (head.body, decided) {
            (BodyKind::None | BodyKind::Length(0), _) => return Ok(Some((head, configured))),
            (_, Some(max)) => max,
            _ => self.layer.service.body_limit(&head, configured),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::echo::HttpEcho;
    use crate::http::wire::{StopSlot, Wire};

    /// The size of the future `f` returns, without calling it.
    fn future_size<'a, S: 'a, F>(_: fn(&'a Layer<S>, Connection) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// Every connection's task holds its `serve` future, idle or not, and
    /// a future is as large as its largest state. With the 100 header
    /// slots inside it was 5,128 bytes; with them lent per exchange, 1,936;
    /// with each read's exchanges and its write in a pooled future of
    /// their own, 504; with the peer's address boxed and the write timeout
    /// in milliseconds, the stop slot's waker in a `Cell` and the timer's
    /// key in 8 bytes, 448; with the turn owned by its pooled future and
    /// the close awaited after the loop, 352; with the deadlines in
    /// 8 bytes each ([`moment`]), 320; with an upgrade's hand-over (a
    /// boxed exit and the boxed protocol's future), 344; with the pointer
    /// in the stream to the bytes a connection moved from another core
    /// brings, 352; with when it was last refused for overload, 360
    /// (debug builds): the connection's `Conn` and `State`
    /// and the wait of a read. The bound leaves room for compilers to lay
    /// it out otherwise, not for an exchange, a write, a turn or another
    /// inline address to come back.
    #[test]
    fn an_idle_connection_holds_no_exchange() {
        let size = future_size(serve::<HttpEcho>);
        println!(
            "serve: {size} bytes; Conn {} (Wire {}, Connection {}, StopSlot {}), State {}, Buffers {}",
            std::mem::size_of::<Conn<'_, HttpEcho>>(),
            std::mem::size_of::<Wire>(),
            std::mem::size_of::<percore::Connection>(),
            std::mem::size_of::<StopSlot>(),
            std::mem::size_of::<State>(),
            std::mem::size_of::<Buffers>()
        );
        assert!(size <= 368, "the connection's future is {size} bytes");
    }
}
