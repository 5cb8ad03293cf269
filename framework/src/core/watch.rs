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

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
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
    /// The [`StallLabel`] of what the core polls now, zero for none.
    label: AtomicU32,
}

impl CoreWatch {
    pub(crate) fn new() -> CoreWatch {
        CoreWatch {
            epoch: Instant::now(),
            turn: AtomicU64::new(0),
            thread: AtomicI32::new(0),
            label: AtomicU32::new(0),
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

    /// Sets the label of what the core polls now, returning the one
    /// before (`0`: none).
    #[inline]
    pub(crate) fn swap_label(&self, label: u32) -> u32 {
        let before = self.label.load(Ordering::Relaxed);
        self.label.store(label, Ordering::Relaxed);
        before
    }

    /// The name of what the core polls now, if labelled.
    pub(crate) fn label(&self) -> Option<String> {
        let id = NonZeroU32::new(self.label.load(Ordering::Relaxed))?;
        let names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
        names.get(id.get() as usize - 1).map(|n| n.to_string())
    }

    pub(crate) fn thread(&self) -> Option<i32> {
        Some(self.thread.load(Ordering::Relaxed)).filter(|&t| t != 0)
    }

    /// Milliseconds since `epoch`, in the ticks' unit.
    pub(crate) fn now_tick(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}

/// Every [`StallLabel`]'s name, its id less one: interned, so a name
/// labelled again (a router built anew) takes no more room.
static NAMES: Mutex<Vec<Box<str>>> = Mutex::new(Vec::new());

/// A name for stall reports: what a core was running when it stalled,
/// such as an HTTP route (`GET /users/{id}`). Made once, when what it
/// names is set up (not per request); see [`labeled`](crate::runtime::labeled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StallLabel(NonZeroU32);

impl StallLabel {
    /// The label named `name`; the same label for the same name.
    pub fn new(name: &str) -> StallLabel {
        let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
        let index = match names.iter().position(|n| **n == *name) {
            Some(index) => index,
            None => {
                names.push(name.into());
                names.len() - 1
            }
        };
        let id = u32::try_from(index + 1).unwrap_or(u32::MAX);
        StallLabel(NonZeroU32::new(id).unwrap_or(NonZeroU32::MAX))
    }

    pub(crate) fn id(self) -> u32 {
        self.0.get()
    }
}
