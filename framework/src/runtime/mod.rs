//! The runtime's public face: the server and its cores (`crate::server`,
//! `crate::core`), and the functions that tasks call on their own core.

pub use crate::server::cpus;

use std::future::{poll_fn, Future};
use std::io;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;

mod blocking;
mod labeled;

pub use crate::core::messaging::{core_count, core_index, submit_to, SubmitError};
pub use crate::core::stopping::{shutdown_signal, ShutdownSignal};
pub use crate::core::watch::StallLabel;
pub use crate::histogram::{Histogram, HistogramSnapshot};
pub use crate::server::Readiness;
pub use crate::server::{
    log_to_stderr, move_connection, move_wanted, CoreContext, ListenerStats, MoveMeter,
    MoveOutcome, MovePolicy, MoveRefusal, Server, ServerBuilder, ServerHandle, StatsReader,
    Steering, SteeringStats, Stopper,
};
pub use crate::stats::{Counter, StatsSnapshot};
pub use blocking::{spawn_blocking, Blocking};
pub use labeled::{labeled, Labeled};

use crate::core::{config, context, shared};
use crate::executor::{JoinError, JoinHandle};
use crate::server::backend;
use crate::sync::Shutdown;
use crate::Backend;

/// Starts `future` as a new task on the current core.
///
/// The future need not be `Send`: it never leaves this core. Dropping the
/// returned handle lets the task run on, detached;
/// [`JoinHandle::abort`] ends it.
///
/// The task is not tied to its caller: it runs on when the handler that
/// spawned it returns, fails or is dropped, and keeps open what it holds
/// (a stream shared through an `Rc`) until it ends by itself, is aborted,
/// or the core stops. Work that belongs to one connection (two backend requests at
/// once, the two directions of a relay) runs inside the handler's task
/// with [`future::join`](crate::future::join),
/// [`future::try_join`](crate::future::try_join) or
/// [`future::select`](crate::future::select) instead, and ends with it.
///
/// # Panics
///
/// Outside a percore core thread.
pub fn spawn_local<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    crate::executor::current::with_executor(|executor| executor.spawn(future))
}

/// Runs `future` until it completes (`Some`) or the server begins its
/// graceful stop (`None`; the future is dropped, so it must be safe to
/// cancel, as percore's reads are: a read dropped loses no data). If both
/// are ready, the future's result wins, so a client that always has more
/// bytes ready (one that pipelines without pause) never lets it see the
/// stop: a handler that serves requests back to back also checks
/// [`is_shutting_down`] between them. For a connection that waits for its
/// client's next bytes, so that it ends at the stop instead of holding it
/// until the drain deadline:
///
/// ```no_run
/// use percore::{until_stopped, Connection, Handler};
///
/// struct Echo;
///
/// impl Handler for Echo {
///     async fn serve(&self, conn: Connection) -> std::io::Result<()> {
///         // `None`: the server is stopping; `Some(None)`: the client left.
///         while let Some(read) = until_stopped(conn.read()).await {
///             let Some(buf) = read? else { break };
///             let (res, _) = conn.write_all(buf).await;
///             res?;
///         }
///         Ok(())
///     }
/// }
///
/// fn main() -> std::io::Result<()> {
///     percore::Server::builder().serve(|_core| Echo)
/// }
/// ```
///
/// # Panics
///
/// When polled outside a percore core thread.
pub async fn until_stopped<F: Future>(future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    let mut stop = shutdown_signal();
    poll_fn(|cx| {
        if let Poll::Ready(out) = future.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        Pin::new(&mut stop).poll(cx).map(|()| None)
    })
    .await
}

/// Has `give_back` called on `cache` whenever this core gives memory
/// back, for as long as `cache` lives (the core holds it weakly).
///
/// A core gives memory back after a burst: once it has seen no I/O for
/// two seconds after seeing some, and once many of its connections have
/// closed since its busiest moment. It then frees the receive buffers it
/// keeps beyond a few, gives the pages of its idle ring buffers back to
/// the kernel, calls these hooks, and asks glibc's allocator to return
/// its free pages (`malloc_trim`). A cache that a burst grew (free lists
/// of buffers, arenas) should drop what it keeps there, so that the trim
/// that follows can return it: steady traffic, which would reuse it, does
/// not trigger a give-back. See `docs/operating.md`, "Memory after a
/// burst".
///
/// The hook runs on this core, outside any task; a panic in it is caught
/// and counted like a task's. Returns whether it was registered: `false`
/// outside a percore core thread.
///
/// # Examples
///
/// ```no_run
/// use std::cell::RefCell;
/// use std::rc::Rc;
///
/// /// Buffers a core's handlers reuse from request to request.
/// #[derive(Default)]
/// struct Scratch {
///     free: RefCell<Vec<Vec<u8>>>,
/// }
///
/// percore::block_on(percore::Backend::Auto, async {
///     let scratch = Rc::new(Scratch::default());
///     // On the core, once: the core keeps only a weak reference.
///     assert!(percore::on_give_back(&scratch, |s| s.free.borrow_mut().clear()));
///     // ... the core's tasks take from and return to `scratch`.
/// })
/// .unwrap();
/// ```
pub fn on_give_back<T: 'static>(cache: &Rc<T>, give_back: fn(&T)) -> bool {
    let cache = Rc::downgrade(cache);
    let hook = Box::new(move || match cache.upgrade() {
        Some(cache) => {
            give_back(&cache);
            true
        }
        None => false,
    });
    context::try_with_core(|core| core.on_give_back(hook)).is_some()
}

/// Whether this core's server is stopping (cheap; for a check per request).
///
/// # Panics
///
/// Outside a percore core thread.
pub fn is_shutting_down() -> bool {
    context::with_core(|core| core.is_shutting_down())
}

/// When this core's server gives up on its open connections: the end of
/// the graceful stop's drain ([`ServerBuilder::drain_timeout`] after the
/// stop began), when the tasks still serving connections are cancelled
/// (dropped) and their clients see the connection close with no answer.
/// `None` until the stop begins, outside a core, and on a core without a
/// server (as under [`block_on`]).
///
/// A handler whose work may outlast the drain reads it once it sees the
/// stop (through [`shutdown_signal`] or [`is_shutting_down`]) to answer in
/// time, say with a 503 a little before this instant; the HTTP layer of
/// `percore-handlers` does that. The instant is on the core's clock
/// ([`time::now`](crate::time::now)), as the drain's own timer is.
pub fn drain_deadline() -> Option<std::time::Instant> {
    context::try_with_core(|core| core.drain_deadline()).flatten()
}

/// Starts measuring this core's queue delay (see [`queue_delay`]); the
/// cores do not measure it unless asked, as it costs one clock read per
/// loop turn. Outside a core it does nothing.
pub fn track_queue_delay() {
    context::try_with_core(|core| core.track_queue_delay());
}

/// How long this core's last loop turn ran before it went back to the
/// kernel for more I/O, or, when the turns before it left ready tasks
/// for it (a turn polls at most a budget of them), since the earliest
/// of those began: a request whose bytes arrived then waited at least
/// this long to be read, so a core that cannot keep up shows it here
/// first. Zero until [`track_queue_delay`] was called on this core, and
/// outside a core. One read of a core-local cell; [`waited`] is the
/// same measure now, within the turn under way.
pub fn queue_delay() -> std::time::Duration {
    context::try_with_core(|core| core.queue_delay()).unwrap_or_default()
}

/// How long the work this core runs now has waited, at least: since the
/// start of this loop turn, or, when the turns before it left work
/// behind (more ready tasks than one turn polls, or completions the
/// kernel had due and kept for a later trip: io_uring delivers a batch
/// of its deferred ones per enter), since the start of the earliest turn
/// whose work has not all been done. A request read now arrived no later
/// than that. Zero until [`track_queue_delay`] was called on this core, and
/// outside a core. For load shedding (the HTTP layer's
/// `Config::shed_queue_delay`): one clock read.
pub fn waited() -> std::time::Duration {
    context::try_with_core(|core| core.waited()).unwrap_or_default()
}

/// Adds `n` to this core's request counter (shown in [`StatsSnapshot`]).
/// Protocol handlers call it; outside a core it does nothing.
pub fn count_requests(n: u64) {
    context::try_with_core(|core| core.shared.stats.requests.add(n));
}

/// This core's counters now, as [`StatsReader::snapshot`] gives each
/// core's (for a handler's own metrics or status endpoint; another core's
/// are a [`submit_to`] away). The gauges among them (`in_flight`,
/// `panics`, `cpu_time`) are as of the core's last loop turn, `cpu_time`
/// within 100 ms.
///
/// # Panics
///
/// Outside a percore core thread.
pub fn core_stats() -> StatsSnapshot {
    context::with_core(|core| core.shared.stats.snapshot(core.shared.cpu))
}

/// The backend the current core runs.
///
/// # Panics
///
/// Outside a percore core thread.
pub fn current_backend() -> Backend {
    context::with_core(|core| core.backend())
}

/// Runs `future` to completion on a core built on the current thread (not
/// pinned, no listener): for clients, tools and tests.
///
/// On io_uring, the kernel's clean-up of the core's ring after this returns
/// may interrupt one later blocking syscall of this thread (`EINTR`); code
/// that does blocking I/O with timeouts afterwards should retry on
/// `ErrorKind::Interrupted`, or call `block_on` from a thread of its own.
///
/// # Errors
///
/// When the backend cannot be set up (see [`Backend`]), or the future
/// panicked (the panic is reported as an error).
pub fn block_on<F>(backend: Backend, future: F) -> io::Result<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let config = config::CoreConfig::default();
    let backend = backend::resolve(backend, &config)?;
    let wake_fd = Arc::new(crate::sys::eventfd()?);
    let cpu = core_affinity::get_core_ids()
        .and_then(|ids| ids.first().map(|id| id.id))
        .unwrap_or(0);
    let shared = Arc::new(shared::CoreShared::new(
        cpu,
        wake_fd,
        Arc::new(Shutdown::new()),
    ));
    shared::CoreShared::link(std::slice::from_ref(&shared));
    let core = crate::core::Core::new(shared, backend, &config)?;
    crate::core::Core::block_on(core, future)
        .map_err(|e: JoinError| io::Error::other(e.to_string()))
}
