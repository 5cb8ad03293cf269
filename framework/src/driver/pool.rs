//! A core's pool of heap buffers for receives that do not use the
//! provided-buffer ring (the epoll backend, and io_uring while the ring is
//! dry or unavailable).

use std::cell::RefCell;

pub(crate) struct HeapPool {
    free: RefCell<Vec<Box<[u8]>>>,
    size: usize,
    /// Free buffers kept for reuse; more are freed when returned.
    keep: usize,
}

impl HeapPool {
    pub(crate) fn new(size: usize, keep: usize) -> HeapPool {
        HeapPool {
            free: RefCell::new(Vec::with_capacity(keep)),
            size,
            keep,
        }
    }

    pub(crate) fn get(&self) -> Box<[u8]> {
        self.free
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| vec![0u8; self.size].into_boxed_slice())
    }

    pub(crate) fn put(&self, buf: Box<[u8]>) {
        let mut free = self.free.borrow_mut();
        if free.len() < self.keep && buf.len() == self.size {
            free.push(buf);
        }
    }

    /// Frees the kept buffers beyond `keep`; returns how many it freed.
    pub(crate) fn shrink_to(&self, keep: usize) -> usize {
        let mut free = self.free.borrow_mut();
        let freed = free.len().saturating_sub(keep);
        free.truncate(keep);
        freed
    }
}
