//! Receiving one datagram into an owned buffer, with its sender.
//!
//! io_uring: an `IORING_OP_RECVMSG`, after a non-blocking `recvmsg` while
//! datagrams are flowing (see `Spares::flowing`); epoll: `recvmsg` tried
//! first, then again at each readable edge. Both pass `MSG_TRUNC`, so the
//! result is the datagram's whole length even when the buffer held less.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use io_uring::{opcode, types};

use super::{MsgBox, Spares};
use crate::buf::{BufResult, IoBufMut};
use crate::driver::current::Io;
use crate::driver::epoll::{self, Interest, SourceKey};
use crate::driver::uring::{self, Cqe, OpKind, Retained};
use crate::op::cqe_result;
use crate::op::lifecycle::{Op, OpAble, Sqe};
use crate::op::{SharedFd, SocketIo};
use crate::sys::RawAddr;

/// What a received datagram was: how much of it the buffer holds, how long
/// it really was, and who sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecvMeta {
    /// The bytes written at the buffer's start (at most its capacity).
    pub len: usize,
    /// The datagram's length as sent; above `len` when it was truncated.
    pub datagram_len: usize,
    /// The sender (always known for UDP).
    pub peer: Option<SocketAddr>,
    /// With GRO on: the size of each datagram the kernel joined into this
    /// one (the last may be shorter); `None` when it is one datagram.
    pub segment_size: Option<usize>,
}

impl RecvMeta {
    /// Whether the datagram was longer than the buffer: the rest of it is
    /// lost (a datagram is read whole or cut, never in parts).
    pub fn truncated(&self) -> bool {
        self.datagram_len > self.len
    }
}

/// Receives one datagram into `buf`, from its start.
pub(crate) struct RecvMsg<'a, B: IoBufMut>(Op<'a, RecvInto<'a, B>>);

/// What a receive is made of.
pub(crate) struct RecvInto<'a, B: IoBufMut> {
    fd: &'a SharedFd,
    spares: &'a Spares,
    buf: Option<B>,
    space: Option<Box<MsgBox>>,
}

impl<'a, B: IoBufMut> RecvMsg<'a, B> {
    pub(crate) fn new(fd: &'a SharedFd, io: &'a SocketIo, spares: &'a Spares, buf: B) -> Self {
        RecvMsg(Op::on_socket(
            io,
            RecvInto {
                fd,
                spares,
                buf: Some(buf),
                space: None,
            },
        ))
    }
}

impl<B: IoBufMut> RecvInto<'_, B> {
    /// Points a header at the buffer, the address room and the control room.
    fn fill(&mut self) -> *mut libc::msghdr {
        let Some(buf) = self.buf.as_mut() else {
            panic!("RecvMsg polled after completion")
        };
        let (ptr, len) = (buf.stable_mut_ptr(), buf.bytes_total());
        let spares = self.spares;
        let space = self.space.get_or_insert_with(|| spares.take());
        space.point(ptr, len, None, super::CONTROL_LEN);
        &mut space.hdr
    }

    /// One non-blocking `recvmsg` (the socket is non-blocking; `flags`
    /// add to `MSG_TRUNC`).
    fn recvmsg(&mut self, flags: libc::c_int) -> io::Result<RecvMeta> {
        let fd = self.fd.as_raw_fd();
        let hdr = self.fill();
        // The raw syscall, as the stream receive makes it (no
        // cancellation-point wrapper); every argument is register-sized.
        // SAFETY: `hdr` and what it points at (the box's rooms, the
        // buffer's bytes) are held by this operation for the call.
        let n = unsafe {
            libc::syscall(
                libc::SYS_recvmsg,
                libc::c_long::from(fd),
                hdr,
                libc::c_long::from(libc::MSG_TRUNC | flags),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(self.meta(n as usize))
    }

    /// One non-blocking receive without control data: `recvfrom`, which
    /// costs the kernel less than `recvmsg` (no header to copy in and
    /// out), for a socket without GRO.
    fn recvfrom(&mut self, flags: libc::c_int) -> io::Result<RecvMeta> {
        let fd = self.fd.as_raw_fd();
        let Some(buf) = self.buf.as_mut() else {
            panic!("RecvMsg polled after completion")
        };
        let (ptr, len) = (buf.stable_mut_ptr(), buf.bytes_total());
        let mut addr = RawAddr::empty();
        // The raw syscall, as for `recvmsg`; every argument is register-sized.
        // SAFETY: the kernel writes at most `len` bytes at `ptr` (the
        // buffer's writable bytes, owned by this operation), and at most
        // `addr.len` bytes of address into `addr`, a live local.
        let n = unsafe {
            libc::syscall(
                libc::SYS_recvfrom,
                libc::c_long::from(fd),
                ptr,
                len,
                libc::c_long::from(libc::MSG_TRUNC | flags),
                addr.as_mut_ptr(),
                &mut addr.len,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let peer = addr.to_std().ok();
        Ok(self.meta_of(n as usize, peer, None))
    }

    /// One non-blocking receive: `recvfrom` unless the socket has GRO on,
    /// whose segment size comes in control data.
    fn try_recv(&mut self, flags: libc::c_int) -> io::Result<RecvMeta> {
        if self.spares.gro.get() {
            self.recvmsg(flags)
        } else {
            self.recvfrom(flags)
        }
    }

    /// What the kernel's count `n` (the whole length, `MSG_TRUNC`) means,
    /// with the sender and segment size in the box.
    fn meta(&mut self, n: usize) -> RecvMeta {
        let Some(space) = self.space.as_ref() else {
            unreachable!("a receive keeps its header to the completion")
        };
        let (peer, segment) = (space.peer(), space.gro_segment());
        self.meta_of(n, peer, segment)
    }

    fn meta_of(&mut self, n: usize, peer: Option<SocketAddr>, segment: Option<usize>) -> RecvMeta {
        let Some(buf) = self.buf.as_mut() else {
            unreachable!("a receive keeps its buffer to the completion")
        };
        let len = n.min(buf.bytes_total());
        // SAFETY: the kernel wrote the first `len` bytes of the buffer
        // (the datagram, cut to the buffer's capacity).
        unsafe { buf.set_init(len) };
        RecvMeta {
            len,
            datagram_len: n,
            peer,
            segment_size: segment,
        }
    }
}

// SAFETY: the SQE points at the header in `space`'s box, which points at
// its own iovec, address and control rooms and at `buf`'s stable bytes;
// the `Op` holds both to the completion and `dropped_in_flight` hands both
// to the slot, with the descriptor.
unsafe impl<B: IoBufMut> OpAble for RecvInto<'_, B> {
    type Output = RecvMeta;

    fn uring_try(&mut self) -> Option<io::Result<RecvMeta>> {
        if !self.spares.flowing.get() {
            return None;
        }
        match self.try_recv(libc::MSG_DONTWAIT) {
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                self.spares.flowing.set(false);
                None
            }
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => None,
            res => Some(res),
        }
    }

    fn uring_sqe(&mut self, _core: &Io, _d: &uring::Driver) -> Sqe {
        let hdr = self.fill();
        let entry = opcode::RecvMsg::new(types::Fd(self.fd.as_raw_fd()), hdr)
            .flags(libc::MSG_TRUNC as u32)
            .build();
        Sqe {
            entry,
            kind: OpKind::Recv,
            retained: Retained::None,
        }
    }

    fn uring_done(&mut self, cqe: Cqe, _retained: Retained) -> Option<io::Result<RecvMeta>> {
        self.spares.flowing.set(true);
        Some(cqe_result(cqe.res).map(|n| self.meta(n as usize)))
    }

    fn poll_epoll(
        &mut self,
        _core: &Io,
        d: &mut epoll::Driver,
        source: SourceKey,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<RecvMeta>> {
        loop {
            if d.poll_ready(source, Interest::Read, cx).is_pending() {
                return Poll::Pending;
            }
            d.count_syscall();
            match self.try_recv(0) {
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                    d.clear_ready(source, Interest::Read);
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                res => return Poll::Ready(res),
            }
        }
    }

    fn dropped_in_flight(&mut self) -> Retained {
        // The kernel may still write the buffer and the box: both go to
        // the slot, in place.
        let held = (self.buf.take(), self.space.take());
        Retained::Buffer(self.fd.retain(), Box::new(held))
    }
}

impl<B: IoBufMut> Drop for RecvInto<'_, B> {
    fn drop(&mut self) {
        // After the `Op`'s drop, which took the box if the receive was in
        // flight: this one is idle.
        if let Some(space) = self.space.take() {
            self.spares.put(space);
        }
    }
}

impl<B: IoBufMut> Future for RecvMsg<'_, B> {
    type Output = BufResult<RecvMeta, B>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let op = &mut self.get_mut().0;
        let res = std::task::ready!(op.poll(cx));
        let data = op.data_mut();
        if let Some(space) = data.space.take() {
            data.spares.put(space);
        }
        let Some(buf) = data.buf.take() else {
            unreachable!("a receive keeps its buffer to the completion")
        };
        Poll::Ready((res, buf))
    }
}
