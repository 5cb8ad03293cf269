//! The provided-buffer ring that multishot receives pick buffers from.
//!
//! One ring per core (buffer group 0). The kernel takes a buffer only when
//! data arrives, so an idle connection holds none. A buffer handed to user
//! code travels in a [`RecvBuf`](crate::buf::RecvBuf) lease and goes back
//! when the lease is dropped. Neither the ring nor the buffers are pinned
//! against memlock: only the ring's entries are shared with the kernel,
//! through `IORING_REGISTER_PBUF_RING`.
//!
//! # A shallow ring over a LIFO reserve
//!
//! The kernel takes buffers in ring order, so a ring holding every buffer
//! cycles through all of them: with 256 of 32 KiB, each receive wrote
//! into memory last touched 8 MiB of traffic ago, far out of cache. A bulk
//! transfer on io_uring then spent half as much CPU again as the same
//! transfer on epoll, whose pool hands back the buffer freed last. So only
//! a [`RingDepth`] of buffers is in the ring at a time. A returned buffer
//! refills the ring if it is below its depth and otherwise waits on a
//! stack, from which the ring is topped up before each trip to the kernel,
//! most recently used first.

use std::cell::{Cell, RefCell};
use std::io;

use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::IoUring;

use super::ring_depth::RingDepth;
use crate::sys::Mmap;

/// The kernel's `struct io_uring_buf`, one entry of the ring; `resv` of
/// entry 0 is the ring's tail.
#[repr(C)]
struct RawEntry {
    addr: u64,
    len: u32,
    bid: u16,
    resv: u16,
}

const _: () = assert!(std::mem::size_of::<RawEntry>() == std::mem::size_of::<BufRingEntry>());

/// The buffer group id percore registers its ring under.
pub(crate) const BUF_GROUP: u16 = 0;

/// Extra bytes between consecutive buffers. Buffers a power-of-two size
/// apart all start in the same cache set, so the few lines a small request
/// occupies at each buffer's start would evict each other; one line more
/// per buffer spreads the starts over the sets.
const STAGGER: usize = 64;

pub(crate) struct BufRing {
    entries: Mmap,
    buffers: Mmap,
    count: u16,
    buf_size: usize,
    /// Distance between the starts of consecutive buffers.
    stride: usize,
    /// Our copy of the ring's tail (the kernel only reads it).
    tail: Cell<u16>,
    /// Buffers in the ring, as far as completions tell: pushed and not yet
    /// reported taken.
    provided: Cell<u32>,
    /// Returned buffers not in the ring, the most recently used on top.
    /// Allocated for every buffer up front: pushing never allocates.
    reserve: RefCell<Vec<u16>>,
    /// How many buffers the ring is kept at.
    depth: RingDepth,
}

impl BufRing {
    /// Allocates `count` buffers of `buf_size` bytes and registers them with
    /// `ring`. `count` must be a power of two ≤ 32768.
    ///
    /// # Safety
    ///
    /// The kernel reads the ring's entries and writes into its buffers for
    /// every receive on `ring` that selects from group [`BUF_GROUP`]: none
    /// may run after the returned value is dropped (drop `ring` first, or
    /// submit none).
    pub(crate) unsafe fn register(
        ring: &IoUring,
        count: u16,
        buf_size: usize,
    ) -> io::Result<BufRing> {
        if super::fault::no_buf_ring() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        if !count.is_power_of_two() || count > 32768 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "buffer ring size must be a power of two ≤ 32768",
            ));
        }
        // Checked: the kernel takes a buffer's length as a u32, and every
        // buffer pointer is computed on the assumption that `count`
        // strides fit in the mapping.
        let too_big = || {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{count} ring buffers of {buf_size} bytes are too large"),
            )
        };
        u32::try_from(buf_size).map_err(|_| too_big())?;
        let stride = buf_size.checked_add(STAGGER).ok_or_else(too_big)?;
        let buffers_len = (count as usize).checked_mul(stride).ok_or_else(too_big)?;
        let entries = Mmap::new(count as usize * std::mem::size_of::<BufRingEntry>())?;
        let buffers = Mmap::new(buffers_len)?;
        let this = BufRing {
            entries,
            buffers,
            count,
            buf_size,
            stride,
            tail: Cell::new(0),
            provided: Cell::new(0),
            reserve: RefCell::new(Vec::with_capacity(count as usize)),
            depth: RingDepth::new(u32::from(count)),
        };
        // SAFETY: the entries mapping is page aligned, sized for `count`
        // entries, and lives in `this`, which outlives every receive that
        // uses it (this function's contract).
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                this.entries.as_ptr() as u64,
                count,
                BUF_GROUP,
                0,
            )?;
        }
        // Lowest ids on top of the reserve, so they go into the ring first.
        this.reserve.borrow_mut().extend((0..count).rev());
        this.top_up();
        Ok(this)
    }

    /// The size of every buffer: a receive that fills one may have left
    /// more data in the socket.
    pub(crate) fn buf_size(&self) -> usize {
        self.buf_size
    }

    /// Buffers held by completions and leases right now.
    pub(crate) fn leased(&self) -> usize {
        (usize::from(self.count))
            .saturating_sub(self.provided.get() as usize)
            .saturating_sub(self.reserve.borrow().len())
    }

    /// Records that a completion took a buffer out of the ring.
    pub(crate) fn taken(&self) {
        self.provided.set(self.provided.get().saturating_sub(1));
    }

    /// Records that a receive found the ring dry (`ENOBUFS`).
    pub(crate) fn starved(&self) {
        self.depth.starved();
    }

    /// Ends a driver turn in which `receivers` connections took buffers.
    pub(crate) fn end_turn(&self, receivers: u32) {
        self.depth.end_turn(receivers);
    }

    /// Fills the ring up to its depth from the reserve, most recently
    /// returned buffers first. Called before each trip to the kernel.
    pub(crate) fn top_up(&self) {
        let mut reserve = self.reserve.borrow_mut();
        let mut pushed = false;
        while self.provided.get() < self.depth.get() {
            let Some(bid) = reserve.pop() else { break };
            self.push(bid);
            pushed = true;
        }
        if pushed {
            self.publish();
        }
    }

    /// The bytes of buffer `bid`.
    ///
    /// # Safety
    ///
    /// - `bid` came from a completion and has not been returned yet, so the
    ///   kernel does not write to it;
    /// - `len` is at most what that completion reported.
    pub(crate) unsafe fn bytes(&self, bid: u16, len: usize) -> &[u8] {
        debug_assert!(bid < self.count && len <= self.buf_size);
        // SAFETY: per the contract the buffer is ours and `len` bytes of it
        // were written by the kernel; the mapping outlives `&self`.
        unsafe {
            std::slice::from_raw_parts(self.buffers.as_ptr().add(bid as usize * self.stride), len)
        }
    }

    /// The start of buffer `bid`, for sending it without a copy.
    ///
    /// # Panics
    ///
    /// When `bid` names no buffer of this ring (`bid >= count`).
    pub(crate) fn buf_ptr(&self, bid: u16) -> *const u8 {
        // Checked here, not trusted: `bid` comes from a completion's flags
        // and this function is safe to call with any value.
        assert!(
            bid < self.count,
            "buffer id {bid} out of a ring of {}",
            self.count
        );
        // SAFETY: `bid < count` (asserted above), so the offset stays inside
        // the mapping of `count * stride` bytes.
        unsafe { self.buffers.as_ptr().add(bid as usize * self.stride) }
    }

    /// Takes buffer `bid` back: into the ring if it is below its depth,
    /// otherwise onto the reserve.
    ///
    /// # Safety
    ///
    /// A completion took `bid` out of the ring, and nothing holds or reads
    /// it any more: the kernel may write into it as soon as it is back.
    /// Each buffer taken is given back once.
    pub(crate) unsafe fn recycle(&self, bid: u16) {
        if self.provided.get() < self.depth.get() {
            self.push(bid);
            self.publish();
        } else {
            self.reserve.borrow_mut().push(bid);
        }
    }

    fn push(&self, bid: u16) {
        debug_assert!(bid < self.count);
        let tail = self.tail.get();
        let index = (tail & (self.count - 1)) as usize;
        // Each field is written through a raw pointer, never a `&mut` to
        // the whole entry: entry 0's reserved field is the ring's tail,
        // which the kernel reads at any time.
        // SAFETY: `index < count`, inside the entries mapping (kernel
        // `struct io_uring_buf` layout, `RawEntry`); the kernel never writes
        // entries and reads this one only after `publish`.
        unsafe {
            let entry = self.entries.as_ptr().cast::<RawEntry>().add(index);
            std::ptr::addr_of_mut!((*entry).addr).write(self.buf_ptr(bid) as u64);
            // Lossless: `register` refused sizes past `u32::MAX`.
            std::ptr::addr_of_mut!((*entry).len).write(self.buf_size as u32);
            std::ptr::addr_of_mut!((*entry).bid).write(bid);
        }
        self.tail.set(tail.wrapping_add(1));
        self.provided.set(self.provided.get() + 1);
    }

    fn publish(&self) {
        // The tail lives in entry 0's reserved field (`BufRingEntry::tail`),
        // 2-byte aligned; the kernel reads it with an acquire load.
        // SAFETY: valid aligned tail; the release store publishes the entries.
        unsafe {
            let base = self.entries.as_ptr().cast::<BufRingEntry>();
            let tail = BufRingEntry::tail(base).cast_mut().cast::<AtomicU16>();
            (*tail).store(self.tail.get(), Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl BufRing {
        /// The ids of the last `n` buffers pushed, oldest first.
        fn last_pushed(&self, n: u16) -> Vec<u16> {
            let tail = self.tail.get();
            (1..=n)
                .rev()
                .map(|back| {
                    let index = (tail.wrapping_sub(back) & (self.count - 1)) as usize;
                    // SAFETY: `index < count`, inside the entries mapping,
                    // which only this value writes.
                    unsafe {
                        let entry = self.entries.as_ptr().cast::<BufRingEntry>().add(index);
                        (*entry).bid()
                    }
                })
                .collect()
        }
    }

    #[test]
    #[should_panic(expected = "out of a ring of 64")]
    fn a_buffer_id_past_the_ring_is_refused() {
        let ring = IoUring::new(8).expect("io_uring");
        // SAFETY: nothing is submitted to `ring`.
        let bufs = unsafe { BufRing::register(&ring, 64, 128) }.expect("buffer ring");
        let _ = bufs.buf_ptr(64);
    }

    #[test]
    fn the_ring_stays_shallow_and_refills_with_the_buffers_freed_last() {
        let ring = IoUring::new(8).expect("io_uring");
        // SAFETY: nothing is submitted to `ring`, so the kernel never reads
        // the ring or writes a buffer, and `recycle` below can break nothing.
        let bufs = unsafe { BufRing::register(&ring, 64, 128) }.expect("buffer ring");
        let depth = bufs.depth.get();
        assert!(depth < 64, "shallow at first: {depth}");
        assert_eq!(bufs.provided.get(), depth);
        assert_eq!(bufs.leased(), 0);

        // The kernel takes three; the first buffer back goes straight in.
        bufs.taken();
        bufs.taken();
        bufs.taken();
        assert_eq!(bufs.leased(), 3);
        // SAFETY: no receive runs (above).
        unsafe { bufs.recycle(1) };
        assert_eq!(bufs.last_pushed(1), [1]);
        // Filled up from the reserve, the ring takes no more: the other two
        // wait on the reserve, the last one back on top.
        bufs.top_up();
        assert_eq!(bufs.provided.get(), depth);
        // SAFETY: no receive runs (above).
        unsafe {
            bufs.recycle(0);
            bufs.recycle(2);
        }
        assert_eq!(bufs.provided.get(), depth);
        assert_eq!(bufs.leased(), 0);

        // Topping up takes the most recently freed first.
        bufs.taken();
        bufs.taken();
        bufs.top_up();
        assert_eq!(bufs.last_pushed(2), [2, 0]);
        assert_eq!(bufs.provided.get(), depth);
    }
}
