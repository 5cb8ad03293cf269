//! Buffers a core lends its connections while they are busy: the
//! request's and response's buffers of an exchange. An idle connection
//! holds none of them; a core keeps those
//! given back for the next connection that needs them, so a steady state
//! allocates nothing.

use std::cell::{Cell, RefCell};

use crate::http::wire::KEEP_CAPACITY;

/// Buffers of one kind a core keeps, beside the last given back: as many
/// as were lent at once, up to this many. Few: those made for a spike
/// would pin the pages they are spread on.
const KEEP: usize = 32;

/// A buffer that can be emptied and lent again.
pub(crate) trait Reusable: Default {
    /// Empties it; `false` when it grew too large to keep.
    fn reset(&mut self) -> bool;
    /// Whether it holds no allocation at all (not worth keeping).
    fn is_unallocated(&self) -> bool;
}

impl Reusable for Vec<u8> {
    #[inline]
    fn reset(&mut self) -> bool {
        self.clear();
        self.capacity() <= KEEP_CAPACITY
    }

    #[inline]
    fn is_unallocated(&self) -> bool {
        self.capacity() == 0
    }
}

/// A core's pool of one kind of buffer.
pub(crate) struct Pool<T> {
    last: Cell<Option<T>>,
    free: RefCell<Vec<T>>,
}

impl<T: Reusable> Pool<T> {
    pub(crate) const fn new() -> Self {
        Pool {
            last: Cell::new(None),
            free: RefCell::new(Vec::new()),
        }
    }

    /// A kept buffer, or a new (unallocated) one.
    #[inline]
    pub(crate) fn take(&self) -> T {
        match self.last.take() {
            Some(kept) => kept,
            None => self.free.borrow_mut().pop().unwrap_or_default(),
        }
    }

    /// Keeps `buf`, emptied, for the next taker; frees it when it grew
    /// large or the pool is full.
    #[inline]
    pub(crate) fn give(&self, mut buf: T) {
        if buf.is_unallocated() || !buf.reset() {
            return;
        }
        if let Some(older) = self.last.replace(Some(buf)) {
            let mut free = self.free.borrow_mut();
            if free.len() < KEEP {
                if free.capacity() == 0 {
                    // All the room it will need, at once.
                    free.reserve_exact(KEEP);
                }
                free.push(older);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lends_kept_buffers_and_bounds_what_it_keeps() {
        let pool = Pool::<Vec<u8>>::new();
        let mut a = pool.take();
        assert_eq!(a.capacity(), 0, "an empty pool lends a new buffer");
        a.extend_from_slice(b"hello");
        let at = a.as_ptr();
        pool.give(a);
        let b = pool.take();
        assert_eq!((b.len(), b.as_ptr()), (0, at), "the same buffer, emptied");
        pool.give(b);

        let many: Vec<Vec<u8>> = (0..KEEP + 10).map(|_| vec![1u8; 16]).collect();
        for buf in many {
            pool.give(buf);
        }
        assert_eq!(pool.free.borrow().len(), KEEP);
        pool.give(vec![0u8; KEEP_CAPACITY + 1]);
        let kept = pool.take();
        assert!(
            kept.capacity() <= KEEP_CAPACITY,
            "a large buffer is not kept"
        );
        pool.give(Vec::new());
        assert!(pool.last.take().is_none(), "an unallocated one is not kept");
    }
}
