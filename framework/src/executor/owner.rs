//! The core a task belongs to, as the task's wakers see it from any
//! thread: its id, its inbox of remote wakes, and how to wake it.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use super::task::TaskKey;
use crate::sync::{wake, Notify, Parker, Remote};

/// Writes the core's eventfd, which its driver always has a wait on.
pub(crate) struct EventNotify(pub(crate) Arc<OwnedFd>);

impl Notify for EventNotify {
    fn notify(&self) {
        if let Err(e) = crate::sys::eventfd_signal(self.0.as_fd()) {
            tracing::error!(error = %e, "could not notify a core");
        }
    }
}

/// What a task's wakers need of their core. Shared (`Arc`) by the core
/// and every task it runs; the rest of the core's cross-thread side
/// (its mailbox, its stop) is the core's own.
pub(crate) struct Owner {
    /// Unique per core in the process (not the CPU number).
    pub(crate) id: usize,
    pub(crate) parker: Parker<EventNotify>,
    /// Wakes from other threads. Unbounded: see `sync::wake::wake_remote`.
    pub(crate) wakes: Remote<TaskKey>,
    /// The key of the task being polled (`index << 32 | generation`),
    /// for the stall watchdog: one relaxed store per poll.
    polling: std::sync::atomic::AtomicU64,
}

impl Owner {
    /// An owner with a new unique id, notified through `wake_fd`.
    pub(crate) fn new(wake_fd: Arc<OwnedFd>) -> Owner {
        static NEXT_ID: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        Owner {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            parker: Parker::new(EventNotify(wake_fd)),
            wakes: Remote::unbounded(),
            polling: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The core is about to poll `key`.
    #[inline]
    pub(crate) fn polling(&self, key: TaskKey) {
        let packed = (u64::from(key.index) << 32) | u64::from(key.generation);
        self.polling
            .store(packed, std::sync::atomic::Ordering::Relaxed);
    }

    /// The task the core polls now, or polled last.
    pub(crate) fn polled(&self) -> TaskKey {
        let packed = self.polling.load(std::sync::atomic::Ordering::Relaxed);
        TaskKey {
            index: (packed >> 32) as u32,
            generation: packed as u32,
        }
    }

    /// Queues a task wake from another thread and wakes the core.
    #[inline]
    pub(crate) fn wake_remote(&self, key: TaskKey) {
        wake::wake_remote(&self.wakes, &self.parker, key);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A wake that finds the wake inbox at its capacity is queued anyway:
    /// dropping it would leave the task's flag set and the task never
    /// polled. The inbox is built with room for one key.
    #[test]
    fn a_full_wake_inbox_keeps_the_wake() {
        let wake_fd = Arc::new(crate::sys::eventfd().unwrap());
        let mut owner = Owner::new(wake_fd.clone());
        owner.wakes = Remote::new(1);
        let keys = [1, 2, 3].map(|index| TaskKey {
            index,
            generation: 0,
        });
        for key in keys {
            owner.wake_remote(key);
        }
        let mut queued = std::collections::VecDeque::new();
        owner.wakes.drain_into(&mut queued);
        assert_eq!(queued, keys);
        // Each wake found the core awake: none notified it.
        assert!(!crate::sys::eventfd_drain(wake_fd.as_fd()));
    }
}
