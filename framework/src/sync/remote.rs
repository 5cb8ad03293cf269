//! A core's inbox from other threads: a bounded queue with back-pressure.
//!
//! Senders that find it full may register a waker and are woken when the
//! owner drains it. Senders that cannot wait, and whose items are bounded
//! by other means, use [`Remote::push_unbounded`] (task wakes: see
//! [`wake_remote`](super::wake::wake_remote)). When the owner core stops it closes the inbox: later
//! pushes fail with [`PushError::Closed`], and what was still queued is
//! handed back to the owner to fail explicitly, so nothing is lost silently.
//! Waking the owner is the [`Parker`](super::Parker)'s job: push, then
//! `unpark`.

use std::collections::VecDeque;
use std::fmt;
use std::task::Waker;

use super::{lock, AtomicUsize, Mutex, Ordering};

/// Why an item was not queued; the item comes back so nothing is lost.
#[derive(Debug, PartialEq, Eq)]
pub enum PushError<T> {
    /// The queue holds `capacity` items.
    Full(T),
    /// The owner core has stopped.
    Closed(T),
}

struct Inner<T> {
    queue: VecDeque<T>,
    closed: bool,
    /// Senders waiting for room.
    waiters: Vec<Waker>,
}

/// A bounded multi-producer queue drained by one core.
pub struct Remote<T> {
    inner: Mutex<Inner<T>>,
    capacity: usize,
    /// Items queued; read without the lock only as a hint to skip an empty
    /// drain, never to decide whether to park.
    len: AtomicUsize,
}

impl<T> Remote<T> {
    /// A queue that holds at most `capacity` items.
    pub fn new(capacity: usize) -> Self {
        Remote {
            inner: Mutex::new(Inner {
                queue: VecDeque::new(),
                closed: false,
                waiters: Vec::new(),
            }),
            capacity,
            len: AtomicUsize::new(0),
        }
    }

    /// A queue with no capacity limit, for items pushed with
    /// [`Remote::push_unbounded`].
    pub fn unbounded() -> Self {
        Remote::new(usize::MAX)
    }

    /// Appends `item`. The caller then unparks the owner.
    ///
    /// # Errors
    ///
    /// [`PushError::Full`] or [`PushError::Closed`], with the item.
    // The runtime pushes with a waker (`CoreSide::send`) or unbounded
    // (`wake::wake_remote`); the loom models push plainly.
    #[cfg_attr(not(loom), allow(dead_code))]
    pub fn push(&self, item: T) -> Result<(), PushError<T>> {
        self.push_or_wait(item, None)
    }

    /// Like [`Remote::push`], but when the queue is full `waker` is
    /// registered (atomically with the check) and woken when the owner
    /// drains the queue.
    ///
    /// # Errors
    ///
    /// As [`Remote::push`].
    pub fn push_or_wait(&self, item: T, waker: Option<&Waker>) -> Result<(), PushError<T>> {
        let mut inner = lock(&self.inner);
        if inner.closed {
            return Err(PushError::Closed(item));
        }
        if inner.queue.len() >= self.capacity {
            if let Some(waker) = waker {
                if !inner.waiters.iter().any(|w| w.will_wake(waker)) {
                    inner.waiters.push(waker.clone());
                }
            }
            return Err(PushError::Full(item));
        }
        inner.queue.push_back(item);
        self.len.store(inner.queue.len(), Ordering::Release);
        Ok(())
    }

    /// Appends `item` whatever the queue holds: for a sender that cannot
    /// wait for room and must not lose its item, whose items are bounded by
    /// other means. The caller then unparks the owner.
    ///
    /// # Errors
    ///
    /// The item, when the owner core has stopped (closed the queue).
    pub fn push_unbounded(&self, item: T) -> Result<(), T> {
        let mut inner = lock(&self.inner);
        if inner.closed {
            return Err(item);
        }
        inner.queue.push_back(item);
        self.len.store(inner.queue.len(), Ordering::Release);
        Ok(())
    }

    /// Moves every queued item to `out`, in push order, and wakes senders
    /// waiting for room; returns how many items moved.
    pub fn drain_into(&self, out: &mut VecDeque<T>) -> usize {
        if self.len.load(Ordering::Acquire) == 0 {
            return 0;
        }
        let (n, waiters) = {
            let mut inner = lock(&self.inner);
            let n = inner.queue.len();
            out.extend(inner.queue.drain(..));
            self.len.store(0, Ordering::Release);
            (n, std::mem::take(&mut inner.waiters))
        };
        for waker in waiters {
            waker.wake();
        }
        n
    }

    /// Whether items are queued, checked under the lock (for the park
    /// decision).
    pub fn has_items(&self) -> bool {
        !lock(&self.inner).queue.is_empty()
    }

    /// Refuses further pushes and hands back what is still queued, so the
    /// owner can fail each item explicitly; wakes waiting senders, whose
    /// retry then fails with [`PushError::Closed`].
    pub fn close(&self, out: &mut VecDeque<T>) {
        let waiters = {
            let mut inner = lock(&self.inner);
            inner.closed = true;
            out.extend(inner.queue.drain(..));
            self.len.store(0, Ordering::Release);
            std::mem::take(&mut inner.waiters)
        };
        for waker in waiters {
            waker.wake();
        }
    }
}

impl<T> fmt::Debug for Remote<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Remote")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}
