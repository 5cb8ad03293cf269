//! The core's registered write pool: its memory (one mapping, carved into
//! the buffers that `buf::FixedBuf` leases out), its registration, and the
//! start-up probe of whether this kernel sends from registered buffers.
//! On epoll the same pool is plain memory.

use std::cell::RefCell;
use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

use io_uring::{opcode, types};

use super::{fault, warn_once, Driver, PROBE_TOKEN, RECVSEND_FIXED_BUF};
use crate::sys::Mmap;

/// The memory of a core's fixed buffers.
pub(crate) struct FixedPool {
    memory: Mmap,
    count: u16,
    pub(crate) size: usize,
    pub(crate) free: RefCell<Vec<u16>>,
    pub(crate) registered: std::cell::Cell<bool>,
}

impl FixedPool {
    pub(crate) fn new(count: u16, size: usize) -> io::Result<FixedPool> {
        // Checked: every pointer into the pool is computed from `size` on
        // the assumption that `count` buffers of it fit in the mapping.
        let len = (count as usize).checked_mul(size).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{count} fixed buffers of {size} bytes do not fit in memory"),
            )
        })?;
        let memory = Mmap::new(len)?;
        Ok(FixedPool {
            memory,
            count,
            size,
            free: RefCell::new((0..count).rev().collect()),
            registered: std::cell::Cell::new(false),
        })
    }

    /// The iovecs to register, one per buffer.
    pub(crate) fn iovecs(&self) -> Vec<libc::iovec> {
        (0..self.count)
            .map(|i| libc::iovec {
                iov_base: self.ptr(i).cast(),
                iov_len: self.size,
            })
            .collect()
    }

    pub(crate) fn set_registered(&self, registered: bool) {
        self.registered.set(registered);
    }

    pub(crate) fn bytes(&self) -> usize {
        self.count as usize * self.size
    }

    /// The start of buffer `index`.
    ///
    /// # Panics
    ///
    /// When `index` names no buffer of the pool (`index >= count`).
    pub(crate) fn ptr(&self, index: u16) -> *mut u8 {
        // Checked here, not trusted: this function is safe to call with any
        // value.
        assert!(
            index < self.count,
            "fixed buffer {index} out of a pool of {}",
            self.count
        );
        // SAFETY: `index < count` (asserted above), so the offset stays
        // inside the mapping of `count * size` bytes.
        unsafe { self.memory.as_ptr().add(index as usize * self.size) }
    }
}

impl Driver {
    /// Registers the core's write pool, if it has one (marking it
    /// registered, which file reads and writes use), and checks, with a
    /// one-byte send on a socket pair, that this kernel also sends from
    /// registered buffers. A failed registration leaves the pool as plain
    /// memory.
    pub(super) fn register_fixed(&mut self) -> bool {
        static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        let Some(pool) = self.fixed_pool.clone() else {
            return false;
        };
        let iovecs = pool.iovecs();
        let registered = match fault::register_buffers_error() {
            Some(e) => Err(e),
            // SAFETY: the iovecs describe the mapping of `fixed_pool`, which
            // the driver holds until after the ring is dropped.
            None => unsafe { self.ring.submitter().register_buffers(&iovecs) },
        };
        if let Err(e) = registered {
            warn_once(&WARNED, || {
                tracing::warn!(
                    error = %e,
                    needed_bytes = pool.bytes(),
                    "could not register the fixed write buffers (locked-memory limit? raise `ulimit -l` \
                     or LimitMEMLOCK=); sending from unregistered buffers"
                )
            });
            return false;
        }
        pool.set_registered(true);
        // SAFETY: `iovecs[0]` is buffer 0 of the pool just registered, whose
        // memory outlives the ring (above).
        unsafe { self.probe_fixed_send(iovecs[0].iov_base.cast()) }
    }

    /// Whether a send from registered buffer 0 goes through.
    ///
    /// # Safety
    ///
    /// `first` points into buffer 0 of the registered buffers, whose memory
    /// outlives the ring.
    unsafe fn probe_fixed_send(&mut self, first: *const u8) -> bool {
        let Ok((a, b)) = crate::sys::socket_pair() else {
            return false;
        };
        let sqe = opcode::Send::new(types::Fd(a.as_raw_fd()), first, 1)
            .ioprio(RECVSEND_FIXED_BUF)
            .buf_group(0)
            .build()
            .user_data(PROBE_TOKEN);
        // SAFETY: the send reads one byte at `first`, which outlives the
        // ring (this function's contract), and `a` stays open until the SQE
        // is submitted (below).
        if unsafe { self.push_sqe(&sqe) }.is_err() {
            return false;
        }
        let mut result = None;
        self.await_probe(PROBE_TOKEN, Duration::from_secs(3), |cqe| {
            result = Some(cqe.res);
            true
        });
        // An enter that failed may have left the send queued: its socket
        // stays open until it is submitted, so that it cannot reach
        // whatever reuses the descriptor's number.
        self.keep_open_until_submitted(std::rc::Rc::new(a));
        drop(b);
        tracing::debug!(?result, "fixed-buffer send probe");
        result == Some(1)
    }
}
