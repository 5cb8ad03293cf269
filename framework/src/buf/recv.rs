//! [`RecvBuf`]: received bytes on loan from the core's buffers.

use std::fmt;
use std::ops::Deref;
use std::rc::Rc;

use super::IoBuf;
use crate::driver::pool::HeapPool;
use crate::driver::uring::buf_ring::BufRing;

enum Source {
    /// A buffer of the io_uring provided-buffer ring.
    Ring { ring: Rc<BufRing>, bid: u16 },
    /// A buffer of the core's heap pool.
    Pool { pool: Rc<HeapPool>, buf: Box<[u8]> },
}

/// Bytes received from a socket, in a buffer lent by the core.
///
/// Dereferences to the received bytes. Dropping it returns the buffer to
/// where it came from (the kernel's buffer ring or the core's pool), so
/// hold it only as long as needed: a core keeps a bounded number of them
/// for reuse (see [`ServerBuilder::recv_buffers`](crate::ServerBuilder::recv_buffers)),
/// and while those are all out each read allocates a new buffer of the
/// same size, so a handler that keeps every `RecvBuf` of a large message
/// grows the process's memory by that much (copy what must be kept
/// instead).
/// It is an [`IoBuf`], so it can be written back out without a copy.
/// A `RecvBuf` belongs to the core that received it (it is `!Send`).
pub struct RecvBuf {
    source: Source,
    start: usize,
    end: usize,
}

impl RecvBuf {
    /// A lease of buffer `bid` of `ring`, holding `len` received bytes.
    ///
    /// # Safety
    ///
    /// A completion took `bid` out of `ring` and reported `len` bytes in
    /// it, and nothing else holds the buffer: the lease reads it until it
    /// is dropped, and then gives it back.
    pub(crate) unsafe fn from_ring(ring: Rc<BufRing>, bid: u16, len: usize) -> RecvBuf {
        RecvBuf {
            source: Source::Ring { ring, bid },
            start: 0,
            end: len,
        }
    }

    pub(crate) fn from_pool(pool: Rc<HeapPool>, buf: Box<[u8]>, len: usize) -> RecvBuf {
        RecvBuf {
            source: Source::Pool { pool, buf },
            start: 0,
            end: len,
        }
    }

    /// Drops the first `n` bytes from the view (they were consumed).
    ///
    /// # Panics
    ///
    /// When `n` exceeds the remaining length.
    pub fn advance(&mut self, n: usize) {
        assert!(
            n <= self.len(),
            "advance({n}) past the end of a {}-byte RecvBuf",
            self.len()
        );
        self.start += n;
    }

    /// Keeps only the first `n` bytes of the view.
    ///
    /// # Panics
    ///
    /// When `n` exceeds the remaining length.
    pub fn truncate(&mut self, n: usize) {
        assert!(
            n <= self.len(),
            "truncate({n}) past the end of a {}-byte RecvBuf",
            self.len()
        );
        self.end = self.start + n;
    }

    fn base(&self) -> *const u8 {
        match &self.source {
            Source::Ring { ring, bid } => ring.buf_ptr(*bid),
            Source::Pool { buf, .. } => buf.as_ptr(),
        }
    }
}

impl Deref for RecvBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.source {
            // SAFETY: the lease owns buffer `bid` until it is dropped, and
            // `end` is at most what the completion reported.
            Source::Ring { ring, bid } => unsafe { &ring.bytes(*bid, self.end)[self.start..] },
            Source::Pool { buf, .. } => &buf[self.start..self.end],
        }
    }
}

impl Drop for RecvBuf {
    fn drop(&mut self) {
        match &mut self.source {
            // SAFETY: the lease has held `bid` since its completion, and
            // gives it back once, here.
            Source::Ring { ring, bid } => unsafe { ring.recycle(*bid) },
            Source::Pool { pool, buf } => pool.put(std::mem::take(buf)),
        }
    }
}

// SAFETY: the bytes live in the ring's mapping or a boxed slice, neither of
// which moves with the lease, and stay ours until the lease is dropped.
unsafe impl IoBuf for RecvBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.base().wrapping_add(self.start)
    }
    fn bytes_init(&self) -> usize {
        self.end - self.start
    }
}

impl fmt::Debug for RecvBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecvBuf")
            .field("len", &self.len())
            .field(
                "source",
                &match self.source {
                    Source::Ring { .. } => "ring",
                    Source::Pool { .. } => "pool",
                },
            )
            .finish()
    }
}
