//! What a core publishes for the stall watchdog: when its current loop
//! turn began and which thread it runs on (the executor's owner publishes
//! which task it is polling, see `Owner::polling`).
//!
//! The core writes with relaxed stores only: the turn's start once per
//! turn (from the clock the turn reads anyway), zero before it parks, and
//! the task's key once per poll. No clock read, no system call and no
//! lock is added to the loop. The watchdog reads these from its own
//! thread (`server::watchdog`).
//!
//! A turn is named by its start tick alone, with no sequence number: the
//! watchdog reports a turn only once it has run for the threshold, at
//! least a millisecond, so the next turn always has a later tick.

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::Instant;

/// One core's published state.
pub(crate) struct CoreWatch {
    /// The core clock's origin, which the ticks count from.
    epoch: Instant,
    /// The running turn's start tick (milliseconds since `epoch`) plus one;
    /// zero while the core waits in the kernel.
    turn: AtomicU64,
    /// The core thread's kernel id (zero before it started).
    thread: AtomicI32,
}

impl CoreWatch {
    pub(crate) fn new() -> CoreWatch {
        CoreWatch {
            epoch: Instant::now(),
            turn: AtomicU64::new(0),
            thread: AtomicI32::new(0),
        }
    }

    /// The origin the core's clock must count its ticks from.
    pub(crate) fn epoch(&self) -> Instant {
        self.epoch
    }

    /// Called by the core's thread when it starts.
    pub(crate) fn set_thread(&self) {
        self.thread
            .store(crate::sys::stack_sample::thread_id(), Ordering::Relaxed);
    }

    /// A turn began at `tick`.
    #[inline]
    pub(crate) fn turn_began(&self, tick: u64) {
        self.turn.store(tick + 1, Ordering::Relaxed);
    }

    /// The core is about to wait in the kernel.
    #[inline]
    pub(crate) fn parking(&self) {
        self.turn.store(0, Ordering::Relaxed);
    }

    /// The running turn's start tick, or `None` while parked.
    pub(crate) fn turn(&self) -> Option<u64> {
        self.turn.load(Ordering::Relaxed).checked_sub(1)
    }

    pub(crate) fn thread(&self) -> Option<i32> {
        Some(self.thread.load(Ordering::Relaxed)).filter(|&t| t != 0)
    }

    /// Milliseconds since `epoch`, in the ticks' unit.
    pub(crate) fn now_tick(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}
