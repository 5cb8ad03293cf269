//! One branch of a fan-out: a sub-request to one upstream over a pooled
//! or new connection, with at most one retry, and the bookkeeping of the
//! upstreams' health that its outcome feeds (outlier ejection;
//! see the [module docs](super)).

use std::cell::Cell;
use std::future::poll_fn;
use std::ops::Range;
use std::time::Instant;

use percore::net::Stream;
use percore::time::now;

use super::service::FanOut;
use super::stats::bump;
use super::upstream::Upstream;
use super::warn::{Reason, Role};
use crate::client::connect::connect;
use crate::client::exchange::{Exchange, ExchangeError, Failure};
use crate::proxy::combine::entry_bound;
use percore_http1::forward::write_request;

/// Requests in a row whose branches on one upstream were all cancelled
/// before it answered that make a WARN, times `m / 2` rounded up, where
/// `m` is the width over the fewest branches an upstream gets in a request
/// (width / upstreams rounded down, at least 1), rounded up: the number of
/// upstreams when the width is a multiple of it, the width when it is
/// below it. An upstream as fast as the others loses a request's race at
/// most `m − 1` times in `m`, and 50 × `m` such losses in a row come by
/// chance less than once in 10^21 (under `first` of two, 100 in a row; of
/// sixteen, 800), so a line means it is hung or always slower than the
/// others. A fixed 100 would not do: under `first` over sixteen upstreams
/// as fast as each other, one of them loses 100 in a row about once in
/// 600 requests.
pub(crate) const CUT_OFF_WARNING: u32 = 100;

/// [`CUT_OFF_WARNING`] scaled for `width` branches over `upstreams`, as it
/// says.
pub(crate) fn cut_off_every(width: usize, upstreams: usize) -> u32 {
    let m = width.div_ceil((width / upstreams.max(1)).max(1));
    u32::try_from(m.div_ceil(2)).map_or(u32::MAX, |h| CUT_OFF_WARNING.saturating_mul(h.max(1)))
}

/// A successful branch.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) upstream: usize,
    pub(crate) status: u16,
    /// When its response was complete, on the core's clock.
    pub(crate) done: Instant,
    pub(crate) buf: Vec<u8>,
    pub(crate) body: Range<usize>,
    /// Its [`entry_bound`], counted once: both the reservation and the
    /// entry need it.
    pub(crate) bound: usize,
}

/// A failed branch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BranchError {
    pub(crate) upstream: usize,
    pub(crate) failure: Failure,
    /// The upstream it left after a failed connect, and why.
    pub(crate) moved_from: Option<(usize, Failure)>,
}

/// The upstream a branch is on, and the one it left after a failed
/// connect (for the answer's failure line: the first failure must not be
/// hidden by the second).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target {
    pub(crate) upstream: usize,
    pub(crate) moved_from: Option<(usize, Failure)>,
}

/// What one sub-request is about, shared by all branches of a request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Job<'a> {
    /// The request line, the same for every branch.
    pub(crate) line: &'a [u8],
    /// Everything after the `Host` line (see
    /// [`write_shared`](super::subrequest::write_shared)).
    pub(crate) shared: &'a [u8],
    /// RFC 9110 §9.2.2: may be retried.
    pub(crate) idempotent: bool,
    /// A HEAD: the response has no body whatever it says.
    pub(crate) head_only: bool,
    /// Per upstream (indexed like [`FanOut::upstreams`]): the run of
    /// failures this request has added a failure to, plus one (0: none;
    /// see [`FanOut::record`]).
    pub(crate) counted: &'a [Cell<u64>],
    /// Set when the policy is met: a branch cancelled from then on was
    /// cut off, and its response, if it was being read, goes to the drain
    /// (`drain.rs`).
    pub(crate) cut_off: &'a Cell<bool>,
    /// The request's deadline, which also ends a drain.
    pub(crate) deadline: Instant,
}

impl FanOut {
    /// One branch: a sub-request to the upstream `at` holds, with at most
    /// one retry (see the module docs). A connect retry moves to another
    /// upstream and says so in `at`, so that a branch still running at the
    /// deadline is reported against the upstream it is waiting on. Returns
    /// its buffer to the pool on failure; on success the reply carries it.
    pub(crate) async fn branch(
        &self,
        at: &Cell<Target>,
        job: Job<'_>,
    ) -> Result<Reply, BranchError> {
        #[cfg(feature = "h2")]
        if let Some(origin) = &self.upstreams[at.get().upstream % self.upstreams.len()].h2 {
            // Boxed: the HTTP/1.1 branch's future stays as small as it was.
            return Box::pin(self.branch_h2(at, job, origin)).await;
        }
        let mut index = at.get().upstream;
        let mut buf = self.bufs.take();
        let mut retried = false;
        let mut fresh_only = false;
        loop {
            let upstream = &self.upstreams[index % self.upstreams.len()];
            let pooled = if fresh_only {
                None
            } else {
                upstream.pool.checkout(now())
            };
            let reused = pooled.is_some();
            let conn = match pooled {
                Some(conn) => {
                    bump(&self.stats.reuses);
                    conn
                }
                None => match self.connect(upstream).await {
                    Ok(conn) => conn,
                    Err(failure) => {
                        bump(&self.stats.errors_connect);
                        self.log_failure(index, failure);
                        self.record(index, false, job.counted);
                        // Nothing was sent: an idempotent request may go to
                        // the next upstream not ejected instead.
                        if job.idempotent && !retried {
                            if let Some(next) = self.next_healthy_after(index, now()) {
                                retried = true;
                                bump(&self.stats.retries);
                                at.set(Target {
                                    upstream: next,
                                    moved_from: Some((index, failure)),
                                });
                                index = next;
                                continue;
                            }
                        }
                        self.bufs.put(buf);
                        return Err(BranchError {
                            upstream: index,
                            failure,
                            moved_from: at.get().moved_from,
                        });
                    }
                },
            };
            bump(&self.stats.sub_requests);
            buf.clear();
            write_request(&mut buf, job.line, &upstream.host_line, job.shared);
            // Sent here and read through the drain's guard, not in
            // futures of their own: two nested futures (sending, then
            // reading) cost a fan-out of width 4 about 1,100 instructions
            // per request, mostly in moves of their state.
            let (sent, mut returned) = conn.write_all(buf).await;
            let result = match sent {
                Ok(()) => {
                    let exchange = Exchange::sent(conn, returned, self.limits, job.head_only);
                    let mut reading = self.reading(exchange, index, &job);
                    let (result, conn, read) = poll_fn(|cx| reading.poll_answer(cx)).await;
                    returned = read;
                    result.map(|answer| (answer, conn))
                }
                // The connection, unusable, is closed.
                Err(e) => Err(ExchangeError::send_failed(&e)),
            };
            buf = returned;
            match result {
                Ok((answer, conn)) => {
                    if answer.status >= 500 {
                        bump(&self.stats.upstream_5xx);
                    }
                    self.record(index, answer.status < 500, job.counted);
                    if answer.reusable {
                        upstream.pool.release(conn, now());
                    }
                    let body = buf.get(answer.body.clone()).unwrap_or_default();
                    return Ok(Reply {
                        upstream: index,
                        status: answer.status,
                        done: now(),
                        bound: entry_bound(&upstream.entry_prefix, body),
                        buf,
                        body: answer.body,
                    });
                }
                Err(e) => {
                    // The connection was closed: its state is unknown.
                    // The keep-alive race: a reused connection
                    // that the upstream had closed fails before any byte of
                    // a response; the upstream cannot have acted on it.
                    if reused && !e.response_started && job.idempotent && !retried {
                        retried = true;
                        fresh_only = true;
                        bump(&self.stats.retries);
                        continue;
                    }
                    bump(&self.stats.errors_exchange);
                    self.log_failure(index, e.failure);
                    self.record(index, false, job.counted);
                    self.bufs.put(buf);
                    return Err(BranchError {
                        upstream: index,
                        failure: e.failure,
                        moved_from: at.get().moved_from,
                    });
                }
            }
        }
    }

    /// A new connection to `upstream`, with its TLS handshake done when it
    /// has TLS: both within the connect timeout.
    pub(super) async fn connect(&self, upstream: &Upstream) -> Result<Stream, Failure> {
        bump(&self.stats.connects);
        let tls = upstream
            .tls
            .as_ref()
            .map(|(config, name)| (config, name.as_str()));
        connect(&upstream.addr, tls, self.config.connect_timeout).await
    }

    /// A WARN line (rate-limited) for a failed sub-request to upstream
    /// `index`; a connect failure is logged even when the branch then
    /// moves on to another upstream, since this one is still failing.
    pub(crate) fn log_failure(&self, index: usize, failure: Failure) {
        let name = self.upstream_name(index);
        self.log
            .failed(now(), Role::Upstream, name, Reason::Failed(failure));
    }

    pub(crate) fn upstream_name(&self, index: usize) -> &str {
        &self.upstreams[index % self.upstreams.len()].name
    }

    /// The name of the upstream a branch left after a failed connect, and
    /// why, for its failure line.
    pub(crate) fn moved_from(&self, from: Option<(usize, Failure)>) -> Option<(&str, Failure)> {
        from.map(|(index, failure)| (self.upstream_name(index), failure))
    }

    pub(crate) fn entry_prefix(&self, index: usize) -> &[u8] {
        &self.upstreams[index % self.upstreams.len()].entry_prefix
    }

    /// Records the outcome of an exchange with upstream `index` (a 5xx
    /// answer, a connection failure or no answer by the deadline is a
    /// failure) for the request whose
    /// run marks are `counted`, and ejects the upstream after too many failed
    /// requests in a row if the cap on ejections allows. When
    /// the cap does not, it stays in and the next failure tries again.
    ///
    /// A request adds at most one failure to an upstream's run, however
    /// many of its branches went there. Counted per branch, the threshold
    /// would depend on the width: at width 16 over two upstreams, one
    /// request that failed its 8 branches on an upstream would eject it
    /// alone, where 5 failures in a row are meant to show a pattern.
    ///
    /// Runs are numbered rather than the request's flag cleared on its own
    /// success, because another request's success (or an ejection) also
    /// starts a new run, in which this request's next failure counts.
    pub(crate) fn record(&self, index: usize, ok: bool, counted: &[Cell<u64>]) {
        let index = index % self.upstreams.len();
        let health = &self.upstreams[index].health;
        health.outcome();
        // An outcome of a branch begun before the ejection: the ejection
        // runs its course, and the run after it starts from nothing (a
        // burst of such failures would otherwise eject it again at its
        // first failure after it). The clock is read only for an upstream
        // that was ever ejected.
        if health.is_ejected_now() {
            return;
        }
        if ok {
            let ended = health.success();
            if ended > 0 {
                tracing::info!(
                    "fanout: upstream {} answers again after {ended} ejection{} in a row",
                    self.upstream_name(index),
                    if ended == 1 { "" } else { "s" }
                );
            }
            return;
        }
        if !health.first_in_run(&counted[index]) {
            return;
        }
        if !health.failure(&self.config.ejection) {
            return;
        }
        let at = now();
        if self.ejected_count(at) >= self.max_ejected {
            return;
        }
        let time = health.eject(&self.config.ejection, at);
        bump(&self.stats.ejections);
        tracing::warn!(
            "fanout: upstream {} ejected for {time:?} after {} failed requests in a row",
            self.upstream_name(index),
            self.config.ejection.consecutive_failures
        );
    }

    /// Notes that a request's branches on upstream `index` were cancelled
    /// because the policy was met without them; every [`CUT_OFF_WARNING`]
    /// (scaled as it says) such requests in a row with no outcome from it
    /// in between, a (rate-limited) WARN says so.
    pub(crate) fn cut_off(&self, index: usize) {
        let index = index % self.upstreams.len();
        let n = self.upstreams[index].health.cut_off();
        if n % self.cut_off_every == 0 {
            let name = self.upstream_name(index);
            self.log
                .failed(now(), Role::Upstream, name, Reason::CutOff(n));
        }
    }

    pub(crate) fn ejected_count(&self, now: Instant) -> usize {
        self.upstreams
            .iter()
            .filter(|u| u.health.is_ejected(now))
            .count()
    }

    /// The index of the `k`-th upstream not ejected (`k` < their number).
    pub(crate) fn nth_healthy(&self, k: usize, now: Instant) -> usize {
        self.upstreams
            .iter()
            .enumerate()
            .filter(|(_, u)| !u.health.is_ejected(now))
            .nth(k)
            .map_or(k % self.upstreams.len(), |(i, _)| i)
    }

    /// The first upstream after `index` in the ring that is not ejected,
    /// other than `index` itself.
    pub(crate) fn next_healthy_after(&self, index: usize, now: Instant) -> Option<usize> {
        let n = self.upstreams.len();
        (1..n)
            .map(|step| (index + step) % n)
            .find(|&j| !self.upstreams[j].health.is_ejected(now))
    }
}
