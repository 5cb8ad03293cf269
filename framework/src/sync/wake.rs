//! The path of a wake, from a task's waker to the core that owns the task,
//! and that core's decision to block in the kernel.
//!
//! A wake first flips the task's scheduled flag ([`TaskState::wake`]); only
//! the wake that flips it queues the task, so a task is queued at most once
//! at a time. On the thread that runs the owner core the task goes to the
//! local run queue (no lock, no atomics); from any other thread its key goes
//! to the owner's wake inbox and the owner is unparked
//! ([`wake_remote`]).
//!
//! A core with nothing left to run ends its loop turn in [`CoreSide::park`]:
//! it announces the park, looks once more at both inboxes and the stop
//! latch ([`CoreSide::has_work`]), and waits in the kernel only if all are
//! empty (see [`Parker`] for why that order loses no wake).
//!
//! Everything here is generic over the parts that are not cross-thread code:
//! the task handle and its thread-local run queue ([`Waking`]), and the
//! driver's trip to the kernel (a closure). The executor, the runtime and
//! the loom models instantiate these very functions; in the framework each
//! instance is monomorphised and inlined into its caller.

use std::task::Waker;
use std::time::Duration;

use super::{Notify, Parker, PushError, Remote, Shutdown, TaskState};

/// A handle to a task, as its wakers hold it.
pub trait Waking {
    /// The task's scheduled flag.
    fn state(&self) -> &TaskState;

    /// Queues the task on its owner core's run queue if the calling thread
    /// runs that core; hands the handle back otherwise.
    ///
    /// # Errors
    ///
    /// The handle, when the calling thread does not run the owner core.
    fn schedule_local(self) -> Result<(), Self>
    where
        Self: Sized;

    /// Queues the task for its owner from another thread: its key in the
    /// owner's wake inbox, then an unpark ([`wake_remote`]).
    fn schedule_remote(&self);
}

/// Wakes `task` ([`Wake::wake`](std::task::Wake::wake)): the wake that
/// flips the scheduled flag queues it, locally if the calling thread runs
/// its owner core, remotely otherwise.
#[inline]
pub fn wake<T: Waking>(task: T) {
    if !task.state().wake() {
        return;
    }
    if let Err(task) = task.schedule_local() {
        task.schedule_remote();
    }
}

/// [`wake`] through a reference: the handle is cloned only when the wake
/// flipped the flag (a wake of a task already queued costs one atomic swap).
#[inline]
pub fn wake_by_ref<T: Waking + Clone>(task: &T) {
    if !task.state().wake() {
        return;
    }
    if let Err(task) = task.clone().schedule_local() {
        task.schedule_remote();
    }
}

/// What other threads share with one core: its parker, its two inboxes
/// (task wakes `K`, cross-core messages `M`) and the server's stop latch.
/// Borrowed from the runtime's per-core shared state; building one costs
/// nothing once inlined.
pub struct CoreSide<'a, K, M, N> {
    /// The core's park/unpark handshake.
    pub parker: &'a Parker<N>,
    /// Keys of tasks woken from other threads.
    pub wakes: &'a Remote<K>,
    /// Messages from other cores.
    pub mailbox: &'a Remote<M>,
    /// The server's stop latch.
    pub shutdown: &'a Shutdown,
}

impl<K, M, N> Clone for CoreSide<'_, K, M, N> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, M, N> Copy for CoreSide<'_, K, M, N> {}

impl<K, M, N> std::fmt::Debug for CoreSide<'_, K, M, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreSide")
            .field("wakes", self.wakes)
            .field("mailbox", self.mailbox)
            .field("shutdown", self.shutdown)
            .finish_non_exhaustive()
    }
}

/// Queues the wake of the task `key` names, from a thread that does not
/// run the core, and wakes the core.
///
/// The wake inbox has no capacity limit, and this never refuses a key
/// for room, whatever the inbox was built with. The caller already set
/// the task's scheduled flag, so a dropped key would leave the task
/// never polled again (no later wake queues a task whose flag is set);
/// clearing the flag instead would still lose this wake's event, and a
/// waker cannot wait for room (`wake` is synchronous, and the core it
/// runs on may be the one that would have to drain). No limit is
/// needed: a task is queued only by the wake that flips its flag, and
/// the flag is cleared only when the task is polled, after its key
/// left the inbox, so the inbox holds at most one key per task (plus,
/// until the next drain, one per task that ended meanwhile), the
/// same bound as the local run queue.
#[inline]
pub fn wake_remote<K, N: Notify>(wakes: &Remote<K>, parker: &Parker<N>, key: K) {
    // Err: the core stopped (closed the inbox), its tasks are gone.
    if wakes.push_unbounded(key).is_ok() {
        parker.unpark();
    }
}

impl<K, M, N: Notify> CoreSide<'_, K, M, N> {
    /// Queues `message` for the core and wakes it. When the mailbox is full
    /// `waker` (if any) is registered and woken once the core drains it.
    ///
    /// # Errors
    ///
    /// [`PushError::Full`] or [`PushError::Closed`], with the message.
    #[inline]
    pub fn send(&self, message: M, waker: Option<&Waker>) -> Result<(), PushError<M>> {
        self.mailbox.push_or_wait(message, waker)?;
        self.parker.unpark();
        Ok(())
    }

    /// Whether a core that announced its park has work after all: an item
    /// in either inbox (checked under their locks), or a stop it has not
    /// yet seen (`shutdown_seen`: whether its loop already acted on it).
    #[inline]
    pub fn has_work(&self, shutdown_seen: bool) -> bool {
        self.wakes.has_items()
            || self.mailbox.has_items()
            || (self.shutdown.is_triggered() && !shutdown_seen)
    }

    /// The end of a loop turn: one trip to the kernel through `wait`,
    /// which waits at most the timeout it is given (`None`: no limit, zero:
    /// does not block) for I/O, a timer or a notification.
    ///
    /// A zero `timeout` (tasks are still ready) goes straight to the
    /// kernel. Otherwise the core announces its park and re-checks
    /// [`has_work`](Self::has_work): with work, it only polls the kernel
    /// (zero timeout); without, it waits `timeout`, and any wake or stop
    /// from now on notifies it.
    #[inline]
    pub fn park(
        &self,
        timeout: Option<Duration>,
        shutdown_seen: bool,
        wait: impl FnOnce(Option<Duration>),
    ) {
        if timeout == Some(Duration::ZERO) {
            wait(timeout);
        } else if self.parker.prepare_park(|| self.has_work(shutdown_seen)) {
            wait(timeout);
            self.parker.finish_park();
        } else {
            wait(Some(Duration::ZERO));
        }
    }
}
