//! The part of a core that other threads may touch: its inboxes (task
//! wakes, cross-core messages), its parker, its counters.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, OnceLock, Weak};

use crate::executor::task::TaskKey;
use crate::stats::CoreStats;
use crate::sync::{CoreSide, Notify, Parker, Remote, Shutdown};

/// Writes the core's eventfd, which its driver always has a wait on.
pub(crate) struct EventNotify(pub(crate) Arc<OwnedFd>);

impl Notify for EventNotify {
    fn notify(&self) {
        if let Err(e) = crate::sys::eventfd_signal(self.0.as_fd()) {
            tracing::error!(error = %e, "could not notify a core");
        }
    }
}

/// A closure sent to run on another core.
pub(crate) type Message = Box<dyn FnOnce() + Send>;

/// Cross-core messages a core may have queued before senders wait.
pub(crate) const MAILBOX_CAP: usize = 1024;

pub(crate) struct CoreShared {
    /// Unique per core in the process (not the CPU number).
    pub(crate) id: usize,
    pub(crate) cpu: usize,
    /// The eventfd the core's driver always has a wait on.
    pub(crate) wake_fd: Arc<OwnedFd>,
    pub(crate) parker: Parker<EventNotify>,
    pub(crate) wakes: Remote<TaskKey>,
    pub(crate) mailbox: Remote<Message>,
    pub(crate) shutdown: Arc<Shutdown>,
    pub(crate) stats: Arc<CoreStats>,
    /// Every core of the same server, by index (this one included).
    peers: OnceLock<Vec<Weak<CoreShared>>>,
}

impl CoreShared {
    pub(crate) fn new(cpu: usize, wake_fd: Arc<OwnedFd>, shutdown: Arc<Shutdown>) -> CoreShared {
        static NEXT_ID: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        CoreShared {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            cpu,
            parker: Parker::new(EventNotify(wake_fd.clone())),
            wake_fd,
            // Unbounded: see `CoreSide::wake_remote`.
            wakes: Remote::unbounded(),
            mailbox: Remote::new(MAILBOX_CAP),
            shutdown,
            stats: Arc::new(CoreStats::default()),
            peers: OnceLock::new(),
        }
    }

    /// Tells every core of a server who its peers are (once, before start).
    pub(crate) fn link(cores: &[Arc<CoreShared>]) {
        let peers: Vec<Weak<CoreShared>> = cores.iter().map(Arc::downgrade).collect();
        for core in cores {
            let _ = core.peers.set(peers.clone());
        }
    }

    pub(crate) fn peer(&self, index: usize) -> Option<Arc<CoreShared>> {
        self.peers.get()?.get(index)?.upgrade()
    }

    pub(crate) fn peer_count(&self) -> usize {
        self.peers.get().map_or(1, Vec::len)
    }

    /// This core's index among its peers.
    pub(crate) fn index(&self) -> usize {
        self.peers
            .get()
            .and_then(|peers| peers.iter().position(|p| std::ptr::eq(p.as_ptr(), self)))
            .unwrap_or(0)
    }

    /// The cross-thread side of this core, for the functions of
    /// [`crate::sync::wake`].
    #[inline]
    pub(crate) fn side(&self) -> CoreSide<'_, TaskKey, Message, EventNotify> {
        CoreSide {
            parker: &self.parker,
            wakes: &self.wakes,
            mailbox: &self.mailbox,
            shutdown: &self.shutdown,
        }
    }

    /// Queues a task wake from another thread and wakes the core.
    pub(crate) fn wake_remote(&self, key: TaskKey) {
        self.side().wake_remote(key);
    }

    /// Stops the core's loop at its next turn (and wakes it if parked).
    pub(crate) fn signal_shutdown(&self) {
        self.parker.unpark();
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
        let mut shared = CoreShared::new(0, wake_fd.clone(), Arc::new(Shutdown::new()));
        shared.wakes = Remote::new(1);
        let keys = [1, 2, 3].map(|index| TaskKey {
            index,
            generation: 0,
        });
        for key in keys {
            shared.wake_remote(key);
        }
        let mut queued = std::collections::VecDeque::new();
        shared.wakes.drain_into(&mut queued);
        assert_eq!(queued, keys);
        // Each wake found the core awake: none notified it.
        assert!(!crate::sys::eventfd_drain(wake_fd.as_fd()));
    }
}
