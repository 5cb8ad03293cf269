//! The park/unpark handshake between a core and the threads that wake it.
//!
//! The core announces `parked`, then looks at its inboxes once more; a
//! sender first puts its item in an inbox, then clears `parked` and
//! notifies if it was set. Both flag accesses are `SeqCst` and the inboxes
//! are behind mutexes, so either the sender sees `parked` and notifies, or
//! the core sees the item and does not block: a wake-up cannot fall between
//! the two. A notification that arrives while the core is awake is merely
//! spurious (the next wait returns at once).
//!
//! Every write to `parked` is a `swap`, never a plain `store`. Both compile
//! to the same `xchg` on x86 (a `SeqCst` store is an `xchg`), and with only
//! read-modify-writes on the flag its history is one chain: whoever writes
//! after a sender's `swap(false)` also synchronizes with it. That makes the
//! handshake hold even under acquire/release reasoning (which is all loom
//! models for `SeqCst` accesses), and it keeps loom exact here: loom can
//! place a plain store between the read and the write of another thread's
//! `swap` (tokio-rs/loom#254), a history no real machine produces, which it
//! then reports as a lost wake-up.

use super::{AtomicBool, Notify, Ordering};

/// The parked flag of one core and the way to wake it.
#[derive(Debug)]
pub struct Parker<N> {
    parked: AtomicBool,
    notifier: N,
}

impl<N: Notify> Parker<N> {
    /// A parker for a core that is awake.
    pub fn new(notifier: N) -> Self {
        Parker {
            parked: AtomicBool::new(false),
            notifier,
        }
    }

    /// Called by a sender after it queued something for the core: notifies
    /// the core if it announced a park.
    pub fn unpark(&self) {
        if self.parked.swap(false, Ordering::SeqCst) {
            self.notifier.notify();
        }
    }

    /// Announces that the core is about to block. Returns `false` (and
    /// withdraws the announcement) when `has_work` says there is work: the
    /// core must then not block. `has_work` must check every inbox under its
    /// lock, after this announcement.
    pub fn prepare_park(&self, has_work: impl FnOnce() -> bool) -> bool {
        self.parked.swap(true, Ordering::SeqCst);
        if has_work() {
            self.parked.swap(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// The core woke up: senders need not notify until the next park.
    pub fn finish_park(&self) {
        self.parked.swap(false, Ordering::SeqCst);
    }
}
