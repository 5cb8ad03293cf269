//! What each core of a server runs: the accept loop, connection tasks,
//! and the graceful drain.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::io;
use std::os::fd::OwnedFd;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use super::give_back::{self, Level};
use super::handshakes::Handshaking;
use super::listen::{ListenerCounters, Spawner};
use super::moving::HomeGuard;
use super::plain_http;
use super::SocketFile;
use crate::core::{context, stopping};
use crate::net::{Acceptor, Stream};
use crate::sync::CountDown;
use crate::Handler;

/// One listener as a core serves it: its socket, how it serves a
/// connection, and its counters.
pub(crate) struct CoreListener {
    pub(crate) acceptor: Acceptor,
    /// Shared with the core's registry of listeners that connections
    /// moved here are served by (see `moving`).
    pub(crate) spawn: Rc<Spawner>,
    /// While the core's turns run past it, no accepts (see
    /// [`Handler::overload_bound`](crate::Handler::overload_bound)).
    pub(crate) overload_bound: Option<Duration>,
    pub(crate) counters: Arc<ListenerCounters>,
    /// Removed when the last core's listener on it is gone.
    pub(crate) _file: Option<Arc<SocketFile>>,
}

/// Limits one core applies to its connections.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServeLimits {
    pub(crate) max_connections: usize,
    pub(crate) drain_timeout: Duration,
    /// The listen backlog: the most connections a listener can hold queued.
    pub(crate) backlog: usize,
    /// Whether, and how, the core moves connections to idler cores.
    pub(crate) moving: Option<super::MovePolicy>,
}

/// Counts a core's open connections and wakes whoever waits for the count
/// to drop (the accept loop at the limit, the drain at shutdown).
#[derive(Default)]
pub(super) struct Tracker {
    pub(super) level: Level,
    /// Datagram handlers running: drained at a stop as connections are,
    /// but no connections (they hold no place under the limit).
    datagram_tasks: Cell<usize>,
    waiter: RefCell<Option<Waker>>,
}

/// Counts a connection open (on its core and its listener) until dropped.
pub(crate) struct ConnGuard {
    tracker: Rc<Tracker>,
    counters: Arc<ListenerCounters>,
}

impl ConnGuard {
    /// Counts a connection that another core moved here open, on this
    /// core and its listener.
    pub(super) fn adopted(tracker: &Rc<Tracker>, counters: &Arc<ListenerCounters>) -> ConnGuard {
        context::with_core(|core| {
            core.shared.stats.active.add(1);
            core.shared.stats.moved_in.add(1);
        });
        counters.adopted();
        tracker.level.opened();
        ConnGuard {
            tracker: tracker.clone(),
            counters: counters.clone(),
        }
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let tracker = &self.tracker;
        self.counters.closed();
        if tracker.level.closed_and_fell() {
            give_back::now();
        }
        context::try_with_core(|core| core.shared.stats.active.sub(1));
        if let Some(w) = tracker.waiter.borrow_mut().take() {
            w.wake();
        }
    }
}

impl Tracker {
    /// Waits until no connection is open and no datagram handler runs.
    async fn drained(&self) {
        poll_fn(|cx| {
            if self.level.active.get() == 0 && self.datagram_tasks.get() == 0 {
                Poll::Ready(())
            } else {
                *self.waiter.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }
        })
        .await;
    }

    /// Connections open.
    pub(super) fn active(&self) -> usize {
        self.level.active.get()
    }

    /// Waits until fewer than `limit` connections are open.
    async fn below(&self, limit: usize) {
        poll_fn(|cx| {
            if self.level.active.get() < limit {
                Poll::Ready(())
            } else {
                *self.waiter.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }
        })
        .await;
    }
}

/// Runs until the server stops, then drains connections up to the
/// deadline, and stays until the other cores have drained too.
pub(crate) async fn serve_core(
    listeners: Vec<CoreListener>,
    datagrams: Vec<super::datagram::DatagramTask>,
    limits: ServeLimits,
    draining: DrainGuard,
    (tracker, home): (Rc<Tracker>, HomeGuard),
) {
    for task in datagrams {
        spawn_datagram_task(task, &tracker);
    }
    if let Some(policy) = limits.moving {
        super::moving::spawn_policy(policy);
    }
    {
        // The stop is polled first: once it has come, the accept loops are
        // not polled again, and `take_queued` takes what is left.
        let stopping = pin!(stopping::shutdown_signal());
        let mut loops: Vec<_> = listeners
            .iter()
            .map(|listener| Box::pin(accept_loop(listener, &tracker, limits)))
            .collect();
        let accepting = pin!(poll_fn(|cx| {
            for accept in &mut loops {
                let _never_ends = accept.as_mut().poll(cx);
            }
            Poll::<()>::Pending
        }));
        race(stopping, accepting).await;
    }
    // No connection moves here from now on.
    drop(home);
    // Stop accepting first: serve the connections that were complete when
    // the stop came, then close the listeners. Only a connection completed
    // between the last accept and the close is reset.
    for listener in &listeners {
        take_queued(listener, &tracker, limits);
    }
    drop(listeners);
    // The instant handlers see in `drain_deadline()` (set by the turn that
    // saw the stop), so that one answering just before it is not cancelled
    // first.
    let deadline = context::with_core(|core| core.drain_deadline()).unwrap_or_else(|| {
        let now = crate::time::now();
        now.checked_add(limits.drain_timeout)
            .unwrap_or(now + crate::time::current::CENTURY)
    });
    let open = tracker.level.active.get();
    if open > 0 || tracker.datagram_tasks.get() > 0 {
        if open > 0 {
            tracing::info!(open, drain = ?limits.drain_timeout, "draining connections");
        }
        let drained = crate::time::timeout_at(deadline, tracker.drained()).await;
        if drained.is_err() {
            tracing::warn!(
                left = tracker.level.active.get(),
                "drain deadline passed; cancelling the remaining connections"
            );
        }
    }
    draining.wait_for_peers(deadline).await;
}

/// This core's place in its server's count of cores still draining.
/// Counted out when dropped, if not before, so that a core that fails or
/// is cancelled does not hold the others until their deadline.
pub(crate) struct DrainGuard {
    count: Arc<CountDown>,
    counted: Cell<bool>,
}

impl DrainGuard {
    pub(crate) fn new(count: Arc<CountDown>) -> Self {
        DrainGuard {
            count,
            counted: Cell::new(false),
        }
    }

    fn count_out(&self) {
        if !self.counted.replace(true) {
            self.count.count_out();
        }
    }

    /// Counts this core out, then keeps it running (its mailbox served)
    /// until every core of the server has drained, or `deadline`: a
    /// connection still draining on another core may need this one to
    /// answer a cross-core call.
    async fn wait_for_peers(&self, deadline: Instant) {
        self.count_out();
        let all = poll_fn(|cx| self.count.poll_zero(cx));
        if crate::time::timeout_at(deadline, all).await.is_err() {
            tracing::debug!("drain deadline passed while other cores were still draining");
        }
    }
}

impl Drop for DrainGuard {
    fn drop(&mut self) {
        self.count_out();
    }
}

/// Polls both futures; completes when either does.
async fn race<A: Future, B: Future>(mut a: std::pin::Pin<&mut A>, mut b: std::pin::Pin<&mut B>) {
    poll_fn(|cx| {
        if a.as_mut().poll(cx).is_ready() || b.as_mut().poll(cx).is_ready() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
}

/// A spare descriptor, closed to make room to accept-and-close a queued
/// client when the process is out of fds, so that client gets a prompt
/// close instead of hanging in the backlog.
fn reserve_fd() -> Option<OwnedFd> {
    std::fs::File::open("/dev/null").ok().map(OwnedFd::from)
}

async fn accept_loop(listener: &CoreListener, tracker: &Rc<Tracker>, limits: ServeLimits) {
    let stats = context::with_core(|core| core.shared.stats.clone());
    let mut reserve = reserve_fd();
    let mut backoff = Duration::ZERO;
    let mut last_warning: Option<Instant> = None;
    let mut last_limit_warning: Option<Instant> = None;
    loop {
        if tracker.level.active.get() >= limits.max_connections {
            stats.accept_paused.add(1);
            // A core that sits at its limit pauses on every accept: say so
            // now and then, not each time.
            let now = Instant::now();
            if last_limit_warning.is_none_or(|t| now.duration_since(t) >= LIMIT_WARNING_EVERY) {
                last_limit_warning = Some(now);
                tracing::warn!(
                    max_connections = limits.max_connections,
                    "connection limit reached: accepting paused until a connection closes \
                     (`accept_paused` in the stats counts the pauses)"
                );
            }
            listener.acceptor.pause_accepting();
            tracker.below(limits.max_connections).await;
        }
        if let Some(bound) = listener.overload_bound {
            if super::overload::overloaded(bound) {
                stats.accept_held.add(1);
                listener.acceptor.pause_accepting();
                super::overload::hold(bound).await;
            }
        }
        match listener.acceptor.accept().await {
            Ok(stream) => {
                backoff = Duration::ZERO;
                if reserve.is_none() {
                    reserve = reserve_fd();
                }
                serve_accepted(listener, stream, tracker, &stats);
            }
            Err(e) => {
                let errno = e.raw_os_error();
                let fd_limit = matches!(errno, Some(libc::EMFILE) | Some(libc::ENFILE));
                if crate::op::accept::is_transient(&e) {
                    continue;
                }
                if fd_limit {
                    stats.errors_fd_limit.add(1);
                    // Free the spare fd, take one queued client and close it.
                    drop(reserve.take());
                    if let Ok(fd) = crate::sys::accept(listener.acceptor.borrow_fd()) {
                        drop(fd);
                    }
                    reserve = reserve_fd();
                } else {
                    stats.errors_accept.add(1);
                }
                backoff = (backoff * 2).clamp(Duration::from_millis(5), Duration::from_secs(1));
                let now = Instant::now();
                if last_warning.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1)) {
                    last_warning = Some(now);
                    log_accept_error(&e, fd_limit, backoff);
                }
                crate::time::sleep(backoff).await;
            }
        }
    }
}

/// Least time between two "connection limit reached" warnings of a core.
const LIMIT_WARNING_EVERY: Duration = Duration::from_secs(10);

/// Serves a TLS listener's connection on its own task: the handshake
/// first, then the handler, with the encrypted stream. The handshake has
/// a place among the core's (see [`handshakes`](super::handshakes)),
/// a deadline for the client's first byte and one for the whole; a
/// failure closes the connection, with a debug line and a count, and so
/// does plain HTTP, once answered.
pub(crate) fn spawn_tls_connection<H: Handler>(
    stream: Stream,
    handler: &Rc<H>,
    guard: ConnGuard,
    tls: super::listen::TlsSetup,
) {
    let handshaking = Handshaking::enter(tls.max_handshakes);
    let handler = handler.clone();
    crate::executor::current::with_executor(|executor| {
        executor.spawn_detached(async move {
            let _guard = guard;
            let handshake = crate::time::timeout(tls.timeout, accept(stream, &tls, &handshaking));
            let done = handshaking.unless_evicted(handshake).await;
            drop(handshaking);
            let stream = match done {
                Some(Ok(Ok(Some(stream)))) => stream,
                // Plain HTTP, answered: counted and logged by `refuse`.
                Some(Ok(Ok(None))) => return,
                // Counted and logged by the eviction.
                None => return,
                Some(failed) => {
                    context::try_with_core(|core| core.shared.stats.tls_failures.add(1));
                    match failed {
                        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed; closing"),
                        _ => tracing::debug!(
                            timeout = ?tls.timeout,
                            "TLS handshake timed out; closing"
                        ),
                    }
                    return;
                }
            };
            context::try_with_core(|core| core.shared.stats.tls_handshakes.add(1));
            if let Err(e) = handler.serve(stream).await {
                context::try_with_core(|core| core.shared.stats.errors_io.add(1));
                tracing::debug!(error = %e, "connection ended with an error");
            }
        })
    });
}

/// A TLS connection's handshake: its first bytes within the first-byte
/// deadline (the place stops being silent then), and the rest. `None`
/// when the first bytes were a plain HTTP request, answered with a 400
/// in the clear (see [`plain_http`](super::plain_http)).
async fn accept(
    stream: Stream,
    tls: &super::listen::TlsSetup,
    handshaking: &Handshaking,
) -> io::Result<Option<Stream>> {
    let first = match crate::time::timeout(tls.first_byte_timeout, stream.read()).await {
        Ok(read) => read?,
        Err(_) => {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "no byte within {:?} of the connection",
                    tls.first_byte_timeout
                ),
            ))
        }
    };
    let Some(first) = first else {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the peer closed the connection before the TLS handshake",
        ));
    };
    handshaking.started();
    if plain_http::looks_like_http(&first) {
        // Its buffer goes back before the drain reads more.
        drop(first);
        plain_http::refuse(&stream).await;
        return Ok(None);
    }
    stream
        .accept_tls_from(tls.config.clone(), first)
        .await
        .map(Some)
}

/// Counts an accepted connection and hands it to its listener's handler.
fn serve_accepted(
    listener: &CoreListener,
    stream: Stream,
    tracker: &Rc<Tracker>,
    stats: &Arc<crate::stats::CoreStats>,
) {
    stats.accepted.add(1);
    stats.active.add(1);
    listener.counters.opened();
    tracker.level.opened();
    let guard = ConnGuard {
        tracker: tracker.clone(),
        counters: listener.counters.clone(),
    };
    (listener.spawn)(stream, guard, super::listen::Arrival::Accepted);
}

/// Serves a connection on its own task, counted (by `guard`) until it
/// ends.
///
/// The stream comes in a box, freed as soon as the stream moves into the
/// handler's future: what an `async` block captures keeps its room in the
/// task for as long as the task lives, and a connection's task is most of
/// what an idle connection costs.
pub(crate) fn spawn_connection<H: Handler>(stream: Stream, handler: &Rc<H>, guard: ConnGuard) {
    let handler = handler.clone();
    let stream = Box::new(stream);
    crate::executor::current::with_executor(|executor| {
        executor.spawn_detached(async move {
            let _guard = guard;
            let stream: Stream = {
                let boxed = stream;
                *boxed
            };
            if let Err(e) = handler.serve(stream).await {
                context::try_with_core(|core| core.shared.stats.errors_io.add(1));
                tracing::debug!(error = %e, "connection ended with an error");
            }
        })
    });
}

/// Serves a connection moved here on its own task, counted (by `guard`)
/// until it ends, as [`spawn_connection`]
/// serves an accepted one.
pub(crate) fn spawn_moved<H: Handler>(
    stream: Stream,
    handler: &Rc<H>,
    guard: ConnGuard,
    state: crate::handler::MovedState,
) {
    let handler = handler.clone();
    crate::executor::current::with_executor(|executor| {
        executor.spawn_detached(async move {
            let _guard = guard;
            if let Err(e) = handler.serve_moved(stream, state).await {
                context::try_with_core(|core| core.shared.stats.errors_io.add(1));
                tracing::debug!(error = %e, "connection ended with an error");
            }
        })
    });
}

/// Runs a core's datagram handler on its own task, counted among the
/// core's open work (so that a stop drains it as it drains connections),
/// though not as a connection in the stats.
fn spawn_datagram_task(task: super::datagram::DatagramTask, tracker: &Rc<Tracker>) {
    tracker.datagram_tasks.set(tracker.datagram_tasks.get() + 1);
    let guard = TaskGuard {
        tracker: tracker.clone(),
    };
    crate::executor::current::with_executor(|executor| {
        executor.spawn_detached(async move {
            let _guard = guard;
            if let Err(e) = task.await {
                context::try_with_core(|core| core.shared.stats.errors_io.add(1));
                tracing::warn!(error = %e, "a datagram handler ended with an error");
            }
        })
    });
}

/// Counts a datagram task open on its core until dropped.
struct TaskGuard {
    tracker: Rc<Tracker>,
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        let tasks = &self.tracker.datagram_tasks;
        tasks.set(tasks.get() - 1);
        if let Some(w) = self.tracker.waiter.borrow_mut().take() {
            w.wake();
        }
    }
}

/// At a stop: serves the connections already complete in the listener
/// (up to the connection limit), so closing it resets none of them. Past
/// the limit, the rest are taken and closed, to count them in the log;
/// unless the kernel hands a closing listener's queue to another listener
/// on the port (`tcp_migrate_req`): then the kernel's queue is left to the
/// close, for a server taking this one's place to serve.
fn take_queued(listener: &CoreListener, tracker: &Rc<Tracker>, limits: ServeLimits) {
    let stats = context::with_core(|core| core.shared.stats.clone());
    let mut taken = 0usize;
    let mut unserved = 0usize;
    let hand_over = super::bind::listeners_hand_over();
    let mut left_to_kernel = false;
    // Bounded by the backlog, so that clients still connecting cannot keep
    // a stopping core here.
    while taken + unserved < limits.backlog {
        let at_limit = tracker.level.active.get() >= limits.max_connections;
        left_to_kernel = at_limit && hand_over;
        match listener.acceptor.accept_queued(!left_to_kernel) {
            Some(Ok(stream)) if tracker.level.active.get() < limits.max_connections => {
                serve_accepted(listener, stream, tracker, &stats);
                taken += 1;
            }
            Some(Ok(_closed)) => unserved += 1,
            Some(Err(e)) if crate::op::accept::is_transient(&e) => {}
            Some(Err(e)) => {
                stats.errors_accept.add(1);
                tracing::warn!(error = %e, "stopping: could not take the connections queued in the listener; they are reset");
                break;
            }
            None => break,
        }
    }
    if taken > 0 {
        tracing::info!(
            taken,
            "stopping: serving the connections that were queued in the listener"
        );
    }
    if unserved > 0 {
        stats.closed_unserved.add(unserved as u64);
        tracing::warn!(
            unserved,
            max_connections = limits.max_connections,
            "stopping: the connection limit is reached; the connections queued in the listener were closed unserved"
        );
    }
    if left_to_kernel {
        tracing::info!(
            max_connections = limits.max_connections,
            "stopping: the connection limit is reached; any connections still queued in the \
             listener go to another server on the port, if there is one (tcp_migrate_req=1)"
        );
    }
}

fn log_accept_error(e: &io::Error, fd_limit: bool, backoff: Duration) {
    if fd_limit {
        tracing::warn!(
            error = %e,
            ?backoff,
            "out of file descriptors: pausing accept (raise ulimit -n or lower max_connections)"
        );
    } else {
        tracing::warn!(error = %e, ?backoff, "accept failed; retrying after a pause");
    }
}
