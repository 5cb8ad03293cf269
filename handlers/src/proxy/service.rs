//! [`FanOut`]: the fan-out proxy as an HTTP [`Service`]: the request path
//! from the client's request to the joined answer. One branch is in
//! `branch.rs`, the answers given without fanning out in `refuse.rs`.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bumpalo::Bump;

use percore::time::now;

use super::branch::{cut_off_every, BranchError, Job, Reply, Target};
use super::drain::Drain;
use super::join::{Branches, Verdict};
use super::mirror::{Mirror, MirrorSettings};
use super::scratch::{ArenaPool, BufPool};
use super::stats::{bump, Counters, InFlight, ProxyStatsReader};
use super::subrequest::{write_request_line, write_shared};
use super::target::{origin_form, OriginForm};
use super::upstream::Upstream;
use super::via::Via;
use super::warn::FailureLog;
use super::{Config, ConfigError, ProxyStats};
use crate::client::exchange::{Failure, ResponseLimits};
use crate::http::proto::BodyKind;
use crate::http::{Request, Response, Service};
use crate::proxy::combine::{write_entry, write_failure, Entry};

/// The fan-out proxy: answers each request by sending [`Config::width`]
/// concurrent sub-requests to the upstreams and joining their answers
/// under [`Config::policy`] (see the [module docs](super)).
///
/// Make one per core (wrapped in an [`HttpHandler`](crate::http::HttpHandler))
/// in the server's factory: it holds that core's connection pools, scratch
/// and counters, with no locks.
#[derive(Debug)]
pub struct FanOut {
    pub(crate) config: Config,
    pub(crate) upstreams: Vec<Upstream>,
    /// The upstream the next request's first branch goes to, counted
    /// among the upstreams not ejected.
    pub(crate) next: Cell<usize>,
    /// Most upstreams ejected at once.
    pub(crate) max_ejected: usize,
    /// Requests in a row whose branches on one upstream were all cut off
    /// that make a WARN (see [`cut_off_every`]).
    pub(crate) cut_off_every: u32,
    /// Fanned-out requests in flight on this core.
    pending: Cell<usize>,
    pub(crate) limits: ResponseLimits,
    /// This core's counters, shared with its mirror and with readers on
    /// other threads.
    pub(crate) stats: Arc<Counters>,
    /// Shared with the drain, whose buffers come from here.
    pub(crate) bufs: Rc<BufPool>,
    arenas: Rc<ArenaPool>,
    /// The free lists are emptied when the core gives memory back:
    /// registered at the first request, on the core (`new` may run
    /// elsewhere).
    given_back: Cell<bool>,
    /// Reads cut-off branches' responses to the end for their pools.
    pub(crate) drain: Drain,
    mirror: Option<Rc<Mirror>>,
    /// Rate-limited WARN lines for failures, shared with the mirror.
    pub(crate) log: Rc<FailureLog>,
    /// The `Via` element and the loop check.
    pub(crate) via: Via,
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
            .map(|addr| {
                #[allow(unused_mut, reason = "only HTTP/2 changes it")]
                let mut upstream =
                    Upstream::new(addr.clone(), config.pool, config.upstream_tls.as_ref());
                #[cfg(feature = "h2")]
                if config.upstream_http2 {
                    upstream.speak_h2();
                }
                upstream
            })
            .collect();
        let limits = ResponseLimits {
            max_head: config.max_response_head,
            max_body: config.max_response_body,
        };
        let max_ejected =
            (config.upstreams.len() * usize::from(config.ejection.max_percent) / 100).max(1);
        let log = Rc::new(FailureLog::default());
        let stats = Arc::new(Counters::default());
        let mirror = config.mirror.clone().map(|addr| {
            let settings = MirrorSettings {
                addr,
                pool: config.pool,
                max_pending: config.mirror_max_pending,
                limits,
                connect_timeout: config.connect_timeout,
                deadline: config.deadline,
            };
            Rc::new(Mirror::new(settings, log.clone(), stats.clone()))
        });
        let via = Via::new(&config.pseudonym);
        let cut_off_every = cut_off_every(config.width, config.upstreams.len());
        let bufs = Rc::new(BufPool::default());
        let drain = Drain::new(bufs.clone(), stats.clone(), config.pool.idle_timeout);
        Ok(Self {
            config,
            upstreams,
            next: Cell::new(0),
            max_ejected,
            cut_off_every,
            pending: Cell::new(0),
            limits,
            stats,
            bufs,
            arenas: Rc::default(),
            given_back: Cell::new(false),
            drain,
            mirror,
            log,
            via,
        })
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// This core's counters now.
    pub fn stats(&self) -> ProxyStats {
        self.stats.snapshot()
    }

    /// A reader of this core's counters for other threads, such as the one
    /// that prints a server's periodic stats lines (see
    /// [`ProxyStatsReader`] for an example). Reading costs the core
    /// nothing: it writes its counters as it always does.
    pub fn stats_reader(&self) -> ProxyStatsReader {
        self.stats.reader()
    }
}

impl Service for FanOut {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        let method = req.method();
        let headers = req.headers();
        // Before anything else: a request that came back here must not go
        // round again, nor take a place in the breaker.
        if self.via.seen_in(headers) {
            return self.reject_loop(res, method, req.target());
        }
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
        if !self.given_back.replace(true) {
            self.give_back_with_the_core();
        }
        let in_flight = InFlight::new(&self.pending, &self.stats.stopped);
        // One upstream can take over the connection; K cannot. An HTTP/2
        // extended CONNECT is not passed on: the upstreams speak HTTP/1.1,
        // whose upgrade it cannot be turned into (a WebSocket's has a key).
        let upgrade = match req.upgrade_protocol() {
            Some(protocol) if self.config.width == 1 && req.version() == 1 => {
                std::str::from_utf8(protocol).ok()
            }
            _ => None,
        };
        let result = match upgrade {
            Some(protocol) => self.tunnel(req, res, target, protocol).await,
            None => self.fan_out(req, res, target).await,
        };
        in_flight.finish();
        result
    }
}

impl FanOut {
    /// Has the core empty the free lists when it gives memory back after
    /// a burst: what endless or oversized upstream bodies grew would
    /// otherwise stay (the buffers up to 32 MiB a core).
    #[cold]
    fn give_back_with_the_core(&self) {
        percore::on_give_back(&self.bufs, BufPool::clear);
        percore::on_give_back(&self.arenas, ArenaPool::clear);
        if let Some(mirror) = &self.mirror {
            percore::on_give_back(mirror, Mirror::give_back);
        }
    }

    /// Reads the body, fans the request out, joins the branches and writes
    /// the answer (see the module docs' steps 1 to 4).
    async fn fan_out(
        &self,
        req: &mut Request<'_>,
        res: &mut Response<'_>,
        target: OriginForm<'_>,
    ) -> io::Result<()> {
        let method = req.method();
        let (shared, line_len) = self.prepare(req, target).await?;
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
        let cut_off = Cell::new(false);
        let deadline = started + self.config.deadline;
        let job = Job {
            line,
            shared: after_host,
            idempotent: matches!(
                method,
                "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE"
            ),
            head_only,
            counted,
            cut_off: &cut_off,
            deadline,
        };
        let targets = self.targets(&arena, healthy, started);
        // SAFETY: `branches` is a local declared after `arena`, so it is
        // dropped first, and it is never forgotten.
        let mut branches = unsafe {
            Branches::new_in(&arena, self.config.width, |i| self.branch(&targets[i], job))
        };
        let verdict = branches.join(self.config.policy, deadline).await;
        match verdict {
            Verdict::Met => {
                self.note_cut_offs(&branches, targets, &arena);
                // Read by each branch as it is dropped: one cut off while
                // reading its response hands it to the drain.
                cut_off.set(true);
                let cancelled = branches.cancel_running();
                self.stats.cancelled.add(cancelled as u64);
                self.write_joined(res, &mut branches, started)?;
            }
            Verdict::Failed | Verdict::Deadline => {
                let timed_out = verdict == Verdict::Deadline;
                self.write_failed(res, &mut branches, targets, timed_out, counted)?;
            }
        }
        drop(branches);
        self.bufs.put(shared);
        Ok(())
    }

    /// The part of the sub-requests that is the same for each: the request
    /// line first, then what follows `Host` (the forwarded fields, the
    /// framing and the body, read here), in one pooled buffer; and where
    /// the request line ends in it.
    async fn prepare(
        &self,
        req: &mut Request<'_>,
        target: OriginForm<'_>,
    ) -> io::Result<(Vec<u8>, usize)> {
        let method = req.method();
        let has_body = req.body_kind() != BodyKind::None;
        let headers = req.headers();
        let client = req.peer_addr().ok().map(|a| a.ip());
        let mut shared = self.bufs.take();
        write_request_line(&mut shared, method, target);
        let line_len = shared.len();
        let body: &[u8] = if has_body { req.body().await? } else { &[] };
        write_shared(
            &mut shared,
            headers,
            client,
            self.via.element(),
            body,
            has_body,
        );
        Ok((shared, line_len))
    }

    /// The upstream each branch starts on, round-robin over the `healthy`
    /// (not ejected) ones, in `arena`; a branch's retry updates its own.
    fn targets<'a>(&self, arena: &'a Bump, healthy: usize, at: Instant) -> &'a [Cell<Target>] {
        let width = self.config.width;
        let first = self.next.get() % healthy;
        self.next.set((first + width) % healthy);
        let all_in = healthy == self.upstreams.len();
        arena.alloc_slice_fill_with(width, |i| {
            let k = (first + i) % healthy;
            // With none ejected (the usual case) the k-th healthy one is the
            // k-th: no walk over the upstreams per branch.
            let upstream = if all_in { k } else { self.nth_healthy(k, at) };
            Cell::new(Target {
                upstream,
                moved_from: None,
            })
        })
    }

    /// Once the policy is met, counts a cut-off against each upstream a
    /// branch is still running on.
    fn note_cut_offs<F>(&self, branches: &Branches<'_, F>, targets: &[Cell<Target>], arena: &Bump)
    where
        F: Future<Output = Result<Reply, BranchError>>,
    {
        if !(0..targets.len()).any(|i| branches.is_running(i)) {
            return;
        }
        // Once per upstream: with more branches than upstreams, one lost
        // race would cut off several on one. Not for one whose branch here
        // ended (answered or failed): its branches were not all cut off.
        let noted = arena.alloc_slice_fill_with(self.upstreams.len(), |_| false);
        for (i, target) in targets.iter().enumerate() {
            if !branches.is_running(i) {
                noted[target.get().upstream % noted.len()] = true;
            }
        }
        for (i, target) in targets.iter().enumerate() {
            let upstream = target.get().upstream % noted.len();
            if branches.is_running(i) && !std::mem::replace(&mut noted[upstream], true) {
                self.cut_off(upstream);
            }
        }
    }

    /// The answer when the policy was met: 200 with a JSON array of the
    /// first replies the policy asked for, in branch order.
    fn write_joined<F>(
        &self,
        res: &mut Response<'_>,
        branches: &mut Branches<'_, F>,
        started: Instant,
    ) -> io::Result<()>
    where
        F: Future<Output = Result<Reply, BranchError>>,
    {
        let width = self.config.width;
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
        Ok(())
    }

    /// The answer when the policy cannot be met (`timed_out`: the deadline
    /// passed first): 502 or 504 with one line per branch that failed or
    /// was still running.
    fn write_failed<F>(
        &self,
        res: &mut Response<'_>,
        branches: &mut Branches<'_, F>,
        targets: &[Cell<Target>],
        timed_out: bool,
        counted: &[Cell<u64>],
    ) -> io::Result<()>
    where
        F: Future<Output = Result<Reply, BranchError>>,
    {
        bump(&self.stats.failed);
        let mut status = 504;
        res.header("Content-Type", b"text/plain; charset=utf-8")?;
        let out = res.body_mut();
        for (i, target) in targets.iter().enumerate() {
            match branches.output(i) {
                Some(Err(e)) => {
                    if e.failure.status() == 502 && !timed_out {
                        status = 502;
                    }
                    let moved_from = self.moved_from(e.moved_from);
                    write_failure(
                        out,
                        self.upstream_name(e.upstream),
                        &e.failure,
                        moved_from.as_ref().map(|(n, f)| (*n, f as _)),
                    );
                }
                None if timed_out && branches.is_running(i) => {
                    bump(&self.stats.deadline);
                    let Target {
                        upstream,
                        moved_from,
                    } = target.get();
                    self.log_failure(upstream, Failure::Deadline);
                    // A hung upstream fails this way only: it must
                    // count toward its ejection, or under `all` it
                    // would hold every request to the deadline.
                    self.record(upstream, false, counted);
                    let moved_from = self.moved_from(moved_from);
                    let upstream = self.upstream_name(upstream);
                    let moved_from = moved_from.as_ref().map(|(n, f)| (*n, f as _));
                    write_failure(out, upstream, &Failure::Deadline, moved_from);
                }
                _ => {}
            }
        }
        if !timed_out && status == 504 && out.is_empty() {
            status = 502;
        }
        let cancelled = branches.cancel_running();
        if !timed_out {
            self.stats.cancelled.add(cancelled as u64);
        }
        for i in 0..targets.len() {
            if let Some(Ok(reply)) = branches.take(i) {
                self.bufs.put(reply.buf);
            }
        }
        if status == 504 {
            bump(&self.stats.failed_504);
        }
        res.set_status(status);
        Ok(())
    }
}

impl Drop for FanOut {
    /// The stop summary. Drains still reading are closed by the stop
    /// after it (their tasks run once the core's connections are done), so
    /// it names them: `drain_closed` counts them only later.
    fn drop(&mut self) {
        let stats = self.stats();
        if stats == ProxyStats::default() {
            return;
        }
        let draining: usize = self.upstreams.iter().map(|u| u.pool.draining()).sum();
        if draining == 0 {
            tracing::info!("fanout {stats}");
        } else {
            tracing::info!("fanout {stats}; {draining} drains still reading, closed by the stop");
        }
    }
}
