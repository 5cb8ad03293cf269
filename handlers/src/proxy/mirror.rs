//! Mirroring (shadow traffic): a copy of every fanned-out
//! request goes to a shadow upstream, whose answer is read in full and
//! thrown away.
//!
//! The copy never holds up the client. The request's task only serialises
//! it into a reused buffer and queues it; a few worker tasks per core
//! ([`WORKERS`]) send the queued copies over their own keep-alive pool and
//! read the answers. So a slow shadow delays neither the primary answer nor
//! the next request on the same client connection (the nginx `mirror`
//! pitfall), and its failures only count (`mirrored`, `mirror_failed`
//! and `mirror_dropped` in [`ProxyStats`](super::ProxyStats)) and log a
//! rate-limited WARN (`warn.rs`), never reaching a client.
//! At most [`Config::mirror_max_pending`](super::Config) copies wait or
//! are in flight per core; beyond that a copy is dropped, never queued
//! without bound. Each shadow exchange has the proxy's connect timeout and
//! deadline. In steady state nothing is allocated: buffers and workers are
//! reused.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use percore::net::Endpoint;
use percore::time::{now, timeout};

use super::scratch::BufPool;
use super::stats::{bump, Counters};
use super::upstream::Upstream;
use super::warn::{FailureLog, Reason, Role};
use super::PoolConfig;
use crate::client::connect::connect;
use crate::client::exchange::{Exchange, Failure, ResponseLimits};
use percore_http1::forward::write_request;

/// Shadow exchanges in flight at once per core.
pub(crate) const WORKERS: usize = 8;

/// One queued copy: the serialised request and whether it is a HEAD.
type QueuedCopy = (Vec<u8>, bool);

/// A core's mirror: the shadow upstream, the queue of copies and the
/// workers that send them.
#[derive(Debug)]
pub(crate) struct Mirror {
    upstream: Upstream,
    queue: RefCell<VecDeque<QueuedCopy>>,
    /// Workers waiting for a copy.
    idle: RefCell<Vec<Waker>>,
    workers: Cell<usize>,
    /// Copies queued or in flight.
    pending: Cell<usize>,
    max_pending: usize,
    limits: ResponseLimits,
    connect_timeout: Duration,
    deadline: Duration,
    bufs: BufPool,
    /// The core's counters (`mirrored`, `mirror_failed`, `mirror_dropped`
    /// are the mirror's), shared with its fan-out.
    stats: Arc<Counters>,
    /// The core's rate-limited failure lines, shared with its fan-out.
    log: Rc<FailureLog>,
}

/// What a [`Mirror`] is built from.
#[derive(Debug, Clone)]
pub(crate) struct MirrorSettings {
    pub(crate) addr: Endpoint,
    pub(crate) pool: PoolConfig,
    pub(crate) max_pending: usize,
    pub(crate) limits: ResponseLimits,
    pub(crate) connect_timeout: Duration,
    pub(crate) deadline: Duration,
}

impl Mirror {
    pub(crate) fn new(s: MirrorSettings, log: Rc<FailureLog>, stats: Arc<Counters>) -> Self {
        Self {
            upstream: Upstream::new(s.addr, s.pool, None),
            queue: RefCell::new(VecDeque::with_capacity(s.max_pending)),
            idle: RefCell::new(Vec::with_capacity(WORKERS)),
            workers: Cell::new(0),
            pending: Cell::new(0),
            max_pending: s.max_pending,
            limits: s.limits,
            connect_timeout: s.connect_timeout,
            deadline: s.deadline,
            bufs: BufPool::default(),
            stats,
            log,
        }
    }

    /// Frees the buffers kept for copies (the core gives memory back).
    pub(crate) fn give_back(&self) {
        self.bufs.clear();
    }

    /// Queues a copy of a request (`line` and `shared` as for the
    /// branches), or drops it when [`Mirror::max_pending`] copies are
    /// already pending. Returns at once: the copy is sent by a worker.
    pub(crate) fn submit(self: &Rc<Self>, line: &[u8], shared: &[u8], head_only: bool) {
        if self.pending.get() >= self.max_pending {
            bump(&self.stats.mirror_dropped);
            return;
        }
        self.pending.set(self.pending.get() + 1);
        let mut buf = self.bufs.take();
        write_request(&mut buf, line, &self.upstream.host_line, shared);
        self.queue.borrow_mut().push_back((buf, head_only));
        // Take the waker out before waking: no borrow is held while the
        // executor queues the worker.
        let idle = self.idle.borrow_mut().pop();
        match idle {
            Some(worker) => worker.wake(),
            None if self.workers.get() < WORKERS => {
                self.workers.set(self.workers.get() + 1);
                let mirror = self.clone();
                // Detached: it lives as long as the core.
                drop(percore::spawn_local(async move { mirror.work().await }));
            }
            // Every worker is busy: one takes the copy when it is done.
            None => {}
        }
    }

    /// A worker: sends queued copies one after another, forever.
    async fn work(&self) {
        loop {
            let (buf, head_only) = self.next_copy().await;
            let failure = match timeout(self.deadline, self.send(buf, head_only)).await {
                Ok(Ok(status)) if status < 500 => None,
                Ok(Ok(status)) => Some(Reason::Status(status)),
                Ok(Err(failure)) => Some(Reason::Failed(failure)),
                Err(_) => Some(Reason::Failed(Failure::Deadline)),
            };
            match failure {
                None => bump(&self.stats.mirrored),
                Some(reason) => {
                    bump(&self.stats.mirror_failed);
                    let name = &self.upstream.name;
                    self.log.failed(now(), Role::Mirror, name, reason);
                }
            }
            self.pending.set(self.pending.get() - 1);
        }
    }

    async fn next_copy(&self) -> QueuedCopy {
        poll_fn(|cx| match self.queue.borrow_mut().pop_front() {
            Some(copy) => Poll::Ready(copy),
            None => {
                let mut idle = self.idle.borrow_mut();
                if !idle.iter().any(|w| w.will_wake(cx.waker())) {
                    idle.push(cx.waker().clone());
                }
                Poll::Pending
            }
        })
        .await
    }

    /// One shadow exchange; the shadow's status, or why there was none.
    /// The connection goes back to the pool only after a complete answer
    /// (a timed-out exchange drops it with the future).
    async fn send(&self, buf: Vec<u8>, head_only: bool) -> Result<u16, Failure> {
        let pooled = self.upstream.pool.checkout(now());
        let conn = match pooled {
            Some(conn) => conn,
            None => match connect(&self.upstream.addr, None, self.connect_timeout).await {
                Ok(conn) => conn,
                Err(failure) => {
                    self.bufs.put(buf);
                    return Err(failure);
                }
            },
        };
        let mut exchange = match Exchange::send(conn, buf, self.limits, head_only).await {
            Ok(exchange) => exchange,
            Err((e, buf)) => {
                self.bufs.put(buf);
                return Err(e.failure);
            }
        };
        let result = exchange.answer().await;
        let (conn, buf) = exchange.into_parts();
        self.bufs.put(buf);
        let answer = result.map_err(|e| e.failure)?;
        if answer.reusable {
            self.upstream.pool.release(conn, now());
        }
        Ok(answer.status)
    }
}
