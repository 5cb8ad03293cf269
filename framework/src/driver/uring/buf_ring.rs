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
use std::os::fd::AsRawFd;

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

/// The kernel's `struct io_uring_buf_status`, what
/// `IORING_REGISTER_PBUF_STATUS` reads of a ring.
#[repr(C)]
struct BufStatus {
    buf_group: u32,
    head: u32,
    resv: [u32; 8],
}

/// `IORING_REGISTER_PBUF_STATUS` (Linux 6.8).
const REGISTER_PBUF_STATUS: libc::c_long = 26;

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
    /// One bit per buffer, for [`release_free`](Self::release_free):
    /// allocated here so that giving back allocates nothing.
    free_map: RefCell<Vec<u64>>,
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
            free_map: RefCell::new(vec![0; (count as usize).div_ceil(64)]),
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

    /// The kernel's head of the ring: the entry it takes next. Entries
    /// from there to our tail are buffers it has not taken. `EINVAL`
    /// before Linux 6.8 (`IORING_REGISTER_PBUF_STATUS`).
    pub(crate) fn kernel_head(&self, ring: &IoUring) -> io::Result<u16> {
        let mut status = BufStatus {
            buf_group: u32::from(BUF_GROUP),
            head: 0,
            resv: [0; 8],
        };
        // SAFETY: `status` is a live `struct io_uring_buf_status`, which
        // the kernel fills for the one argument named; the ring's fd is
        // open for as long as `ring`.
        let res = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                ring.as_raw_fd(),
                REGISTER_PBUF_STATUS,
                std::ptr::addr_of_mut!(status),
                1,
            )
        };
        if res < 0 {
            return Err(io::Error::last_os_error());
        }
        // The kernel's head is 16 bits wide, like our tail.
        Ok(status.head as u16)
    }

    /// Gives the pages of the buffers that hold nothing back to the
    /// kernel: those on the reserve and, with `kernel_head`, those in the
    /// ring that the kernel has not taken. They are zero-filled when next
    /// written. Buffers out in completions and leases keep theirs. Returns
    /// the bytes given back.
    ///
    /// # Safety
    ///
    /// `kernel_head`, if given, is [`kernel_head`](Self::kernel_head) read
    /// while no receive could take a buffer, and none can until this
    /// returns (a `DEFER_TASKRUN` ring of this thread, which takes buffers
    /// only inside its `io_uring_enter`).
    pub(crate) unsafe fn release_free(&self, kernel_head: Option<u16>) -> usize {
        let count = usize::from(self.count);
        let mut free = self.free_map.borrow_mut();
        free.fill(0);
        let mut mark = |bid: u16| {
            let bid = usize::from(bid);
            if bid < count {
                free[bid / 64] |= 1 << (bid % 64);
            }
        };
        for &bid in self.reserve.borrow().iter() {
            mark(bid);
        }
        let tail = self.tail.get();
        let in_ring = kernel_head.map_or(0, |head| tail.wrapping_sub(head));
        // More than the ring holds would be a head that is not this ring's.
        if usize::from(in_ring) <= count {
            for back in 1..=in_ring {
                let index = usize::from(tail.wrapping_sub(back) & (self.count - 1));
                // SAFETY: `index < count`, inside the entries mapping; the
                // kernel only reads the entries.
                let bid = unsafe {
                    let entry = self.entries.as_ptr().cast::<RawEntry>().add(index);
                    std::ptr::addr_of!((*entry).bid).read()
                };
                mark(bid);
            }
        }
        let mut released = 0;
        let mut bid = 0;
        while bid < count {
            let is_free = |b: usize| free[b / 64] & (1 << (b % 64)) != 0;
            if !is_free(bid) {
                bid += 1;
                continue;
            }
            let first = bid;
            while bid < count && is_free(bid) {
                bid += 1;
            }
            // Buffers `first..bid` are free: a reserve buffer is held by
            // nobody (`recycle`'s contract), one in the ring is not taken
            // before this returns (this function's contract), and the
            // kernel writes a taken buffer before anyone reads it.
            // SAFETY: so discarding their pages loses no data (see above).
            released += unsafe { self.buffers.discard(first * self.stride..bid * self.stride) };
        }
        released
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
    fn giving_back_zeroes_the_free_buffers_and_keeps_the_taken_ones() {
        const SIZE: usize = 8192;
        let ring = IoUring::new(8).expect("io_uring");
        // SAFETY: nothing is submitted to `ring`, so the kernel never
        // writes a buffer: the test writes them all, and gives them back.
        let bufs = unsafe { BufRing::register(&ring, 64, SIZE) }.expect("buffer ring");
        for bid in 0..64u16 {
            // SAFETY: inside buffer `bid`, which nothing else touches.
            unsafe { std::ptr::write_bytes(bufs.buf_ptr(bid).cast_mut(), bid as u8 + 1, SIZE) };
        }
        // Nothing submitted, nothing taken: the kernel's head is the
        // first entry (on kernels that can say).
        match bufs.kernel_head(&ring) {
            Ok(head) => assert_eq!(head, 0),
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}"),
        }
        // As if the kernel had taken the first three buffers of the ring
        // (0, 1, 2: the lowest ids go in first), still held by readers.
        for _ in 0..3 {
            bufs.taken();
        }
        let head = bufs.tail.get().wrapping_sub(bufs.provided.get() as u16);
        // SAFETY: no receive runs (above), so none takes a buffer.
        let released = unsafe { bufs.release_free(Some(head)) };

        let bytes = |bid: u16| {
            // SAFETY: the whole of buffer `bid`, written above.
            unsafe { bufs.bytes(bid, SIZE) }
        };
        for bid in 0..3 {
            assert!(
                bytes(bid).iter().all(|&b| b == bid as u8 + 1),
                "taken buffer {bid} kept"
            );
        }
        // The whole pages from buffer 3's to the mapping's end; buffer 3
        // shares its first page with buffer 2, which is held.
        let page = 4096;
        let (start, end) = (
            (3 * bufs.stride).next_multiple_of(page),
            64 * bufs.stride / page * page,
        );
        assert_eq!(released, end - start);
        for bid in 4..64 {
            assert!(
                bytes(bid).iter().all(|&b| b == 0),
                "free buffer {bid} given back"
            );
        }
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
