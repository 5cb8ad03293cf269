//! The message header and iovec array of a gathered send, and each core's
//! pool of them, which spares a send the allocation of its own.

use std::cell::RefCell;

use super::send_msg::Cursor;
use crate::buf::io_bufs::sealed::Gather;

/// Buffers one send carries at most: the kernel refuses a `sendmsg` with
/// more iovecs than `UIO_MAXIOV` (`EMSGSIZE`), so longer collections go out
/// in several sends.
pub(crate) const IOV_MAX: usize = 1024;

/// Spare spaces a core keeps: one per gathered send in flight at once.
const KEEP: usize = 1024;

/// The largest iovec array a spare space keeps (1 KiB): a send of more
/// buffers pays for its array rather than have every spare hold 16 KiB.
const KEEP_IOVECS: usize = 64;

/// Spare spaces reserved when a core starts.
const RESERVED: usize = 16;

/// What the kernel reads to find a gathered send's bytes. Boxed: on
/// io_uring the kernel holds a pointer to `hdr` until the completion, and
/// the box moves, unchanged in place, into the slot of an operation whose
/// future was dropped.
pub(crate) struct MsgSpace {
    hdr: libc::msghdr,
    iov: Vec<libc::iovec>,
}

impl MsgSpace {
    fn new() -> Box<MsgSpace> {
        Box::new(MsgSpace {
            // SAFETY: `msghdr` is plain C data; all zeroes is a valid,
            // empty header (no address, no iovecs, no control data).
            hdr: unsafe { std::mem::zeroed() },
            iov: Vec::new(),
        })
    }

    /// Points the header at the unsent bytes of `bufs` from `from` on, at
    /// most [`IOV_MAX`] non-empty buffers of them. The pointers are valid
    /// while `bufs` is neither dropped nor changed, which the caller holds
    /// to until the kernel is done.
    pub(crate) fn fill(&mut self, bufs: &impl Gather, from: Cursor) -> *const libc::msghdr {
        self.iov.clear();
        let count = bufs.count();
        self.iov.reserve((count - from.index).min(IOV_MAX));
        let mut offset = from.offset;
        for index in from.index..count {
            if self.iov.len() == IOV_MAX {
                break;
            }
            let bytes = &bufs.bytes(index)[offset..];
            offset = 0;
            if !bytes.is_empty() {
                self.iov.push(libc::iovec {
                    iov_base: bytes.as_ptr().cast_mut().cast(),
                    iov_len: bytes.len(),
                });
            }
        }
        self.hdr.msg_iov = self.iov.as_mut_ptr();
        self.hdr.msg_iovlen = self.iov.len() as _;
        &self.hdr
    }
}

/// A core's spare [`MsgSpace`]s: a gathered write takes one for its life
/// and gives it back, so that in steady state it allocates nothing.
pub(crate) struct MsgSpaces {
    // Boxed in the `Vec` too: a space taken out is handed to a send whose
    // header must not move, and moving a box moves no header.
    #[allow(clippy::vec_box)]
    free: RefCell<Vec<Box<MsgSpace>>>,
}

impl MsgSpaces {
    pub(crate) fn new() -> MsgSpaces {
        MsgSpaces {
            free: RefCell::new(Vec::with_capacity(RESERVED)),
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
