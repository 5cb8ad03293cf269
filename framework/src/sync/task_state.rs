//! The per-task flag that turns many wakes into one scheduling.
//!
//! A waker may fire from any thread, any number of times. Only the wake that
//! flips `scheduled` from false to true enqueues the task; the executor
//! clears the flag just before polling, so a wake that arrives during the
//! poll schedules exactly one more run. A finished task keeps the flag set
//! forever, so late wakes enqueue nothing.

use super::{AtomicBool, Ordering};

/// Scheduling state shared by a task's wakers.
#[derive(Debug)]
pub struct TaskState {
    scheduled: AtomicBool,
}

impl TaskState {
    /// A task that starts out scheduled (it is queued when spawned).
    pub fn new_scheduled() -> Self {
        TaskState {
            scheduled: AtomicBool::new(true),
        }
    }

    /// Records a wake; returns `true` when the caller must enqueue the task.
    pub fn wake(&self) -> bool {
        !self.scheduled.swap(true, Ordering::AcqRel)
    }

    /// Called by the executor right before polling: wakes from now on
    /// schedule another run.
    ///
    /// An acquiring read-modify-write, not a store: a wake that found the
    /// task already queued (and so enqueued nothing) relies on this very
    /// poll to see what it did before waking. The `swap` reads that wake's
    /// `true` and synchronizes with it; a plain store would let the poll
    /// miss the waker's writes (on x86 too: the poll's loads may pass the
    /// buffered store), return `Pending`, and sleep forever. Found by the
    /// loom model `park::remote_wake_races_park`.
    pub fn start_poll(&self) {
        self.scheduled.swap(false, Ordering::AcqRel);
    }

    /// Called when the task finished or was dropped: no wake enqueues it again.
    pub fn close(&self) {
        self.scheduled.store(true, Ordering::Release);
    }
}
