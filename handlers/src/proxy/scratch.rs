//! Per-core free lists of request scratch: byte buffers and bump arenas.
//!
//! A core serves many requests concurrently (one task per connection), so
//! a single per-core buffer would not do; instead each request takes what
//! it needs from a free list and gives it back when it ends. After warm-up
//! the lists hold as many items as the core's peak concurrency needed, and
//! a request allocates nothing. When the core gives memory back after a
//! burst (see [`percore::on_give_back`]), the lists are emptied: a burst
//! of large bodies leaves nothing behind, and the next requests allocate
//! until the lists are warm again.

use std::cell::RefCell;
use std::ops::Deref;

use bumpalo::Bump;

/// Most buffers kept on a free list; beyond it, released buffers are freed.
const MAX_FREE_BUFS: usize = 4096;
/// A buffer that grew past this (a large upstream body) is freed rather
/// than kept, so one big response does not pin memory forever.
const MAX_KEPT_CAPACITY: usize = 256 * 1024;
/// Most bytes of capacity the free list keeps in all: without it, a burst
/// of large bodies left up to [`MAX_FREE_BUFS`] × [`MAX_KEPT_CAPACITY`]
/// (1 GiB) per core held once the burst was over. Steady small requests
/// stay far below it (4,096 buffers of 4 KiB are 16 MiB).
const MAX_FREE_BYTES: usize = 32 * 1024 * 1024;
/// Most arenas kept (one per concurrent request at the peak).
const MAX_FREE_ARENAS: usize = 1024;

/// Reused `Vec<u8>`s for sub-request and response bytes.
#[derive(Debug, Default)]
pub(crate) struct BufPool {
    free: RefCell<Vec<Vec<u8>>>,
    /// The capacity of the buffers in `free`, in bytes.
    free_bytes: std::cell::Cell<usize>,
}

impl BufPool {
    /// An empty buffer, with the capacity it had when it was released.
    pub(crate) fn take(&self) -> Vec<u8> {
        let buf = self.free.borrow_mut().pop().unwrap_or_default();
        self.free_bytes
            .set(self.free_bytes.get().saturating_sub(buf.capacity()));
        buf
    }

    /// Gives `buf` back for the next request (or frees it, past the
    /// list's bounds).
    pub(crate) fn put(&self, mut buf: Vec<u8>) {
        let capacity = buf.capacity();
        let bytes = self.free_bytes.get() + capacity;
        if capacity > MAX_KEPT_CAPACITY || bytes > MAX_FREE_BYTES {
            return;
        }
        let mut free = self.free.borrow_mut();
        if free.len() < MAX_FREE_BUFS {
            buf.clear();
            free.push(buf);
            self.free_bytes.set(bytes);
        }
    }

    /// Frees every buffer on the list (the core gives memory back).
    pub(crate) fn clear(&self) {
        *self.free.borrow_mut() = Vec::new();
        self.free_bytes.set(0);
    }
}

/// Reused bump arenas, one per request in flight, for the branch futures.
#[derive(Debug, Default)]
pub(crate) struct ArenaPool {
    free: RefCell<Vec<Bump>>,
}

impl ArenaPool {
    /// An arena for one request; reset and returned when the lease drops
    /// (also when the request's future is dropped mid-way).
    pub(crate) fn take(&self) -> ArenaLease<'_> {
        let bump = self.free.borrow_mut().pop().unwrap_or_default();
        ArenaLease { pool: self, bump }
    }

    /// Frees every arena on the list (the core gives memory back).
    pub(crate) fn clear(&self) {
        *self.free.borrow_mut() = Vec::new();
    }
}

/// An arena lent by [`ArenaPool::take`].
#[derive(Debug)]
pub(crate) struct ArenaLease<'p> {
    pool: &'p ArenaPool,
    bump: Bump,
}

impl Deref for ArenaLease<'_> {
    type Target = Bump;

    fn deref(&self) -> &Bump {
        &self.bump
    }
}

impl Drop for ArenaLease<'_> {
    fn drop(&mut self) {
        // Everything allocated in the arena borrowed the lease, so those
        // borrows (and the values, dropped in place) ended before this
        // runs. `Bump::new` allocates nothing until first used.
        let mut bump = std::mem::take(&mut self.bump);
        // Keeps the largest chunk for the next request.
        bump.reset();
        let mut free = self.pool.free.borrow_mut();
        if free.len() < MAX_FREE_ARENAS {
            free.push(bump);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A burst of large buffers leaves at most `MAX_FREE_BYTES` on the
    /// list, and taking them back out keeps the count.
    #[test]
    fn the_free_list_keeps_a_bounded_number_of_bytes() {
        let pool = BufPool::default();
        let bufs: Vec<Vec<u8>> = (0..1000)
            .map(|_| Vec::with_capacity(MAX_KEPT_CAPACITY))
            .collect();
        for buf in bufs {
            pool.put(buf);
        }
        let kept: usize = pool.free.borrow().iter().map(Vec::capacity).sum();
        assert!(kept <= MAX_FREE_BYTES, "{kept} bytes kept");
        assert!(
            kept > MAX_FREE_BYTES - MAX_KEPT_CAPACITY,
            "{kept} bytes kept"
        );
        assert_eq!(pool.free_bytes.get(), kept);
        let taken = pool.take();
        assert_eq!(pool.free_bytes.get(), kept - taken.capacity());
        pool.put(taken);
        assert_eq!(pool.free_bytes.get(), kept);
        pool.clear();
        assert_eq!(pool.free_bytes.get(), 0);
        assert_eq!(pool.free.borrow().capacity(), 0, "the list's own room too");
    }
}
