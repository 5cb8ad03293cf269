//! Sending one datagram (or, with a segment size, a train of equal-size
//! datagrams the kernel cuts: UDP GSO) from an owned buffer.
//!
//! io_uring: an `IORING_OP_SENDMSG`; epoll: `sendmsg` tried first, then
//! again at each writable edge. A datagram goes out whole or not at all.

use std::future::Future;
use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use io_uring::{opcode, types};

use super::{MsgBox, Spares};
use crate::buf::{BufResult, IoBuf};
use crate::driver::current::Io;
use crate::driver::epoll::{self, SourceKey};
use crate::driver::uring::{self, Cqe, OpKind, Retained};
use crate::op::cqe_result;
use crate::op::lifecycle::{Op, OpAble, Sqe};
use crate::op::send::poll_epoll_send;
use crate::op::{SharedFd, SocketIo};
use crate::sys::RawAddr;

/// Sends bytes `range` of `buf` as one datagram (or one GSO train) to an
/// address, or to the connected peer; resolves to the count sent.
pub(crate) struct SendMsg<'a, B: IoBuf>(Op<'a, SendFrom<'a, B>>);

/// Where and how a datagram goes.
#[derive(Clone, Copy)]
pub(crate) struct Target {
    /// `None`: the connected peer.
    pub(crate) addr: Option<RawAddr>,
    /// `Some`: cut into datagrams of this size by the kernel (GSO).
    pub(crate) segment: Option<u16>,
    /// The bytes of the buffer to send.
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// What a send is made of.
pub(crate) struct SendFrom<'a, B: IoBuf> {
    fd: &'a SharedFd,
    spares: &'a Spares,
    buf: Option<B>,
    target: Target,
    space: Option<Box<MsgBox>>,
}

impl<'a, B: IoBuf> SendMsg<'a, B> {
    pub(crate) fn new(
        fd: &'a SharedFd,
        io: &'a SocketIo,
        spares: &'a Spares,
        buf: B,
        target: Target,
    ) -> Self {
        SendMsg(Op::on_socket(
            io,
            SendFrom {
                fd,
                spares,
                buf: Some(buf),
                target,
                space: None,
            },
        ))
    }
}

impl<B: IoBuf> SendFrom<'_, B> {
    /// Points a header at the bytes, the address and the control message.
    fn fill(&mut self) -> *const libc::msghdr {
        let Some(buf) = self.buf.as_ref() else {
            panic!("SendMsg polled after completion")
        };
        let end = self.target.end.min(buf.bytes_init());
        let start = self.target.start.min(end);
        let ptr = buf.stable_ptr().wrapping_add(start).cast_mut();
        let spares = self.spares;
        let space = self.space.get_or_insert_with(|| spares.take());
        let control = match self.target.segment {
            Some(size) => space.put_segment(size),
            None => 0,
        };
        space.point(ptr, end - start, self.target.addr, control);
        if self.target.addr.is_none() {
            space.no_addr();
        }
        if control == 0 {
            space.no_control();
        }
        &space.hdr
    }
}

// SAFETY: the SQE points at the header in `space`'s box, which points at
// its own iovec, address and control data and at `buf`'s stable bytes;
// the `Op` holds both to the completion and `dropped_in_flight` hands both
// to the slot, with the descriptor.
unsafe impl<B: IoBuf> OpAble for SendFrom<'_, B> {
    type Output = usize;

    fn uring_sqe(&mut self, _core: &Io, _d: &uring::Driver) -> Sqe {
        let hdr = self.fill();
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
        _core: &Io,
        d: &mut epoll::Driver,
        source: SourceKey,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        let fd = self.fd.as_raw_fd();
        poll_epoll_send(d, source, cx, || {
            let hdr = self.fill();
            // The raw syscall, as for the stream sends; every argument is
            // register-sized.
            // SAFETY: `hdr` and what it points at (the box's iovec, address
            // and control data, the buffer's bytes) are held by this
            // operation for the call.
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
        let held = (self.buf.take(), self.space.take());
        Retained::Buffer(self.fd.retain(), Box::new(held))
    }

    fn bytes_out(n: &usize) -> Option<u64> {
        Some(*n as u64)
    }
}

impl<B: IoBuf> Drop for SendFrom<'_, B> {
    fn drop(&mut self) {
        // After the `Op`'s drop, which took the box if the send was in
        // flight: this one is idle.
        if let Some(space) = self.space.take() {
            self.spares.put(space);
        }
    }
}

impl<B: IoBuf> Future for SendMsg<'_, B> {
    type Output = BufResult<usize, B>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let op = &mut self.get_mut().0;
        let res = std::task::ready!(op.poll(cx));
        let data = op.data_mut();
        if let Some(space) = data.space.take() {
            data.spares.put(space);
        }
        let Some(buf) = data.buf.take() else {
            unreachable!("a send keeps its buffer to the completion")
        };
        Poll::Ready((res, buf))
    }
}
