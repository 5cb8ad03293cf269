//! A core's inbox from other threads, and the park/unpark handshake.
//!
//! The owner core drains the queue every loop turn. Before blocking in the
//! kernel it announces `parked`, then looks at the queue once more; a sender
//! pushes, then clears `parked` and notifies if it was set. Both flag
//! accesses are `SeqCst` and the queue is behind a mutex, so either the
//! sender sees `parked` and notifies, or the owner sees the item and does
//! not block: a wake-up cannot fall between the two.

use std::collections::VecDeque;
use std::fmt;

use super::{lock, AtomicBool, Mutex, Notify, Ordering};

/// A bounded multi-producer queue drained by one core, with the flag that
/// tells producers whether that core must be notified.
pub struct Remote<T, N> {
    queue: Mutex<VecDeque<T>>,
    capacity: usize,
    parked: AtomicBool,
    notifier: N,
}

/// The queue was full; the item is handed back so nothing is lost.
#[derive(Debug, PartialEq, Eq)]
pub struct PushError<T>(pub T);

impl<T, N: Notify> Remote<T, N> {
    /// A queue that holds at most `capacity` items.
    pub fn new(capacity: usize, notifier: N) -> Self {
        Remote {
            queue: Mutex::new(VecDeque::new()),
            capacity,
            parked: AtomicBool::new(false),
            notifier,
        }
    }

    /// Appends `item` and makes sure the owner core will see it.
    ///
    /// # Errors
    ///
    /// Returns the item when the queue holds `capacity` items already.
    pub fn push(&self, item: T) -> Result<(), PushError<T>> {
        {
            let mut queue = lock(&self.queue);
            if queue.len() >= self.capacity {
                return Err(PushError(item));
            }
            queue.push_back(item);
        }
        self.unpark();
        Ok(())
    }

    /// Notifies the owner core if it announced that it is parking.
    pub fn unpark(&self) {
        if self.parked.swap(false, Ordering::SeqCst) {
            self.notifier.notify();
        }
    }

    /// Moves every queued item to `out`, in push order; returns how many.
    pub fn drain_into(&self, out: &mut VecDeque<T>) -> usize {
        let mut queue = lock(&self.queue);
        let n = queue.len();
        out.extend(queue.drain(..));
        n
    }

    /// Announces that the owner is about to block. Returns `false` (and
    /// withdraws the announcement) when the owner must not block because
    /// items are queued or `must_stay_awake` says so.
    pub fn prepare_park(&self, must_stay_awake: impl Fn() -> bool) -> bool {
        self.parked.store(true, Ordering::SeqCst);
        let queued = !lock(&self.queue).is_empty();
        if queued || must_stay_awake() {
            self.parked.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Ends a park; a sender no longer needs to notify.
    pub fn finish_park(&self) {
        self.parked.store(false, Ordering::SeqCst);
    }

    /// Items waiting; a snapshot that may be stale as soon as it returns.
    pub fn len(&self) -> usize {
        lock(&self.queue).len()
    }

    /// Whether no item is waiting (a snapshot, like [`Remote::len`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T, N> fmt::Debug for Remote<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Remote")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}
