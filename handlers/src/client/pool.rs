//! The keep-alive pool of one origin on one core.
//!
//! No locks and no sharing: each core keeps its own pools, each a stack of
//! idle connections reused last-in first-out, so that the few connections
//! a core needs stay warm and the surplus ages out at the bottom. It is
//! bounded by [`PoolConfig::max_idle`], and every connection in it has
//! read a complete response and nothing more. A connection whose exchange
//! failed, was cancelled, or ended with `Connection: close` or a
//! close-delimited body is dropped, never pooled. A task per pool, started
//! with its first connection, closes the idle connections that expired or
//! that the server closed, so that a client with no traffic does not hold
//! them (half-closed, in `CLOSE_WAIT`) until its next request.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use percore::net::Stream;

/// The keep-alive pool kept per core for each origin: each upstream of
/// the fan-out proxy, each `host:port` a [`Client`](super::Client) calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolConfig {
    /// Most idle connections kept per origin per core; a connection
    /// released when the pool is full is closed. The pool only holds what
    /// was once needed at the same time (concurrent requests to this
    /// origin, times the branches for the proxy), so this bounds the
    /// descriptors a burst leaves behind; set it too low and steady load
    /// turns into connect churn (a fan-out of width 16 × 32 clients over 2
    /// upstreams needs 256). Default 1024.
    pub max_idle: usize,
    /// An idle connection older than this is closed instead of reused,
    /// and within half this again (at most a minute later) even if no
    /// request comes; one the server closed is closed then too. Keep it
    /// below the servers' keep-alive timeout (nginx 75 s, percore
    /// http 30 s, many servers 5 s), so that this side, not the server,
    /// closes idle connections and the reuse race (the server
    /// closing a connection as it is reused) stays rare.
    /// Default 4 s.
    pub idle_timeout: Duration,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            max_idle: 1024,
            idle_timeout: Duration::from_secs(4),
        }
    }
}

/// A bounded LIFO stack of idle keep-alive connections.
#[derive(Debug)]
pub(crate) struct Pool {
    /// Shared with the pool's [`sweep`] task, which holds it weakly.
    idle: Rc<RefCell<Vec<Idle>>>,
    config: PoolConfig,
    /// Whether the [`sweep`] task was started.
    swept: Cell<bool>,
    /// Its connections the proxy's drain is reading a response on.
    draining: Cell<usize>,
}

#[derive(Debug)]
struct Idle {
    conn: Stream,
    /// When it has been idle for the idle timeout, on the core's clock
    /// (`None`: a timeout too long for the clock to reach). Kept as an end
    /// rather than a start so that each check is a comparison, not a
    /// subtraction.
    expires: Option<Instant>,
}

impl Idle {
    fn expired(&self, now: Instant) -> bool {
        self.expires.is_some_and(|end| now >= end)
    }
}

impl Pool {
    pub(crate) fn new(config: PoolConfig) -> Self {
        Self {
            idle: Rc::new(RefCell::new(Vec::with_capacity(config.max_idle))),
            config,
            swept: Cell::new(false),
            draining: Cell::new(0),
        }
    }

    /// The most recently released connection that is still usable, if any.
    ///
    /// Connections idle for longer than the idle timeout are closed, and so
    /// are connections the server has already closed or sent unsolicited
    /// bytes on (found by polling a read once, without waiting). This
    /// narrows the keep-alive race (the server closing a connection as it
    /// is reused) to a close that is still in flight; the retry of a
    /// reused connection that failed before any response byte covers the
    /// rest.
    pub(crate) fn checkout(&self, now: Instant) -> Option<Stream> {
        let mut idle = self.idle.borrow_mut();
        while let Some(top) = idle.pop() {
            if top.expired(now) {
                // LIFO: everything below is older still.
                idle.clear();
                return None;
            }
            if still_open(&top.conn) {
                return Some(top.conn);
            }
        }
        None
    }

    /// Returns a connection that has read exactly one complete response;
    /// whether it was kept. Closes it instead when the pool is full or the
    /// server is stopping.
    pub(crate) fn release(&self, conn: Stream, now: Instant) -> bool {
        if percore::is_shutting_down() {
            return false;
        }
        let mut idle = self.idle.borrow_mut();
        // Age out the oldest (at the bottom) so a pool that only ever sees
        // the top of its stack does not keep stale sockets open.
        if idle.first().is_some_and(|oldest| oldest.expired(now)) {
            idle.retain(|c| !c.expired(now));
        }
        let kept = idle.len() < self.config.max_idle;
        if kept {
            idle.push(Idle {
                conn,
                expires: now.checked_add(self.config.idle_timeout),
            });
        }
        if !self.swept.replace(true) {
            percore::spawn_local(sweep(Rc::downgrade(&self.idle), self.config.idle_timeout));
        }
        kept
    }

    /// Counts a connection the proxy's drain takes on; `false` (not counted) when
    /// [`PoolConfig::max_idle`] are draining already. The drain takes no
    /// more: each ends in the pool at best, which holds no more than that,
    /// and a hung upstream must not gather a descriptor per request until
    /// the requests' deadlines.
    pub(crate) fn begin_drain(&self) -> bool {
        let n = self.draining.get();
        let room = n < self.config.max_idle;
        if room {
            self.draining.set(n + 1);
        }
        room
    }

    /// A drain that [`begin_drain`](Self::begin_drain) counted ended.
    pub(crate) fn end_drain(&self) {
        self.draining.set(self.draining.get() - 1);
    }

    /// Drains counted and not yet ended.
    pub(crate) fn draining(&self) -> usize {
        self.draining.get()
    }
}

/// Every half idle timeout (at least 100 ms, at most a minute), closes the
/// pooled connections that expired or that the server has closed, until
/// the pool is gone or the server stops (then it closes them all, as no
/// request will take them).
async fn sweep(idle: Weak<RefCell<Vec<Idle>>>, idle_timeout: Duration) {
    let every = (idle_timeout / 2).clamp(Duration::from_millis(100), Duration::from_secs(60));
    while percore::until_stopped(percore::time::sleep(every))
        .await
        .is_some()
    {
        let Some(idle) = idle.upgrade() else {
            return;
        };
        let now = percore::time::now();
        idle.borrow_mut()
            .retain(|c| !c.expired(now) && still_open(&c.conn));
    }
    if let Some(idle) = idle.upgrade() {
        idle.borrow_mut().clear();
    }
}

/// Whether an idle connection has nothing to say: a read polled once is
/// still pending. End of stream, an error, or bytes the server was never
/// asked for all mean the connection must not be reused.
fn still_open(conn: &Stream) -> bool {
    let mut read = conn.read();
    let mut cx = Context::from_waker(Waker::noop());
    // Reads are cancel-safe (the receive belongs to the stream), so polling
    // once and dropping the future loses nothing. Unconstrained: with the
    // task's I/O budget spent (a wide fan-out checks out many connections
    // in one poll) the read would say `Pending` without looking.
    percore::unconstrained(|| matches!(Pin::new(&mut read).poll(&mut cx), Poll::Pending))
}
