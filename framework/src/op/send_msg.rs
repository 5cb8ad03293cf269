//! Sending several owned buffers, in order, with gathered sends.
//!
//! io_uring: an `IORING_OP_SENDMSG` with `MSG_NOSIGNAL`, whose header and
//! iovec array live in a boxed [`MsgSpace`] from the core's pool; if the
//! future is dropped before the completion, the buffers and the space move
//! into the operation's slot and are freed only after the kernel is done.
//! epoll: a non-blocking `sendmsg`, waiting for writability on `EAGAIN`.
//!
//! The operation keeps the position of the first unsent byte, so a partial
//! send (one that ends inside a buffer, or after [`IOV_MAX`] buffers) is
//! resumed by polling again. Registered buffers ([`FixedBuf`]) are sent as
//! plain memory: `IORING_OP_SENDMSG` takes no registered-buffer index.
//!
//! [`FixedBuf`]: crate::buf::FixedBuf
//! [`IOV_MAX`]: super::msg_space::IOV_MAX

use std::io;
use std::os::fd::AsRawFd;
use std::task::{Context, Poll};

use io_uring::{opcode, types};

use super::lifecycle::{Op, OpAble, Sqe};
use super::msg_space::MsgSpace;
use super::send::poll_epoll_send;
use super::{cqe_result, SharedFd, SocketIo};
use crate::buf::io_bufs::sealed::Gather;
use crate::buf::IoBufs;
use crate::driver::current::{self, Io};
use crate::driver::epoll::{self, SourceKey};
use crate::driver::uring::{self, Cqe, OpKind, Retained};

/// Where the unsent bytes of a collection start.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cursor {
    pub(crate) index: usize,
    pub(crate) offset: usize,
}

impl Cursor {
    /// Moves past `n` sent bytes and past the empty buffers after them, so
    /// that the cursor rests on a byte to send, or at the end.
    fn advance(&mut self, bufs: &impl Gather, mut n: usize) {
        while self.index < bufs.count() {
            let left = bufs.bytes(self.index).len() - self.offset;
            if n < left {
                self.offset += n;
                return;
            }
            n -= left;
            self.index += 1;
            self.offset = 0;
        }
    }
}

/// Sends the buffers of a collection in order, one gathered send per
/// [`poll_send`](SendMsg::poll_send) until [`is_done`](SendMsg::is_done).
pub(crate) struct SendMsg<'a, B: IoBufs>(Op<'a, Gathered<'a, B>>);

/// What a gathered send is made of.
pub(crate) struct Gathered<'a, B: IoBufs> {
    fd: &'a SharedFd,
    bufs: Option<B>,
    /// Taken from the core's pool at the first send, kept for the next.
    space: Option<Box<MsgSpace>>,
    next: Cursor,
}

impl<'a, B: IoBufs> SendMsg<'a, B> {
    pub(crate) fn new(fd: &'a SharedFd, io: &'a SocketIo, bufs: B) -> Self {
        let mut next = Cursor::default();
        next.advance(&bufs, 0);
        let gathered = Gathered {
            fd,
            bufs: Some(bufs),
            space: None,
            next,
        };
        SendMsg(Op::on_socket(io, gathered))
    }

    /// Whether every byte has been sent (or the buffers were taken).
    pub(crate) fn is_done(&self) -> bool {
        let gathered = self.0.data();
        gathered
            .bufs
            .as_ref()
            .is_none_or(|bufs| gathered.next.index >= bufs.count())
    }

    /// The buffers, unless a send is in flight; the space goes back to the
    /// core's pool.
    pub(crate) fn take_bufs(&mut self) -> Option<B> {
        if self.0.in_flight() {
            return None;
        }
        let gathered = self.0.data_mut();
        gathered.give_back_space();
        gathered.bufs.take()
    }

    /// One gathered send from the first unsent byte; resolves to the count
    /// the kernel took, which the next send starts after.
    pub(crate) fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let res = std::task::ready!(self.0.poll(cx));
        if let Ok(n) = &res {
            let gathered = self.0.data_mut();
            if let Some(bufs) = &gathered.bufs {
                gathered.next.advance(bufs, *n);
            }
        }
        Poll::Ready(res)
    }
}

impl<B: IoBufs> Gathered<'_, B> {
    /// Points the space's header at the unsent bytes.
    fn fill(&mut self, core: &Io) -> *const libc::msghdr {
        let Some(bufs) = self.bufs.as_ref() else {
            panic!("SendMsg polled after completion")
        };
        let space = self.space.get_or_insert_with(|| core.msg_spaces.take());
        space.fill(bufs, self.next)
    }

    fn give_back_space(&mut self) {
        if let Some(space) = self.space.take() {
            current::try_with_io(|core| core.msg_spaces.put(space));
        }
    }
}

// SAFETY: the header, its iovecs (in `space`'s box) and their bytes (in
// `bufs`) stay in place when the operation moves, and
// `dropped_in_flight` hands all of them to the slot. The descriptor, as
// for `Send`: the stream outlives the `Op`, and `dropped_in_flight` hands
// one to the slot.
unsafe impl<B: IoBufs> OpAble for Gathered<'_, B> {
    type Output = usize;

    fn uring_sqe(&mut self, core: &Io, _d: &uring::Driver) -> Sqe {
        let hdr = self.fill(core);
        let entry = opcode::SendMsg::new(types::Fd(self.fd.as_raw_fd()), hdr)
            .flags(libc::MSG_NOSIGNAL as u32)
            .build();
        Sqe {
            entry,
            kind: OpKind::Send,
            retained: Retained::None,
        }
    }

    fn uring_done(&mut self, cqe: Cqe, _retained: Retained) -> Option<io::Result<usize>> {
        Some(cqe_result(cqe.res).map(|n| n as usize))
    }

    fn poll_epoll(
        &mut self,
        core: &Io,
        d: &mut epoll::Driver,
        source: SourceKey,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        let fd = self.fd.as_raw_fd();
        // The raw syscall, as for `Send` (no cancellation-point wrapper).
        poll_epoll_send(d, source, cx, || {
            let hdr = self.fill(core);
            // Every argument is register-sized, as `syscall` reads them.
            // SAFETY: `hdr`, its iovecs (in `space`) and their bytes (in
            // `bufs`) are held by this operation for the call.
            unsafe {
                libc::syscall(
                    libc::SYS_sendmsg,
                    libc::c_long::from(fd),
                    hdr,
                    libc::c_long::from(libc::MSG_NOSIGNAL),
                )
            }
        })
    }

    fn dropped_in_flight(&mut self) -> Retained {
        // The kernel may still read the header, the iovecs and the bytes:
        // all of them go to the slot, in place (each behind a pointer that
        // the move does not change).
        let held = (self.bufs.take(), self.space.take());
        Retained::Buffer(self.fd.retain(), Box::new(held))
    }

    fn bytes_out(n: &usize) -> Option<u64> {
        Some(*n as u64)
    }
}

impl<B: IoBufs> Drop for Gathered<'_, B> {
    fn drop(&mut self) {
        // Runs after the `Op`'s drop, which took the space if a send was
        // in flight: this one is idle, and goes back to the core's pool.
        self.give_back_space();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn advanced(bufs: &impl Gather, from: Cursor, n: usize) -> (usize, usize) {
        let mut cursor = from;
        cursor.advance(bufs, n);
        (cursor.index, cursor.offset)
    }

    #[test]
    fn a_partial_send_resumes_inside_a_buffer_or_past_a_boundary() {
        let bufs = (b"abc".to_vec(), Vec::new(), b"de".to_vec(), Vec::new());
        let start = Cursor::default();
        assert_eq!(advanced(&bufs, start, 0), (0, 0));
        assert_eq!(advanced(&bufs, start, 2), (0, 2));
        // Exactly at a boundary: past the empty buffer after it.
        assert_eq!(advanced(&bufs, start, 3), (2, 0));
        assert_eq!(advanced(&bufs, start, 4), (2, 1));
        let inside = Cursor {
            index: 0,
            offset: 1,
        };
        assert_eq!(advanced(&bufs, inside, 3), (2, 1));
        // All of it: the end, past the trailing empty buffer.
        assert_eq!(advanced(&bufs, start, 5), (4, 0));
    }

    #[test]
    fn a_collection_of_empty_buffers_starts_at_its_end() {
        assert_eq!(advanced(&[&b""[..]; 3], Cursor::default(), 0), (3, 0));
        assert_eq!(
            advanced(&Vec::<Vec<u8>>::new(), Cursor::default(), 0),
            (0, 0)
        );
    }
}
