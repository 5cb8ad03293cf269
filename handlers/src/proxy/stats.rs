//! Per-core counters of the fan-out proxy, written by their core and
//! readable from any thread (a periodic stats line, a test), not only in
//! the summary logged when the proxy stops.
//!
//! Each counter has one writer, its core (the fan-out and its mirror
//! workers): they are the framework's single-writer
//! [`Counter`](percore::runtime::Counter)s, as cheap as a plain add.

use std::fmt;
use std::sync::Arc;

use percore::runtime::Counter;

/// A copy of one core's proxy counters (see [`FanOut::stats`] and
/// [`ProxyStatsReader`]).
///
/// Client requests are counted by the HTTP layer in the core's
/// [`percore::StatsSnapshot`]; these count what happened upstream.
///
/// [`FanOut::stats`]: super::FanOut::stats
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProxyStats {
    /// Fanned-out client requests.
    pub requests: u64,
    /// Client requests answered 502 or 504.
    pub failed: u64,
    /// Of [`failed`](Self::failed), those answered 504 (the deadline or a
    /// connect timeout); the rest were 502.
    pub failed_504: u64,
    /// Sub-requests sent (each attempt, retries included).
    pub sub_requests: u64,
    /// New upstream connections begun, including those that failed
    /// ([`errors_connect`](Self::errors_connect)) and those cancelled
    /// before they were made (a branch cut off by the policy).
    pub connects: u64,
    /// Sub-requests sent on a pooled (reused) connection.
    pub reuses: u64,
    /// Automatic retries: of an idempotent request whose upstream refused
    /// the connection, or whose pooled connection turned out closed.
    pub retries: u64,
    /// Connect failures (refused, unreachable, connect timeout).
    pub errors_connect: u64,
    /// Exchanges that failed: reset, closed, garbage, truncated, over a limit.
    pub errors_exchange: u64,
    /// Branches still running at the request deadline.
    pub deadline: u64,
    /// Branches cancelled because the policy was decided without them.
    pub cancelled: u64,
    /// Of [`cancelled`](Self::cancelled), branches cut off by a met policy
    /// (`first`, `quorum:K`) after their sub-request was sent whose
    /// response the drain read to its end, and whose connection it put
    /// back in the pool: one fewer connect for a later request.
    pub drained: u64,
    /// Branches cut off like [`drained`](Self::drained) ones whose
    /// connection was closed instead: the response failed, was not
    /// reusable (`Connection: close`, framed by the end of stream, over
    /// `max_response_body`), had not ended by the request's deadline, or
    /// the server stopped; or the pool was full, or already had
    /// [`PoolConfig::max_idle`](super::PoolConfig::max_idle) connections
    /// draining. A cut-off branch still connecting or sending is in
    /// neither count: its connection is closed at once.
    pub drain_closed: u64,
    /// Drain workers started: a cut-off branch's connection found every
    /// worker busy with an earlier one. It stops growing once there are as
    /// many workers as drains overlap at most, and grows again only after
    /// a spell quieter than the pool's idle timeout retired some.
    pub drain_workers: u64,
    /// Client requests the proxy was still working on (reading the body,
    /// or waiting on upstreams) when the server's stop cut them off near
    /// its drain deadline: the HTTP layer answered them 503 (see
    /// [`Service`](crate::http::Service)) and their branches were
    /// cancelled.
    pub stopped: u64,
    /// Client requests answered 508 because they had already passed
    /// through this proxy: its own pseudonym was in their `Via`.
    pub loops: u64,
    /// Sub-requests their upstream answered with a 5xx: an answer, passed
    /// on in the JSON array under `all` (not a failed branch), but counted
    /// toward the upstream's ejection.
    pub upstream_5xx: u64,
    /// Upstreams ejected for failing several times in a row.
    pub ejections: u64,
    /// Client requests answered 503 because every upstream was ejected.
    pub all_ejected: u64,
    /// Client requests answered 503 by the pending-request breaker
    /// ([`Config::max_pending`](super::Config::max_pending)).
    pub rejected_pending: u64,
    /// Copies the mirror sent and got an answer below 500 for.
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
            "requests={} failed={} failed_504={} sub_requests={} connects={} reuses={} \
             retries={} errors_connect={} errors_exchange={} deadline={} cancelled={} \
             drained={} drain_closed={} drain_workers={} stopped={} loops={} upstream_5xx={} ejections={} all_ejected={} rejected_pending={} \
             mirrored={} mirror_failed={} mirror_dropped={}",
            self.requests,
            self.failed,
            self.failed_504,
            self.sub_requests,
            self.connects,
            self.reuses,
            self.retries,
            self.errors_connect,
            self.errors_exchange,
            self.deadline,
            self.cancelled,
            self.drained,
            self.drain_closed,
            self.drain_workers,
            self.stopped,
            self.loops,
            self.upstream_5xx,
            self.ejections,
            self.all_ejected,
            self.rejected_pending,
            self.mirrored,
            self.mirror_failed,
            self.mirror_dropped
        )
    }
}

/// Reads one core's proxy counters from any thread: `Send`, `Sync`, cheap
/// to clone, and still readable after the proxy is gone (its last values).
/// Get one from [`FanOut::stats_reader`](super::FanOut::stats_reader) in
/// the server's factory, which runs on the core.
///
/// # Examples
///
/// ```no_run
/// use std::sync::{Arc, Mutex};
/// use percore_handlers::http::HttpHandler;
/// use percore_handlers::proxy::{Config, FanOut, ProxyStatsReader};
///
/// let config = Config::new(vec!["127.0.0.1:8080".parse::<std::net::SocketAddr>().unwrap()]);
/// let readers: Arc<Mutex<Vec<ProxyStatsReader>>> = Arc::default();
/// let registry = readers.clone();
/// let server = percore::Server::builder()
///     .address("127.0.0.1:8081".parse().unwrap())
///     .start(move |_core| {
///         let proxy = FanOut::new(config.clone()).unwrap();
///         registry.lock().unwrap().push(proxy.stats_reader());
///         HttpHandler::new(proxy)
///     })
///     .unwrap();
/// for reader in readers.lock().unwrap().iter() {
///     println!("{}", reader.snapshot());
/// }
/// # drop(server);
/// ```
#[derive(Debug, Clone)]
pub struct ProxyStatsReader(Arc<Counters>);

impl ProxyStatsReader {
    /// The core's counters now (each one exact; taken one after another,
    /// so counters that move together may be a request apart).
    pub fn snapshot(&self) -> ProxyStats {
        self.0.snapshot()
    }
}

/// Adds one to a counter.
pub(crate) fn bump(c: &Counter) {
    c.add(1);
}

/// The live counters of one core, shared (`Arc`) between the core's
/// fan-out, its mirror and any [`ProxyStatsReader`]; only the core writes.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) requests: Counter,
    pub(crate) failed: Counter,
    pub(crate) failed_504: Counter,
    pub(crate) sub_requests: Counter,
    pub(crate) connects: Counter,
    pub(crate) reuses: Counter,
    pub(crate) retries: Counter,
    pub(crate) errors_connect: Counter,
    pub(crate) errors_exchange: Counter,
    pub(crate) deadline: Counter,
    pub(crate) cancelled: Counter,
    pub(crate) drained: Counter,
    pub(crate) drain_closed: Counter,
    pub(crate) drain_workers: Counter,
    pub(crate) stopped: Counter,
    pub(crate) loops: Counter,
    pub(crate) upstream_5xx: Counter,
    pub(crate) ejections: Counter,
    pub(crate) all_ejected: Counter,
    pub(crate) rejected_pending: Counter,
    pub(crate) mirrored: Counter,
    pub(crate) mirror_failed: Counter,
    pub(crate) mirror_dropped: Counter,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> ProxyStats {
        ProxyStats {
            requests: self.requests.get(),
            failed: self.failed.get(),
            failed_504: self.failed_504.get(),
            sub_requests: self.sub_requests.get(),
            connects: self.connects.get(),
            reuses: self.reuses.get(),
            retries: self.retries.get(),
            errors_connect: self.errors_connect.get(),
            errors_exchange: self.errors_exchange.get(),
            deadline: self.deadline.get(),
            cancelled: self.cancelled.get(),
            drained: self.drained.get(),
            drain_closed: self.drain_closed.get(),
            drain_workers: self.drain_workers.get(),
            stopped: self.stopped.get(),
            loops: self.loops.get(),
            upstream_5xx: self.upstream_5xx.get(),
            ejections: self.ejections.get(),
            all_ejected: self.all_ejected.get(),
            rejected_pending: self.rejected_pending.get(),
            mirrored: self.mirrored.get(),
            mirror_failed: self.mirror_failed.get(),
            mirror_dropped: self.mirror_dropped.get(),
        }
    }

    /// A reader of these counters for other threads.
    pub(crate) fn reader(self: &Arc<Self>) -> ProxyStatsReader {
        ProxyStatsReader(self.clone())
    }
}

/// A fanned-out request in progress: counted in the core's pending
/// fan-outs (the per-core limit's count) while it lives, and as [`ProxyStats::stopped`] if
/// its future is dropped before [`finish`](Self::finish). Only a stop does
/// that: the HTTP layer's cut-off near the drain deadline, or the drain's
/// end (a client that leaves is not noticed while the service runs, as
/// the HTTP layer does not read then). A panic unwinding through it is
/// the HTTP layer's to count, not a stop.
pub(crate) struct InFlight<'a> {
    pending: &'a std::cell::Cell<usize>,
    stopped: &'a Counter,
    finished: bool,
}

impl<'a> InFlight<'a> {
    pub(crate) fn new(pending: &'a std::cell::Cell<usize>, stopped: &'a Counter) -> Self {
        pending.set(pending.get() + 1);
        Self {
            pending,
            stopped,
            finished: false,
        }
    }

    /// The request was answered (or failed) by the proxy itself.
    pub(crate) fn finish(mut self) {
        self.finished = true;
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.pending.set(self.pending.get() - 1);
        if !self.finished && !std::thread::panicking() {
            bump(self.stopped);
        }
    }
}
