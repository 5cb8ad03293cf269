//! Draining: the connections of branches cut off by a met policy, kept
//! for reuse by reading their responses to the end.
//!
//! Under `first` and `quorum:K` the branches still running when the
//! policy is met are cancelled. (Those of a request that failed are
//! closed, not drained: closing tells their upstreams the work is no
//! longer wanted, which a failure, often of an overloaded upstream set,
//! calls for more than a saved connect.) A connection cannot be reused in the
//! middle of a response, so closing them cost a new upstream connection
//! for each (a soak at `quorum:2`, width 3, connected anew for 18–57 % of
//! requests and lost about 30 % of its throughput). Instead, a branch cut
//! off after its sub-request was sent hands its [`Exchange`] (the
//! connection, the bytes read so far and the parser's state) to its core's
//! drain, which reads on from where the branch stopped and puts the
//! connection back in the upstream's pool if, and only if, the response
//! ended cleanly and allows reuse: the same rule as for a branch's own
//! answer ([`Answer::reusable`]: no `Connection: close`, known framing,
//! within `max_response_body`, no byte after it). A pooled connection
//! never holds part of a response. The drain keeps none of the body: it
//! is framed and dropped as it comes
//! ([`Exchange::discard_body`]), so a drain holds a read's worth of bytes,
//! not up to `max_response_body`.
//!
//! Bounds: a drain ends at its request's deadline, when the response
//! shows it cannot be reused (its head says so), or when the server
//! begins to stop, and its connection is closed then. At most
//! [`PoolConfig::max_idle`](super::PoolConfig::max_idle) connections per
//! upstream are draining on a core (`Pool::begin_drain`); beyond that, and
//! for a branch cut off while still connecting or sending, the connection
//! is closed at once as before.
//!
//! A drained answer is not an outcome of its request: it leaves the
//! upstream's health alone (neither a success nor a failure toward
//! ejection), and does not end the upstream's run of cut-off requests
//! (the WARN an upstream that always loses the race gets: one that always
//! answers late is still "always slower than the others").
//!
//! Each drain runs on a worker task; a worker that finished one waits
//! for the next, and one idle for the pool's idle timeout ends (the idle
//! ones are woken last-in first-out, so the surplus after a burst ages
//! out). A task per drain has its own waker and timer, so a read that
//! completes polls its own drain only; in steady state no task is
//! spawned, and with the idle list, the buffers (back to the fan-out's
//! free list) and the timer wheel reused, a cut-off branch allocates
//! nothing.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{ready, Context, Poll, Waker};
use std::time::{Duration, Instant};

use percore::net::Stream;
use percore::time::{now, sleep_until, timeout_at};

use super::branch::Job;
use super::scratch::BufPool;
use super::service::FanOut;
use super::stats::{bump, Counters};
use crate::client::exchange::{Answer, Exchange, ExchangeError};
use crate::client::pool::Pool;

/// A core's drain: its idle workers, and what a drain needs.
#[derive(Debug)]
pub(crate) struct Drain(Rc<Shared>);

#[derive(Debug)]
struct Shared {
    /// The workers waiting for a drain, the last idle on top.
    idle: RefCell<Vec<Rc<Seat>>>,
    /// How long a worker waits for a drain before it ends.
    idle_timeout: Duration,
    /// The fan-out's buffers: a drain's comes from there and goes back.
    bufs: Rc<BufPool>,
    /// `drained`, `drain_closed` and `drain_workers` are the drain's.
    stats: Arc<Counters>,
}

/// Where an idle worker waits: a drain is put here, and the worker woken.
/// Its own, so that a worker never takes a drain meant for another.
#[derive(Debug, Default)]
struct Seat {
    job: RefCell<Option<Draining>>,
    waker: RefCell<Option<Waker>>,
}

/// One exchange to read to its end.
#[derive(Debug)]
struct Draining {
    exchange: Exchange,
    /// Where the connection goes back to; counted there as draining.
    pool: Rc<Pool>,
    /// The request's deadline.
    until: Instant,
}

impl Drain {
    pub(crate) fn new(bufs: Rc<BufPool>, stats: Arc<Counters>, idle_timeout: Duration) -> Self {
        Self(Rc::new(Shared {
            idle: RefCell::new(Vec::new()),
            idle_timeout,
            bufs,
            stats,
        }))
    }

    /// Takes a cut-off exchange to read to its end before `until`, for
    /// `pool`; closes it at once when that can come to nothing (the server
    /// is stopping, the deadline passed, the head rules out reuse) or
    /// `pool` has its most draining.
    fn adopt(&self, mut exchange: Exchange, pool: &Rc<Pool>, until: Instant) {
        let shared = &self.0;
        let hopeless = percore::is_shutting_down() || !exchange.may_keep_alive() || now() >= until;
        if hopeless || !pool.begin_drain() {
            shared.close(exchange);
            return;
        }
        exchange.discard_body();
        let job = Draining {
            exchange,
            pool: pool.clone(),
            until,
        };
        let seat = shared.idle.borrow_mut().pop();
        match seat {
            Some(seat) => {
                *seat.job.borrow_mut() = Some(job);
                // Taken out before waking: no borrow is held while the
                // executor queues the worker.
                let waker = seat.waker.borrow_mut().take();
                if let Some(waker) = waker {
                    waker.wake();
                }
            }
            // Detached: it ends by itself (idle too long, or the stop).
            None => {
                bump(&shared.stats.drain_workers);
                drop(percore::spawn_local(work(shared.clone(), job)));
            }
        }
    }
}

impl Shared {
    /// A drain that came to nothing: closed, its buffer kept. Counted
    /// first, so that a reader who saw the close finds it counted.
    fn close(&self, exchange: Exchange) {
        bump(&self.stats.drain_closed);
        let (conn, buf) = exchange.into_parts();
        drop(conn);
        self.bufs.put(buf);
    }

    /// Waits on `seat` (already among the idle) for the next drain;
    /// `None` after the idle timeout.
    async fn wait(&self, seat: &Rc<Seat>) -> Option<Draining> {
        // An idle timeout past the clock's range (the pool takes it as
        // "never expires") retires no worker either.
        let mut retire = now().checked_add(self.idle_timeout).map(sleep_until);
        poll_fn(|cx| {
            if let Some(job) = seat.job.borrow_mut().take() {
                return Poll::Ready(Some(job));
            }
            if let Some(retire) = &mut retire {
                if Pin::new(retire).poll(cx).is_ready() {
                    return Poll::Ready(None);
                }
            }
            let mut waker = seat.waker.borrow_mut();
            if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *waker = Some(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    /// Reads the response to its end, or until the deadline or the stop;
    /// pools the connection if the response allows.
    async fn run(&self, job: Draining) {
        let Draining {
            mut exchange,
            pool,
            until,
        } = job;
        let reusable = {
            let ended = poll_fn(|cx| drain_step(&mut exchange, cx));
            matches!(
                percore::until_stopped(timeout_at(until, ended)).await,
                Some(Ok(true))
            )
        };
        pool.end_drain();
        if !reusable {
            self.close(exchange);
            return;
        }
        let (conn, buf) = exchange.into_parts();
        self.bufs.put(buf);
        let counter = if pool.release(conn, now()) {
            &self.stats.drained
        } else {
            &self.stats.drain_closed
        };
        bump(counter);
    }
}

/// A worker: runs `first`, then waits among the idle for the next drain,
/// until idle for the idle timeout or the server stops. A drain put in
/// its seat as the stop began is run all the same: it ends at once,
/// closed.
async fn work(shared: Rc<Shared>, first: Draining) {
    let worker = Worker {
        shared,
        seat: Rc::new(Seat::default()),
    };
    let (shared, seat) = (&worker.shared, &worker.seat);
    let mut job = first;
    loop {
        shared.run(job).await;
        shared.idle.borrow_mut().push(seat.clone());
        match percore::until_stopped(shared.wait(seat)).await {
            Some(Some(next)) => job = next,
            _ => break,
        }
    }
}

/// A worker's seat, taken off the idle list however the worker ends (idle
/// too long, the stop, a panic, its task dropped): a drain put in a seat
/// that no worker waits on would hold its connection, and its place among
/// the pool's draining, for good.
struct Worker {
    shared: Rc<Shared>,
    seat: Rc<Seat>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let Self { shared, seat } = self;
        if let Ok(mut idle) = shared.idle.try_borrow_mut() {
            idle.retain(|s| !Rc::ptr_eq(s, seat));
        }
        // Put there after the worker's last look (at most as the stop
        // began, while it ended).
        let left = seat
            .job
            .try_borrow_mut()
            .ok()
            .and_then(|mut job| job.take());
        if let Some(job) = left {
            job.pool.end_drain();
            shared.close(job.exchange);
        }
    }
}

/// One step of a drain: `true` for a complete response after which the
/// connection may be reused, `false` as soon as it is clear that it may
/// not be (reading on would only spend the deadline).
fn drain_step(exchange: &mut Exchange, cx: &mut Context<'_>) -> Poll<bool> {
    match exchange.poll_answer(cx) {
        Poll::Ready(result) => Poll::Ready(result.is_ok_and(|answer| answer.reusable)),
        Poll::Pending if !exchange.may_keep_alive() => Poll::Ready(false),
        Poll::Pending => Poll::Pending,
    }
}

/// A branch's exchange while its response is read. Dropped before the
/// answer is in (the branch cancelled), it goes to the drain if its
/// request's policy was met without it, and is closed otherwise (the
/// deadline, a failed request, the stop).
pub(crate) struct Reading<'a> {
    /// Taken out once answered (or by the drop).
    exchange: Option<Exchange>,
    fan: &'a FanOut,
    upstream: usize,
    /// The request's [`Job::cut_off`] and [`Job::deadline`].
    cut_off: &'a Cell<bool>,
    deadline: Instant,
}

impl Reading<'_> {
    /// Reads until the response is complete or the exchange failed; then
    /// the connection and the buffer, whatever the outcome.
    pub(crate) fn poll_answer(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<(Result<Answer, ExchangeError>, Stream, Vec<u8>)> {
        // Polled in place: the exchange is moved out only with the
        // answer (taken out and put back on every poll, it cost a fan-out
        // of width 4 about 540 instructions per request).
        // Polled again after it answered, nothing more comes, as from a
        // fused future.
        let Some(exchange) = self.exchange.as_mut() else {
            return Poll::Pending;
        };
        let result = ready!(exchange.poll_answer(cx));
        match self.exchange.take() {
            Some(exchange) => {
                let (conn, buf) = exchange.into_parts();
                Poll::Ready((result, conn, buf))
            }
            None => Poll::Pending,
        }
    }
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        let Some(exchange) = self.exchange.take() else {
            return;
        };
        // Unwinding: nothing more is done than closing it.
        if self.cut_off.get() && !std::thread::panicking() {
            let pool = &self.fan.upstreams[self.upstream].pool;
            self.fan.drain.adopt(exchange, pool, self.deadline);
        } else {
            let (conn, buf) = exchange.into_parts();
            drop(conn);
            self.fan.bufs.put(buf);
        }
    }
}

impl FanOut {
    /// The guard of a branch's exchange with the upstream `upstream` (an
    /// index into [`FanOut::upstreams`]) while its response is read.
    pub(crate) fn reading<'a>(
        &'a self,
        exchange: Exchange,
        upstream: usize,
        job: &Job<'a>,
    ) -> Reading<'a> {
        Reading {
            exchange: Some(exchange),
            fan: self,
            upstream,
            cut_off: job.cut_off,
            deadline: job.deadline,
        }
    }
}
