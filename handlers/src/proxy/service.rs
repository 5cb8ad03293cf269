//! [`FanOut`]: the fan-out proxy as an HTTP [`Service`].

use std::cell::Cell;
use std::io::{self, Write as _};
use std::ops::Range;
use std::rc::Rc;
use std::time::{Duration, Instant};

use percore::net::TcpStream;
use percore::time::now;

use super::client::{
    exchange, write_request_line, write_shared, Failure, IoFailure, ResponseLimits,
};
use super::combine::{entry_bound, write_entry, write_failure, Entry};
use super::forward::write_request;
use super::join::{Branches, Verdict};
use super::mirror::{Mirror, MirrorSettings};
use super::scratch::{ArenaPool, BufPool};
use super::stats::{bump, LocalStats};
use super::target::origin_form;
use super::upstream::Upstream;
use super::warn::{FailureLog, Reason, Role};
use super::{Config, ConfigError, ProxyStats};
use crate::http::{BodyKind, Request, Response, Service};

/// The fan-out proxy: answers each request by sending [`Config::width`]
/// concurrent sub-requests to the upstreams and joining their answers
/// under [`Config::policy`] (see the [module docs](super)).
///
/// Make one per core (wrapped in an [`HttpHandler`](crate::http::HttpHandler))
/// in the server's factory: it holds that core's connection pools, scratch
/// and counters, with no locks.
#[derive(Debug)]
pub struct FanOut {
    config: Config,
    upstreams: Vec<Upstream>,
    /// The upstream the next request's first branch goes to, counted
    /// among the upstreams not ejected.
    next: Cell<usize>,
    /// Most upstreams ejected at once (FAULTS F8).
    max_ejected: usize,
    /// Fanned-out requests in flight on this core (FAULTS F9).
    pending: Cell<usize>,
    limits: ResponseLimits,
    stats: LocalStats,
    bufs: BufPool,
    arenas: ArenaPool,
    mirror: Option<Rc<Mirror>>,
    /// Rate-limited WARN lines for failures, shared with the mirror.
    log: Rc<FailureLog>,
}

/// A successful branch.
#[derive(Debug)]
struct Reply {
    upstream: usize,
    status: u16,
    /// When its response was complete, on the core's clock.
    done: Instant,
    buf: Vec<u8>,
    body: Range<usize>,
    /// Its [`entry_bound`], counted once: both the reservation and the
    /// entry need it.
    bound: usize,
}

/// A failed branch.
#[derive(Debug, Clone, Copy)]
struct BranchError {
    upstream: usize,
    failure: Failure,
}

/// What one sub-request is about, shared by all branches of a request.
#[derive(Debug, Clone, Copy)]
struct Job<'a> {
    /// The request line, the same for every branch.
    line: &'a [u8],
    /// Everything after the `Host` line (see [`write_shared`]).
    shared: &'a [u8],
    /// RFC 9110 §9.2.2: may be retried (FAULTS F1, F5).
    idempotent: bool,
    /// A HEAD: the response has no body whatever it says.
    head_only: bool,
    /// Per upstream (indexed like [`FanOut::upstreams`]): the run of
    /// failures this request has added a failure to, plus one (0: none;
    /// see [`FanOut::record`]).
    counted: &'a [Cell<u64>],
}

impl FanOut {
    /// A proxy for `config`, for one core.
    ///
    /// # Errors
    ///
    /// When [`Config::validate`] fails.
    pub fn new(config: Config) -> Result<Self, ConfigError> {
        config.validate()?;
        let upstreams = config
            .upstreams
            .iter()
            .map(|&addr| Upstream::new(addr, config.pool))
            .collect();
        let limits = ResponseLimits {
            max_head: config.max_response_head,
            max_body: config.max_response_body,
        };
        let max_ejected =
            (config.upstreams.len() * usize::from(config.ejection.max_percent) / 100).max(1);
        let log = Rc::new(FailureLog::default());
        let mirror = config.mirror.map(|addr| {
            let settings = MirrorSettings {
                addr,
                pool: config.pool,
                max_pending: config.mirror_max_pending,
                limits,
                connect_timeout: config.connect_timeout,
                deadline: config.deadline,
            };
            Rc::new(Mirror::new(settings, log.clone()))
        });
        Ok(Self {
            config,
            upstreams,
            next: Cell::new(0),
            max_ejected,
            pending: Cell::new(0),
            limits,
            stats: LocalStats::default(),
            bufs: BufPool::default(),
            arenas: ArenaPool::default(),
            mirror,
            log,
        })
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// This core's counters now.
    pub fn stats(&self) -> ProxyStats {
        let mut stats = self.stats.snapshot();
        if let Some(m) = &self.mirror {
            stats.mirrored = m.mirrored.get();
            stats.mirror_failed = m.failed.get();
            stats.mirror_dropped = m.dropped.get();
        }
        stats
    }

    /// One branch: a sub-request to the upstream `at` holds, with at most
    /// one retry (see the module docs). A connect retry moves to another
    /// upstream and says so in `at`, so that a branch still running at the
    /// deadline is reported against the upstream it is waiting on. Returns
    /// its buffer to the pool on failure; on success the reply carries it.
    async fn branch(&self, at: &Cell<usize>, job: Job<'_>) -> Result<Reply, BranchError> {
        let mut index = at.get();
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
                        // the next upstream not ejected instead (FAULTS F1).
                        if job.idempotent && !retried {
                            if let Some(next) = self.next_healthy_after(index, now()) {
                                retried = true;
                                bump(&self.stats.retries);
                                index = next;
                                at.set(next);
                                continue;
                            }
                        }
                        self.bufs.put(buf);
                        return Err(BranchError {
                            upstream: index,
                            failure,
                        });
                    }
                },
            };
            bump(&self.stats.sub_requests);
            buf.clear();
            write_request(&mut buf, job.line, &upstream.host_line, job.shared);
            let (result, returned) = exchange(&conn, buf, self.limits, job.head_only).await;
            buf = returned;
            match result {
                Ok(answer) => {
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
                    // Never pooled again: its state is unknown.
                    drop(conn);
                    // The keep-alive race (FAULTS F5): a reused connection
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
                    });
                }
            }
        }
    }

    async fn connect(&self, upstream: &Upstream) -> Result<TcpStream, Failure> {
        bump(&self.stats.connects);
        match percore::time::timeout(
            self.config.connect_timeout,
            TcpStream::connect(upstream.addr),
        )
        .await
        {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(Failure::Connect(IoFailure::from(&e))),
            Err(_) => Err(Failure::ConnectTimeout),
        }
    }

    /// A WARN line (rate-limited) for a failed sub-request to upstream
    /// `index`; a connect failure is logged even when the branch then
    /// moves on to another upstream, since this one is still failing.
    fn log_failure(&self, index: usize, failure: Failure) {
        let name = self.upstream_name(index);
        self.log
            .failed(now(), Role::Upstream, name, Reason::Failed(failure));
    }

    fn upstream_name(&self, index: usize) -> &str {
        &self.upstreams[index % self.upstreams.len()].name
    }

    fn entry_prefix(&self, index: usize) -> &[u8] {
        &self.upstreams[index % self.upstreams.len()].entry_prefix
    }

    /// Records the outcome of an exchange with upstream `index` (a 5xx
    /// answer or a connection failure is a failure) for the request whose
    /// run marks are `counted`, and ejects the upstream after too many failed
    /// requests in a row if the cap on ejections allows (FAULTS F8). When
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
    fn record(&self, index: usize, ok: bool, counted: &[Cell<u64>]) {
        let index = index % self.upstreams.len();
        let health = &self.upstreams[index].health;
        if ok {
            health.success();
            return;
        }
        if !health.first_in_run(&counted[index]) {
            return;
        }
        if !health.failure(&self.config.ejection) {
            return;
        }
        let at = now();
        // A branch started before the ejection may still fail: no new one.
        if health.is_ejected(at) || self.ejected_count(at) >= self.max_ejected {
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

    fn ejected_count(&self, now: Instant) -> usize {
        self.upstreams
            .iter()
            .filter(|u| u.health.is_ejected(now))
            .count()
    }

    /// The index of the `k`-th upstream not ejected (`k` < their number).
    fn nth_healthy(&self, k: usize, now: Instant) -> usize {
        self.upstreams
            .iter()
            .enumerate()
            .filter(|(_, u)| !u.health.is_ejected(now))
            .nth(k)
            .map_or(k % self.upstreams.len(), |(i, _)| i)
    }

    /// The first upstream after `index` in the ring that is not ejected,
    /// other than `index` itself.
    fn next_healthy_after(&self, index: usize, now: Instant) -> Option<usize> {
        let n = self.upstreams.len();
        (1..n)
            .map(|step| (index + step) % n)
            .find(|&j| !self.upstreams[j].health.is_ejected(now))
    }

    /// 503 at once: this core already has `max_pending` fan-outs in flight
    /// (FAULTS F9).
    fn reject_pending(&self, res: &mut Response<'_>) -> io::Result<()> {
        bump(&self.stats.rejected_pending);
        res.header("Content-Type", b"text/plain; charset=utf-8")?;
        res.set_status(503);
        let _ = writeln!(
            res.body_mut(),
            "too many requests in flight: {} pending on this core (max_pending)",
            self.config.max_pending
        );
        Ok(())
    }

    /// 503: every upstream is ejected (FAULTS F8); names each and when it
    /// returns.
    fn reject_all_ejected(&self, res: &mut Response<'_>, now: Instant) -> io::Result<()> {
        bump(&self.stats.all_ejected);
        res.header("Content-Type", b"text/plain; charset=utf-8")?;
        res.set_status(503);
        let out = res.body_mut();
        let _ = writeln!(out, "no upstream available: every upstream is ejected");
        for u in &self.upstreams {
            if let Some(until) = u.health.until() {
                let _ = writeln!(
                    out,
                    "upstream {}: ejected after {} failed requests in a row, back in {} ms",
                    u.name,
                    self.config.ejection.consecutive_failures,
                    until.saturating_duration_since(now).as_millis()
                );
            }
        }
        Ok(())
    }
}

/// One fan-out in flight: counted in [`FanOut::pending`] until dropped
/// (also when the client goes away and the request future is dropped).
struct PendingGuard<'a>(&'a Cell<usize>);

impl<'a> PendingGuard<'a> {
    fn new(pending: &'a Cell<usize>) -> Self {
        pending.set(pending.get() + 1);
        Self(pending)
    }
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

impl Service for FanOut {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        let method = req.method();
        let target = match origin_form(method, req.target()) {
            Ok(target) => target,
            // The HTTP layer logs it, answers with its status and closes.
            Err(refused) => return Err(refused.into()),
        };
        // The breaker answers before the body is read: no queue, no work
        // (the HTTP layer discards the unread body).
        if self.pending.get() >= self.config.max_pending {
            return self.reject_pending(res);
        }
        let _pending = PendingGuard::new(&self.pending);
        let has_body = req.body_kind() != BodyKind::None;
        let headers = req.headers();
        let client = req.peer_addr().ok().map(|a| a.ip());
        // The request line first, then the part after `Host`, in one buffer.
        let mut shared = self.bufs.take();
        write_request_line(&mut shared, method, target);
        let line_len = shared.len();
        {
            let body: &[u8] = if has_body { req.body().await? } else { &[] };
            write_shared(&mut shared, headers, client, body, has_body);
        }
        let started = now();
        let healthy = self.upstreams.len() - self.ejected_count(started);
        if healthy == 0 {
            self.bufs.put(shared);
            return self.reject_all_ejected(res, started);
        }
        bump(&self.stats.requests);
        let head_only = method == "HEAD";
        let (line, after_host) = shared.split_at(line_len);
        if let Some(mirror) = &self.mirror {
            mirror.submit(line, after_host, head_only);
        }
        let arena = self.arenas.take();
        let counted: &[Cell<u64>] =
            arena.alloc_slice_fill_with(self.upstreams.len(), |_| Cell::new(0));
        let job = Job {
            line,
            shared: after_host,
            idempotent: matches!(
                method,
                "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE"
            ),
            head_only,
            counted,
        };
        let width = self.config.width;
        // Round-robin over the upstreams not ejected (FAULTS F8).
        let first = self.next.get() % healthy;
        self.next.set((first + width) % healthy);

        // The upstream each branch is on, updated by its retry.
        let all_in = healthy == self.upstreams.len();
        let targets: &[Cell<usize>] = arena.alloc_slice_fill_with(width, |i| {
            let k = (first + i) % healthy;
            // With none ejected (the usual case) the k-th healthy one is the
            // k-th: no walk over the upstreams per branch.
            Cell::new(if all_in {
                k
            } else {
                self.nth_healthy(k, started)
            })
        });
        // SAFETY: `branches` is a local declared after `arena`, so it is
        // dropped first, and it is never forgotten.
        let mut branches =
            unsafe { Branches::new_in(&arena, width, |i| self.branch(&targets[i], job)) };
        let verdict = branches
            .join(self.config.policy, started + self.config.deadline)
            .await;

        match verdict {
            Verdict::Met => {
                let cancelled = branches.cancel_running();
                self.stats
                    .cancelled
                    .set(self.stats.cancelled.get() + cancelled as u64);
                res.header("Content-Type", b"application/json")?;
                res.set_status(200);
                let bound: usize = (0..width)
                    .filter_map(|i| match branches.output(i) {
                        Some(Ok(reply)) => Some(reply.bound),
                        _ => None,
                    })
                    .sum();
                let out = res.body_mut();
                out.reserve(bound + 2);
                out.push(b'[');
                // Several branches may have finished in the same turn: the
                // answer holds exactly as many as the policy asked for.
                let mut wanted = self.config.policy.needed(width);
                let mut first_entry = true;
                // Branches that finish in the same turn share the clock
                // reading, and so their latency: computed once.
                let mut last = (started, Duration::ZERO);
                for i in 0..width {
                    if let Some(Ok(reply)) = branches.take(i) {
                        if wanted == 0 {
                            self.bufs.put(reply.buf);
                            continue;
                        }
                        wanted -= 1;
                        if reply.done != last.0 {
                            last = (reply.done, reply.done.saturating_duration_since(started));
                        }
                        let entry = Entry {
                            prefix: self.entry_prefix(reply.upstream),
                            status: reply.status,
                            latency: last.1,
                            body: reply.buf.get(reply.body.clone()).unwrap_or_default(),
                            bound: reply.bound,
                        };
                        write_entry(out, &entry, first_entry);
                        first_entry = false;
                        self.bufs.put(reply.buf);
                    }
                }
                out.push(b']');
            }
            Verdict::Failed | Verdict::Deadline => {
                bump(&self.stats.failed);
                let timed_out = verdict == Verdict::Deadline;
                let mut status = 504;
                res.header("Content-Type", b"text/plain; charset=utf-8")?;
                let out = res.body_mut();
                for (i, target) in targets.iter().enumerate() {
                    match branches.output(i) {
                        Some(Err(e)) => {
                            if e.failure.status() == 502 && !timed_out {
                                status = 502;
                            }
                            write_failure(out, self.upstream_name(e.upstream), &e.failure);
                        }
                        None if timed_out && branches.is_running(i) => {
                            bump(&self.stats.deadline);
                            self.log_failure(target.get(), Failure::Deadline);
                            let upstream = self.upstream_name(target.get());
                            write_failure(out, upstream, &Failure::Deadline);
                        }
                        _ => {}
                    }
                }
                if !timed_out && status == 504 && out.is_empty() {
                    status = 502;
                }
                let cancelled = branches.cancel_running();
                if !timed_out {
                    self.stats
                        .cancelled
                        .set(self.stats.cancelled.get() + cancelled as u64);
                }
                for i in 0..width {
                    if let Some(Ok(reply)) = branches.take(i) {
                        self.bufs.put(reply.buf);
                    }
                }
                res.set_status(status);
            }
        }
        drop(branches);
        self.bufs.put(shared);
        Ok(())
    }
}

impl Drop for FanOut {
    fn drop(&mut self) {
        let stats = self.stats();
        if stats.requests > 0 {
            tracing::info!("fanout {stats}");
        }
    }
}
