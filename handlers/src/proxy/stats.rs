//! Per-core counters of the fan-out proxy.

use std::cell::Cell;
use std::fmt;

/// A copy of one core's proxy counters (see [`FanOut::stats`](super::FanOut::stats)).
///
/// Client requests are counted by the HTTP layer in the core's
/// [`percore::StatsSnapshot`]; these count what happened upstream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProxyStats {
    /// Fanned-out client requests.
    pub requests: u64,
    /// Client requests answered 502 or 504.
    pub failed: u64,
    /// Sub-requests sent (each attempt, retries included).
    pub sub_requests: u64,
    /// New upstream connections opened.
    pub connects: u64,
    /// Sub-requests sent on a pooled (reused) connection.
    pub reuses: u64,
    /// Automatic retries (FAULTS F1, F5).
    pub retries: u64,
    /// Connect failures (refused, unreachable, connect timeout).
    pub errors_connect: u64,
    /// Exchanges that failed: reset, closed, garbage, truncated, over a limit.
    pub errors_exchange: u64,
    /// Branches still running at the request deadline.
    pub deadline: u64,
    /// Branches cancelled because the policy was decided without them.
    pub cancelled: u64,
    /// Upstreams ejected for failing in a row (FAULTS F8).
    pub ejections: u64,
    /// Client requests answered 503 because every upstream was ejected.
    pub all_ejected: u64,
    /// Client requests answered 503 by the pending-request breaker (F9).
    pub rejected_pending: u64,
    /// Copies the mirror (F7) sent and got an answer below 500 for.
    pub mirrored: u64,
    /// Copies the mirror sent that failed: no connection, a broken
    /// exchange, a 5xx answer, or no answer by the deadline.
    pub mirror_failed: u64,
    /// Copies not sent because `mirror_max_pending` were pending.
    pub mirror_dropped: u64,
}

impl fmt::Display for ProxyStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "requests={} failed={} sub_requests={} connects={} reuses={} retries={} \
             errors_connect={} errors_exchange={} deadline={} cancelled={} ejections={} \
             all_ejected={} rejected_pending={} mirrored={} mirror_failed={} \
             mirror_dropped={}",
            self.requests,
            self.failed,
            self.sub_requests,
            self.connects,
            self.reuses,
            self.retries,
            self.errors_connect,
            self.errors_exchange,
            self.deadline,
            self.cancelled,
            self.ejections,
            self.all_ejected,
            self.rejected_pending,
            self.mirrored,
            self.mirror_failed,
            self.mirror_dropped
        )
    }
}

/// The live counters: plain `Cell`s, since a core's proxy is never shared
/// across threads (no atomics on the hot path).
#[derive(Debug, Default)]
pub(crate) struct LocalStats {
    pub(crate) requests: Cell<u64>,
    pub(crate) failed: Cell<u64>,
    pub(crate) sub_requests: Cell<u64>,
    pub(crate) connects: Cell<u64>,
    pub(crate) reuses: Cell<u64>,
    pub(crate) retries: Cell<u64>,
    pub(crate) errors_connect: Cell<u64>,
    pub(crate) errors_exchange: Cell<u64>,
    pub(crate) deadline: Cell<u64>,
    pub(crate) cancelled: Cell<u64>,
    pub(crate) ejections: Cell<u64>,
    pub(crate) all_ejected: Cell<u64>,
    pub(crate) rejected_pending: Cell<u64>,
}

/// Adds one to a counter.
pub(crate) fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}

impl LocalStats {
    pub(crate) fn snapshot(&self) -> ProxyStats {
        ProxyStats {
            requests: self.requests.get(),
            failed: self.failed.get(),
            sub_requests: self.sub_requests.get(),
            connects: self.connects.get(),
            reuses: self.reuses.get(),
            retries: self.retries.get(),
            errors_connect: self.errors_connect.get(),
            errors_exchange: self.errors_exchange.get(),
            deadline: self.deadline.get(),
            cancelled: self.cancelled.get(),
            ejections: self.ejections.get(),
            all_ejected: self.all_ejected.get(),
            rejected_pending: self.rejected_pending.get(),
            mirrored: 0,
            mirror_failed: 0,
            mirror_dropped: 0,
        }
    }
}
