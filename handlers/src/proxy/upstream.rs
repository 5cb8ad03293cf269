//! One upstream as a core sees it: its address, its keep-alive pool, and
//! its health (outlier ejection).
//!
//! The pool is per core and per upstream (no locks, no sharing): a stack of
//! idle connections, reused last-in first-out so that the few connections
//! a core needs stay warm and the surplus ages out at the bottom. It is
//! bounded by [`PoolConfig::max_idle`] and every connection in it has read
//! a complete response and nothing more: a connection whose exchange
//! failed, was cancelled, or ended with `Connection: close` or a
//! close-delimited body is dropped, never pooled; one whose branch was cut
//! off comes back only through the drain (`drain.rs`), which reads its
//! response to the end first. A task per pool, started
//! with its first connection, closes the idle connections that expired or
//! that the upstream closed, so that a proxy with no traffic does not hold
//! them (half-closed, in `CLOSE_WAIT`) until its next request.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use percore::net::{Endpoint, Stream};
use percore::tls::rustls;

use super::{EjectionConfig, PoolConfig, UpstreamTls};
use percore_proxy_core::combine::entry_prefix;

/// An upstream server and this core's idle connections to it.
#[derive(Debug)]
pub(crate) struct Upstream {
    pub(crate) addr: Endpoint,
    /// `addr` as text, for the combined body and error messages.
    pub(crate) name: String,
    /// `Host: addr\r\n`, written into every sub-request to this upstream.
    pub(crate) host_line: Vec<u8>,
    /// The start of its entries in a combined answer (see
    /// [`entry_prefix`]).
    pub(crate) entry_prefix: Box<[u8]>,
    /// Shared with the drain, which puts connections back in it.
    pub(crate) pool: Rc<Pool>,
    pub(crate) health: Health,
    /// The client side of TLS and the name checked, for `https://`.
    pub(crate) tls: Option<(Arc<rustls::ClientConfig>, String)>,
}

impl Upstream {
    pub(crate) fn new(addr: Endpoint, config: PoolConfig, tls: Option<&UpstreamTls>) -> Self {
        let name = addr.to_string();
        // `validate` refuses TLS to a Unix socket without a name.
        let tls = tls.map(|tls| {
            let server_name = tls.server_name.clone().unwrap_or_else(|| match &addr {
                Endpoint::Tcp(sa) => sa.ip().to_string(),
                Endpoint::Unix(_) => "localhost".to_owned(),
            });
            (Arc::clone(&tls.config), server_name)
        });
        // Without the zone of a scoped IPv6 address (`%2`): it means
        // something only here (RFC 6874 §4), and a `Host` holding it is
        // not `uri-host [":" port]`, so an upstream that checks refuses it.
        // A Unix socket's path is no host at all: `localhost` is what
        // curl and nginx send over one.
        let host_line = match &addr {
            Endpoint::Tcp(SocketAddr::V6(v6)) if v6.scope_id() != 0 => {
                format!("Host: [{}]:{}\r\n", v6.ip(), v6.port())
            }
            Endpoint::Tcp(_) => format!("Host: {name}\r\n"),
            Endpoint::Unix(_) => "Host: localhost\r\n".to_owned(),
        }
        .into_bytes();
        Self {
            addr,
            entry_prefix: entry_prefix(&name),
            name,
            host_line,
            pool: Rc::new(Pool::new(config)),
            health: Health::default(),
            tls,
        }
    }
}

/// This core's view of an upstream's health: consecutive failures and
/// ejection. Plain `Cell`s: per core, never shared. The caller
/// reports at most one failure per request (see `FanOut::record`).
#[derive(Debug, Default)]
pub(crate) struct Health {
    /// Failed requests since the last success or ejection.
    failures: Cell<u32>,
    /// Ejections since the last success (the n of `base_time × n`).
    ejections: Cell<u32>,
    /// Ejected until then.
    until: Cell<Option<Instant>>,
    /// Which run of failures is current: a success or an ejection starts
    /// the next. A request notes the run it counted in (see
    /// `FanOut::record`).
    run: Cell<u64>,
    /// Requests in a row whose branches on it were cancelled because the
    /// policy was met without them: an upstream that hangs under `first`
    /// or `quorum:K` shows only this way. Any outcome of a branch on it
    /// ends the run; a response the drain reads to its end after the
    /// cut-off does not (one that always comes after the others' is what
    /// the WARN is for).
    cut_offs: Cell<u32>,
}

impl Health {
    /// Whether it is ejected at `now`.
    pub(crate) fn is_ejected(&self, now: Instant) -> bool {
        self.until.get().is_some_and(|t| now < t)
    }

    /// Whether it is ejected now; reads the core's clock only for an
    /// upstream that was ever ejected.
    pub(crate) fn is_ejected_now(&self) -> bool {
        self.until.get().is_some_and(|t| percore::time::now() < t)
    }

    /// The end of its last ejection, if it was ever ejected.
    pub(crate) fn until(&self) -> Option<Instant> {
        self.until.get()
    }

    /// A branch on it ended (answered or failed): a run of cut-offs ends.
    pub(crate) fn outcome(&self) {
        self.cut_offs.set(0);
    }

    /// A request's branches on it cancelled before it answered; returns
    /// how many such requests in a row.
    pub(crate) fn cut_off(&self) -> u32 {
        let n = self.cut_offs.get().saturating_add(1);
        self.cut_offs.set(n);
        n
    }

    /// A success (a non-5xx answer): the counters start again. Returns
    /// how many ejections in a row it ended (0 if it was not ejected since
    /// its last success).
    pub(crate) fn success(&self) -> u32 {
        self.failures.set(0);
        self.run.set(self.run.get().wrapping_add(1));
        self.ejections.replace(0)
    }

    /// Whether a failure of the request whose mark for this upstream is
    /// `counted` (0 at first) is its first in the current run; marks it so.
    pub(crate) fn first_in_run(&self, counted: &Cell<u64>) -> bool {
        let mark = self.run.get().wrapping_add(1);
        counted.replace(mark) != mark
    }

    /// A failure; returns whether it reached the threshold (the caller
    /// then decides whether the ejection is allowed and calls [`eject`]).
    ///
    /// [`eject`]: Self::eject
    pub(crate) fn failure(&self, config: &EjectionConfig) -> bool {
        let n = self.failures.get().saturating_add(1);
        self.failures.set(n);
        config.consecutive_failures > 0 && n >= config.consecutive_failures
    }

    /// Ejects until `now + base_time × n` (n-th ejection in a row, capped
    /// at `max_time`); another full run of failures ejects it again.
    pub(crate) fn eject(&self, config: &EjectionConfig, now: Instant) -> Duration {
        let n = self.ejections.get().saturating_add(1);
        self.ejections.set(n);
        self.failures.set(0);
        self.run.set(self.run.get().wrapping_add(1));
        let time = config.base_time.saturating_mul(n).min(config.max_time);
        self.until.set(Some(now + time));
        time
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
    /// Its connections the drain is reading a response on.
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
    fn new(config: PoolConfig) -> Self {
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
    /// are connections the upstream has already closed or sent unsolicited
    /// bytes on (found by polling a read once, without waiting). This
    /// narrows the keep-alive race (the upstream closing a connection as it
    /// is reused) to a close that is still in
    /// flight; the exchange's retry rule covers the rest.
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

    /// Counts a connection the drain takes on; `false` (not counted) when
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
/// pooled connections that expired or that the upstream has closed, until
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
/// still pending. End of stream, an error, or bytes the upstream was never
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_line_leaves_out_an_ipv6_zone() {
        let scoped: SocketAddr = "[fe80::1%2]:8080".parse().expect("address");
        let upstream = Upstream::new(scoped.into(), PoolConfig::default(), None);
        assert_eq!(upstream.host_line, b"Host: [fe80::1]:8080\r\n");
        assert_eq!(upstream.name, "[fe80::1%2]:8080");
        let plain: SocketAddr = "[::1]:80".parse().expect("address");
        assert_eq!(
            Upstream::new(plain.into(), PoolConfig::default(), None).host_line,
            b"Host: [::1]:80\r\n"
        );
    }
}
