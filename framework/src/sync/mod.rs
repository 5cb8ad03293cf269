//! The framework's cross-thread code, and nothing else.
//!
//! Everything that two cores (or a core and a foreign thread) touch at the
//! same time lives here: the remote queue with its park/unpark handshake,
//! the per-task "scheduled" flag behind wakers, the reply channel of
//! cross-core calls, the hand-off of a connection moved to another
//! core, the shutdown latch, and the count of cores still draining at a
//! stop. So does the glue that a wake and a park go through
//! ([`wake`]: a waker queueing its task locally or remotely, a core
//! deciding whether to block), and the state of the read an io_uring core
//! keeps on its eventfd ([`WakeRead`]).
//!
//! The atomics and locks come from `std` normally and from `loom` under
//! `--cfg loom`, so the `loom-tests` crate model-checks this exact code.
//! What is not cross-thread stays out, behind traits and closures that the
//! runtime fills in (monomorphised, so at no cost) and the models replace:
//! kernel calls (eventfd writes, `io_uring_enter`, `epoll_wait`) behind
//! [`Notify`] and the wait `CoreSide::park` is given, the thread-local run
//! queue behind [`wake::Waking`].
#![cfg_attr(not(loom), allow(unreachable_pub))]

mod countdown;
pub mod handoff;
pub mod oneshot;
mod parker;
mod remote;
mod shutdown;
mod task_state;
pub mod wake;
mod wake_read;

pub use countdown::CountDown;
pub use parker::Parker;
pub use remote::{PushError, Remote};
pub use shutdown::Shutdown;
pub use task_state::TaskState;
pub use wake::CoreSide;
pub use wake_read::WakeRead;
#[cfg(loom)]
pub use wake_read::UNARMED_WAIT;

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicBool, AtomicUsize, Ordering},
    Arc, Mutex, MutexGuard,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{AtomicBool, AtomicUsize, Ordering},
    Arc, Mutex, MutexGuard,
};

/// Wakes a core that may be blocked in the kernel.
///
/// The real implementation writes an eventfd the core's driver is waiting
/// on; loom models substitute a flag. Spurious notifications are harmless:
/// the core wakes, finds nothing, and parks again.
pub trait Notify: Send + Sync {
    /// Makes the core's next (or current) wait return.
    fn notify(&self);
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it:
/// every critical section here leaves the data consistent at each step.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
