//! The part of a core that other threads may touch.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use super::stats::CoreStats;
use crate::executor::task::TaskKey;
use crate::sync::{Notify, Remote, Shutdown};

/// Writes the core's eventfd, which its driver always has a wait on.
pub(crate) struct EventNotify(pub(crate) Arc<OwnedFd>);

impl Notify for EventNotify {
    fn notify(&self) {
        if let Err(e) = crate::sys::eventfd_signal(&*self.0) {
            tracing::error!(error = %e, "could not notify a core");
        }
    }
}

/// Wakes waiting in a core's inbox: bounded by the number of tasks (each
/// task is queued at most once), so this cap is only a safety net.
const WAKE_QUEUE_CAP: usize = 1 << 20;

pub(crate) struct CoreShared {
    /// Unique per core in the process (not the CPU number).
    pub(crate) id: usize,
    pub(crate) cpu: usize,
    /// The eventfd the core's driver always has a wait on.
    pub(crate) wake_fd: Arc<OwnedFd>,
    pub(crate) wakes: Remote<TaskKey, EventNotify>,
    pub(crate) shutdown: Arc<Shutdown>,
    pub(crate) stats: Arc<CoreStats>,
}

impl CoreShared {
    pub(crate) fn new(cpu: usize, wake_fd: Arc<OwnedFd>, shutdown: Arc<Shutdown>) -> CoreShared {
        static NEXT_ID: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        CoreShared {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            cpu,
            wakes: Remote::new(WAKE_QUEUE_CAP, EventNotify(wake_fd.clone())),
            wake_fd,
            shutdown,
            stats: Arc::new(CoreStats::default()),
        }
    }

    /// Stops the core's loop at its next turn (and wakes it if parked).
    pub(crate) fn signal_shutdown(&self) {
        self.wakes.unpark();
    }
}
