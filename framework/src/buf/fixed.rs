//! [`FixedBuf`]: write buffers registered with the kernel.
//!
//! Each core has a small pool of buffers carved from one mapping. On
//! io_uring they are registered (`IORING_REGISTER_BUFFERS`), so a send from
//! one skips pinning and mapping the user pages on every call. Registration
//! counts against `RLIMIT_MEMLOCK`; if it is refused the pool stays usable
//! as plain memory and a warning names the limit. On epoll they are plain
//! memory too: handler code is the same on both backends.

use std::fmt;

use std::rc::Rc;

use super::IoBuf;
use crate::driver::current;
use crate::driver::uring::FixedPool;

/// A write buffer from the current core's registered pool.
///
/// Fill it, then pass it to [`write_all`](crate::net::Stream::write_all):
/// on io_uring the send names the registered buffer when the kernel sends
/// from registered buffers (probed at start-up, and logged; Linux 6.18
/// accepts them only for zero-copy sends, so there it is a plain send).
/// Dropping it returns it to the pool. It belongs to its core (`!Send`).
pub struct FixedBuf {
    pool: Rc<FixedPool>,
    index: u16,
    len: usize,
}

impl FixedBuf {
    /// Takes a free buffer from the current core's pool; `None` when all
    /// are in use (fall back to an ordinary buffer then).
    ///
    /// # Panics
    ///
    /// Outside a percore core thread.
    pub fn take() -> Option<FixedBuf> {
        current::with_io(|core| {
            let pool = core.fixed.clone()?;
            let index = pool.free.borrow_mut().pop()?;
            Some(FixedBuf {
                pool,
                index,
                len: 0,
            })
        })
    }

    /// How many bytes the buffer holds at most.
    pub fn capacity(&self) -> usize {
        self.pool.size
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends as much of `data` as fits; returns how many bytes were taken.
    pub fn extend_from_slice(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.capacity() - self.len);
        // SAFETY: `len + n ≤ capacity`, inside this buffer, which this lease
        // owns exclusively; source and destination cannot overlap because
        // `data` is a shared borrow while `self` is borrowed mutably.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.pool.ptr(self.index).add(self.len),
                n,
            );
        }
        self.len += n;
        n
    }

    /// Forgets the contents.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// The whole buffer, for a file read to fill from its start.
    pub(crate) fn whole_mut_ptr(&mut self) -> *mut u8 {
        self.pool.ptr(self.index)
    }

    /// Marks the first `n` bytes as the buffer's contents.
    ///
    /// # Safety
    ///
    /// `n <= capacity()`, and the first `n` bytes were written.
    pub(crate) unsafe fn set_filled(&mut self, n: usize) {
        debug_assert!(n <= self.capacity());
        self.len = n;
    }

    /// The bytes written so far.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the first `len` bytes were written through this lease.
        unsafe { std::slice::from_raw_parts(self.pool.ptr(self.index), self.len) }
    }
}

impl Drop for FixedBuf {
    fn drop(&mut self) {
        self.pool.free.borrow_mut().push(self.index);
    }
}

// SAFETY: the bytes live in the pool's mapping, which does not move and
// outlives the lease (it holds an Rc to the pool).
unsafe impl IoBuf for FixedBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.pool.ptr(self.index)
    }
    fn bytes_init(&self) -> usize {
        self.len
    }
    fn fixed_index(&self) -> Option<u16> {
        self.pool.registered.get().then_some(self.index)
    }
}

impl fmt::Debug for FixedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FixedBuf")
            .field("index", &self.index)
            .field("len", &self.len)
            .finish()
    }
}
