//! The part of a core that other threads may touch: its inboxes (task
//! wakes, cross-core messages), its parker, its counters.

use std::os::fd::OwnedFd;
use std::sync::{Arc, OnceLock, Weak};

use crate::executor::owner::{EventNotify, Owner};
use crate::executor::task::TaskKey;
use crate::stats::CoreStats;
use crate::sync::{CoreSide, Remote, Shutdown};

/// A closure sent to run on another core.
pub(crate) type Message = Box<dyn FnOnce() + Send>;

/// Cross-core messages a core may have queued before senders wait.
pub(crate) const MAILBOX_CAP: usize = 1024;

pub(crate) struct CoreShared {
    /// What the core's tasks see of it (its id, wake inbox and parker).
    pub(crate) owner: Arc<Owner>,
    /// Unique per core in the process (not the CPU number): the owner's.
    pub(crate) id: usize,
    pub(crate) cpu: usize,
    /// The eventfd the core's driver always has a wait on.
    pub(crate) wake_fd: Arc<OwnedFd>,
    pub(crate) mailbox: Remote<Message>,
    pub(crate) shutdown: Arc<Shutdown>,
    pub(crate) stats: Arc<CoreStats>,
    /// What the stall watchdog reads of this core.
    pub(crate) watch: super::watch::CoreWatch,
    /// Connections that should move to another core.
    pub(crate) moves: super::moves::MoveOrders,
    /// Every core of the same server, by index (this one included).
    peers: OnceLock<Vec<Weak<CoreShared>>>,
}

impl CoreShared {
    pub(crate) fn new(cpu: usize, wake_fd: Arc<OwnedFd>, shutdown: Arc<Shutdown>) -> CoreShared {
        let owner = Arc::new(Owner::new(wake_fd.clone()));
        CoreShared {
            id: owner.id,
            owner,
            cpu,
            wake_fd,
            mailbox: Remote::new(MAILBOX_CAP),
            shutdown,
            stats: Arc::new(CoreStats::default()),
            watch: super::watch::CoreWatch::new(),
            moves: super::moves::MoveOrders::default(),
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
            parker: &self.owner.parker,
            wakes: &self.owner.wakes,
            mailbox: &self.mailbox,
            shutdown: &self.shutdown,
        }
    }

    /// Stops the core's loop at its next turn (and wakes it if parked).
    pub(crate) fn signal_shutdown(&self) {
        self.owner.parker.unpark();
    }
}
