//! A task: its scheduling header and its future in one allocation.
//!
//! The allocation is an `Arc` because wakers may travel to other threads,
//! but those threads only ever touch the [`TaskHeader`]: the scheduled
//! flag, the key and the owner core's inbox. The future never leaves its
//! core: only the owner's executor polls it or drops it, and it drops it
//! (in place) before it lets go of the task, so whichever thread frees the
//! allocation last frees no future.
//!
//! Why one allocation: a wake-up and the poll that follows then touch the
//! same few cache lines. With a thousand connections per core, a header,
//! a slab slot and a boxed future kept apart each cost a cache miss per
//! poll.
//!
//! Waking on the owner thread queues the task itself on the local run queue
//! (no lock); waking from any other thread queues its key in the owner's
//! inbox and unparks the core. That decision is [`crate::sync::wake`]'s,
//! which the loom models check; this file only plugs the task into it.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use super::join;
use super::owner::Owner;
use crate::sync::wake::{self, Waking};
use crate::sync::TaskState;

/// Names one task on one core; the generation tells a reused slab slot
/// apart from the task that held it before, so stale wakes are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TaskKey {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

/// What any thread may touch.
pub(crate) struct TaskHeader {
    pub(crate) key: TaskKey,
    pub(crate) state: TaskState,
    pub(crate) owner: Arc<Owner>,
}

/// `repr(C)`: the header, the cell's borrow flag and the start of the
/// future stay together at the front, next to the `Arc`'s counts, rather
/// than wherever field reordering puts a future of several KiB.
#[repr(C)]
pub(crate) struct Task<F: Future> {
    header: TaskHeader,
    /// Set when the task aborted itself during a poll (see
    /// [`Runnable::abort`]): its next poll drops the future. Owner core only.
    aborted: Cell<bool>,
    /// `None` once the task finished or was cancelled. Owner core only.
    future: RefCell<Option<Running<F>>>,
}

/// The spawned future and where its output goes. The task polls the
/// future itself and fills the join slot when it completes: an `async`
/// block awaiting the future would be twice its size (rustc keeps a
/// captured future beside the awaited one), and a connection's future is
/// most of its memory. The slot's `Rc` lives and dies with the future, on
/// the owner core. A detached task has no slot: nobody awaits its output.
struct Running<F: Future> {
    output: Option<join::Shared<F::Output>>,
    future: F,
}

// SAFETY: a `Task` is shared across threads only through its wakers, and
// `Wake` touches nothing but the header (an atomic flag, a `Copy` key and an
// `Arc` of thread-safe core state). The `Cell`, the `RefCell` and the
// future in it are reached only through `Runnable`, whose methods only the owner core's
// executor calls: the executor is neither `Send` nor `Sync`, so it and the
// `Arc<dyn Runnable>` handles it keeps stay on that thread. The executor
// drops every future on that thread (task end, `cancel_all`, its own
// `Drop`), so the last `Arc` dropped elsewhere finds `None` and drops no
// `!Send` value.
unsafe impl<F: Future> Send for Task<F> {}
// SAFETY: as above: other threads get `&Task` only to wake it.
unsafe impl<F: Future> Sync for Task<F> {}

impl<F: Future + 'static> Task<F> {
    pub(crate) fn new(
        key: TaskKey,
        owner: Arc<Owner>,
        output: Option<join::Shared<F::Output>>,
        future: F,
    ) -> Arc<Task<F>> {
        Arc::new(Task {
            header: TaskHeader {
                key,
                state: TaskState::new_scheduled(),
                owner,
            },
            aborted: Cell::new(false),
            future: RefCell::new(Some(Running { output, future })),
        })
    }
}

/// The executor's view of a task, whatever its future's type.
///
/// Owner core only (see the `Send` proof above).
pub(crate) trait Runnable {
    fn header(&self) -> &TaskHeader;

    /// Clears the scheduled flag and polls the future once with a waker of
    /// this task; `Ready` once it has finished (or was already gone).
    fn poll(self: Arc<Self>) -> Poll<()>;

    /// Drops the future now; or, when it is being polled (the task aborts
    /// itself), marks it so that its next poll drops it instead. Whether
    /// it was dropped now.
    fn abort(&self) -> bool;
}

impl<F: Future + 'static> Runnable for Task<F> {
    fn header(&self) -> &TaskHeader {
        &self.header
    }

    fn poll(self: Arc<Self>) -> Poll<()> {
        let task: *const Task<F> = Arc::as_ptr(&self);
        // The run queue's reference becomes the waker's: no count changes.
        let waker = Waker::from(self);
        // SAFETY: `waker` owns a strong reference to the task until the end
        // of this function, so the pointee outlives `task`.
        let task = unsafe { &*task };
        // A poll re-entering its own task cannot happen (the executor does
        // not nest polls); were it to, the inner call finds the cell busy.
        let Ok(mut slot) = task.future.try_borrow_mut() else {
            return Poll::Pending;
        };
        // A task queued before it finished stays closed: only a live
        // future re-arms the scheduled flag.
        if task.aborted.get() {
            *slot = None;
        }
        let Some(running) = slot.as_mut() else {
            return Poll::Ready(());
        };
        task.header.state.start_poll();
        // SAFETY: the future lives inside the task's `Arc` allocation,
        // which never moves, and it leaves it only by being dropped in place
        // (`abort` assigns `None`): it is pinned for its whole life.
        let future = unsafe { Pin::new_unchecked(&mut running.future) };
        let value = std::task::ready!(future.poll(&mut Context::from_waker(&waker)));
        if let Some(output) = &running.output {
            join::finish(output, Ok(value));
        }
        Poll::Ready(())
    }

    fn abort(&self) -> bool {
        match self.future.try_borrow_mut() {
            Ok(mut slot) => {
                *slot = None;
                true
            }
            Err(_) => {
                self.aborted.set(true);
                false
            }
        }
    }
}

/// The task's side of [`crate::sync::wake`]: the flag in its header, the
/// owner core's run queue through the thread's current core, and the
/// owner's wake inbox.
impl<F: Future + 'static> Waking for Arc<Task<F>> {
    #[inline]
    fn state(&self) -> &TaskState {
        &self.header.state
    }

    #[inline]
    fn schedule_local(self) -> Result<(), Self> {
        super::current::schedule_local(self.header.owner.id, self)
    }

    #[inline]
    fn schedule_remote(&self) {
        self.header.owner.wake_remote(self.header.key);
    }
}

impl<F: Future + 'static> Wake for Task<F> {
    fn wake(self: Arc<Self>) {
        wake::wake(self);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        wake::wake_by_ref(self);
    }
}
