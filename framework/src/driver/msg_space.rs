//! The message header and iovec array of a gathered send, and each core's
//! pool of them, which spares a send the allocation of its own. Filling a
//! header from the send's buffers is the operation's business
//! (`op::msg_space`); keeping the spaces is the core's I/O state.

use std::cell::RefCell;

/// Buffers one send carries at most: the kernel refuses a `sendmsg` with
/// more iovecs than `UIO_MAXIOV` (`EMSGSIZE`), so longer collections go out
/// in several sends.
pub(crate) const IOV_MAX: usize = 1024;

/// Spare spaces a core keeps: one per gathered send in flight at once.
pub(crate) const KEEP: usize = 1024;

/// The largest iovec array a spare space keeps (1 KiB): a send of more
/// buffers pays for its array rather than have every spare hold 16 KiB.
pub(crate) const KEEP_IOVECS: usize = 64;

/// Spare spaces a core starts with, and the iovecs each has room for
/// (16 × 336 bytes). Made at the start rather than on demand: a core that
/// never had more gathered sends in flight at once than it has now would
/// otherwise allocate (a space, then its array up to three times) the
/// first time one more overlaps, however long after the start that is.
pub(crate) const RESERVED: usize = 16;
pub(crate) const RESERVED_IOVECS: usize = 16;

/// What the kernel reads to find a gathered send's bytes. Boxed: on
/// io_uring the kernel holds a pointer to `hdr` until the completion, and
/// the box moves, unchanged in place, into the slot of an operation whose
/// future was dropped.
pub(crate) struct MsgSpace {
    pub(crate) hdr: libc::msghdr,
    pub(crate) iov: Vec<libc::iovec>,
}

impl MsgSpace {
    pub(crate) fn new() -> Box<MsgSpace> {
        Self::with_room(0)
    }

    pub(crate) fn with_room(iovecs: usize) -> Box<MsgSpace> {
        Box::new(MsgSpace {
            // SAFETY: `msghdr` is plain C data; all zeroes is a valid,
            // empty header (no address, no iovecs, no control data).
            hdr: unsafe { std::mem::zeroed() },
            iov: Vec::with_capacity(iovecs),
        })
    }
}

/// A core's spare [`MsgSpace`]s: a gathered write takes one for its life
/// and gives it back, so that in steady state it allocates nothing.
pub(crate) struct MsgSpaces {
    // Boxed in the `Vec` too: a space taken out is handed to a send whose
    // header must not move, and moving a box moves no header.
    #[allow(clippy::vec_box)]
    pub(crate) free: RefCell<Vec<Box<MsgSpace>>>,
}

impl MsgSpaces {
    pub(crate) fn new() -> MsgSpaces {
        let mut free = Vec::with_capacity(RESERVED);
        free.extend((0..RESERVED).map(|_| MsgSpace::with_room(RESERVED_IOVECS)));
        MsgSpaces {
            free: RefCell::new(free),
        }
    }

    pub(crate) fn take(&self) -> Box<MsgSpace> {
        self.free.borrow_mut().pop().unwrap_or_else(MsgSpace::new)
    }

    /// Keeps `space` for the next send. Its pointers into the last send's
    /// buffers are stale, and never read: `fill` rewrites them first.
    pub(crate) fn put(&self, space: Box<MsgSpace>) {
        let mut free = self.free.borrow_mut();
        if free.len() < KEEP && space.iov.capacity() <= KEEP_IOVECS {
            free.push(space);
        }
    }
}
