//! Datagram operations: one `recvmsg` or `sendmsg` per datagram, on both
//! backends (`IORING_OP_RECVMSG` and `IORING_OP_SENDMSG` on io_uring, the
//! non-blocking syscalls tried before waiting on epoll).
//!
//! The kernel reads a message header by pointer, and through it the
//! iovec, the peer's address and the control data, and on io_uring it does
//! so until the completion. They live together in a boxed [`MsgBox`],
//! which the operation holds to the completion or hands to its slot when
//! its future is dropped in flight. The boxes come from the socket's own
//! spares ([`Spares`]), so a steady stream of datagrams allocates none.

pub(crate) mod batch;
pub(crate) mod recv;
pub(crate) mod send;

use std::cell::{Cell, RefCell};

use crate::sys::RawAddr;

/// Room for the control messages percore sends or reads: one
/// `UDP_SEGMENT` (a `u16`) or one `UDP_GRO` (an `int`), with room to spare
/// for one more the kernel may add.
const CONTROL_LEN: usize = 64;

/// Spare boxes a socket keeps: one per operation in flight at once, up to
/// this many.
const KEEP: usize = 64;

/// Control data, aligned as `cmsghdr` needs.
#[repr(C, align(8))]
struct Control([u8; CONTROL_LEN]);

/// What the kernel reads (and on a receive, writes) around one datagram.
pub(crate) struct MsgBox {
    hdr: libc::msghdr,
    iov: libc::iovec,
    addr: RawAddr,
    control: Control,
}

impl MsgBox {
    fn new() -> Box<MsgBox> {
        Box::new(MsgBox {
            // SAFETY: `msghdr` and `iovec` are plain C data; all zeroes is
            // an empty header and an empty iovec.
            hdr: unsafe { std::mem::zeroed() },
            // SAFETY: as above.
            iov: unsafe { std::mem::zeroed() },
            addr: RawAddr::empty(),
            control: Control([0; CONTROL_LEN]),
        })
    }

    /// Points the header at `len` bytes from `ptr`, at the address if one
    /// is given (a send to it) or at the address room (a receive), and at
    /// the control room when `control` bytes of it are used.
    fn point(&mut self, ptr: *mut u8, len: usize, addr: Option<RawAddr>, control: usize) {
        self.iov = libc::iovec {
            iov_base: ptr.cast(),
            iov_len: len,
        };
        self.hdr.msg_iov = &mut self.iov;
        self.hdr.msg_iovlen = 1;
        match addr {
            Some(addr) => {
                self.addr = addr;
                self.hdr.msg_name = self.addr.as_mut_ptr().cast();
                self.hdr.msg_namelen = addr.len;
            }
            None => {
                self.addr = RawAddr::empty();
                self.hdr.msg_name = self.addr.as_mut_ptr().cast();
                self.hdr.msg_namelen = self.addr.len;
            }
        }
        self.hdr.msg_control = self.control.0.as_mut_ptr().cast();
        self.hdr.msg_controllen = control as _;
        self.hdr.msg_flags = 0;
    }

    /// A send without an address (on a connected socket).
    fn no_addr(&mut self) {
        self.hdr.msg_name = std::ptr::null_mut();
        self.hdr.msg_namelen = 0;
    }

    /// A send without control data.
    fn no_control(&mut self) {
        self.hdr.msg_control = std::ptr::null_mut();
        self.hdr.msg_controllen = 0;
    }

    /// Writes one `UDP_SEGMENT` control message of `size` into the
    /// control room; returns its length, for [`point`](Self::point).
    fn put_segment(&mut self, size: u16) -> usize {
        let data = std::mem::size_of::<u16>() as u32;
        // Pure arithmetic on sizes.
        // SAFETY: CMSG_LEN and CMSG_SPACE only compute lengths.
        let (len, space) = unsafe { (libc::CMSG_LEN(data), libc::CMSG_SPACE(data)) };
        let cmsg = libc::cmsghdr {
            cmsg_len: len as _,
            cmsg_level: libc::SOL_UDP,
            cmsg_type: libc::UDP_SEGMENT,
        };
        let head = std::mem::size_of::<libc::cmsghdr>();
        // SAFETY: the control room is 8-aligned and CONTROL_LEN bytes,
        // more than `space` (24); the header goes at its start and the
        // `u16` right after it, where `CMSG_DATA` puts it on Linux.
        unsafe {
            let base = self.control.0.as_mut_ptr();
            base.cast::<libc::cmsghdr>().write(cmsg);
            base.add(head).cast::<u16>().write_unaligned(size);
        }
        space as usize
    }

    /// The `UDP_GRO` segment size among the control messages the kernel
    /// wrote, if there is one.
    fn gro_segment(&self) -> Option<usize> {
        let written = self.hdr.msg_controllen.min(CONTROL_LEN);
        let head = std::mem::size_of::<libc::cmsghdr>();
        let mut at = 0;
        // Walked by hand over the bytes (as `CMSG_NXTHDR` does), so that
        // nothing is read past what the kernel wrote.
        while at + head <= written {
            // SAFETY: `at + head <= written <= CONTROL_LEN`, and `at` is a
            // multiple of 8 within the 8-aligned room: a whole header.
            let cmsg = unsafe {
                self.control
                    .0
                    .as_ptr()
                    .add(at)
                    .cast::<libc::cmsghdr>()
                    .read()
            };
            let len = cmsg.cmsg_len;
            if len < head || at + len > written {
                return None;
            }
            if cmsg.cmsg_level == libc::SOL_UDP
                && cmsg.cmsg_type == libc::UDP_GRO
                && len >= head + std::mem::size_of::<libc::c_int>()
            {
                // SAFETY: the message's data lies within its `len` bytes,
                // inside what the kernel wrote.
                let size = unsafe {
                    self.control
                        .0
                        .as_ptr()
                        .add(at + head)
                        .cast::<libc::c_int>()
                        .read_unaligned()
                };
                return usize::try_from(size).ok().filter(|&s| s > 0);
            }
            at += len.next_multiple_of(std::mem::size_of::<usize>());
        }
        None
    }

    /// The sender's address the kernel wrote, if any.
    fn peer(&self) -> Option<std::net::SocketAddr> {
        if self.hdr.msg_namelen == 0 {
            return None;
        }
        let mut addr = self.addr;
        addr.len = self.hdr.msg_namelen;
        addr.to_std().ok()
    }
}

/// A socket's spare [`MsgBox`]es, and what its receives learnt.
pub(crate) struct Spares {
    // Boxed in the `Vec` too: a box taken out is handed to an operation
    // whose header must not move.
    #[allow(clippy::vec_box)]
    free: RefCell<Vec<Box<MsgBox>>>,
    /// io_uring: whether datagrams were flowing at the last receive (it
    /// found one queued, or its SQE completed), so that the next one
    /// tries a non-blocking `recvmsg` before it submits: a busy socket
    /// then costs one system call per datagram, not an SQE and a trip
    /// through the ring. Cleared when a try finds the queue empty, so an
    /// idle socket pays at most one wasted try per wait.
    pub(crate) flowing: Cell<bool>,
    /// GRO is on: receives need control data (`recvmsg`, not `recvfrom`).
    pub(crate) gro: Cell<bool>,
}

impl Spares {
    pub(crate) fn new() -> Spares {
        Spares {
            free: RefCell::new(Vec::new()),
            flowing: Cell::new(true),
            gro: Cell::new(false),
        }
    }

    fn take(&self) -> Box<MsgBox> {
        self.free.borrow_mut().pop().unwrap_or_else(MsgBox::new)
    }

    fn put(&self, space: Box<MsgBox>) {
        let mut free = self.free.borrow_mut();
        if free.len() < KEEP {
            free.push(space);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_message_is_read_back_as_written() {
        let mut space = MsgBox::new();
        let len = space.put_segment(1200);
        assert!(len <= CONTROL_LEN);
        // What the kernel's GRO message looks like: the same header, an int.
        let head = std::mem::size_of::<libc::cmsghdr>();
        // SAFETY: the room is 8-aligned and large enough for a header and
        // an int.
        unsafe {
            let base = space.control.0.as_mut_ptr();
            base.cast::<libc::cmsghdr>().write(libc::cmsghdr {
                cmsg_len: (head + 4) as _,
                cmsg_level: libc::SOL_UDP,
                cmsg_type: libc::UDP_GRO,
            });
            base.add(head).cast::<i32>().write_unaligned(1200);
        }
        space.hdr.msg_controllen = (head + 4) as _;
        assert_eq!(space.gro_segment(), Some(1200));
        space.hdr.msg_controllen = 0;
        assert_eq!(space.gro_segment(), None);
        // A length that claims more than was written is not followed.
        space.hdr.msg_controllen = (head + 2) as _;
        assert_eq!(space.gro_segment(), None);
    }
}
