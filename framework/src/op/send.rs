//! Sending an owned buffer.
//!
//! io_uring: an `IORING_OP_SEND` with `MSG_NOSIGNAL` straight from the
//! buffer; if the future is dropped before the completion, the buffer moves
//! into the operation's slot and is freed only after the kernel is done.
//! epoll: a non-blocking `send`, waiting for writability on `EAGAIN`.

use std::future::Future;
use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use io_uring::{opcode, types};

use super::lifecycle::{Op, OpAble, Sqe};
use super::{cqe_result, SharedFd, SocketIo};
use crate::buf::{BufResult, IoBuf};
use crate::driver::current::Io;
use crate::driver::epoll::{self, Interest, SourceKey};
use crate::driver::uring::{self, Cqe, OpKind, Retained, RECVSEND_FIXED_BUF};

/// Sends the bytes of `buf` from `offset` on; resolves to the count sent.
pub(crate) struct Send<'a, B: IoBuf>(Op<'a, SendBuf<'a, B>>);

/// What a send is made of.
pub(crate) struct SendBuf<'a, B: IoBuf> {
    fd: &'a SharedFd,
    buf: Option<B>,
    offset: usize,
}

impl<'a, B: IoBuf> Send<'a, B> {
    pub(crate) fn new(fd: &'a SharedFd, io: &'a SocketIo, buf: B, offset: usize) -> Self {
        Send(Op::on_socket(
            io,
            SendBuf {
                fd,
                buf: Some(buf),
                offset,
            },
        ))
    }
}

impl<B: IoBuf> Send<'_, B> {
    /// The buffer of a send that was never submitted (an empty
    /// `write_all` completes without one).
    pub(crate) fn take_buf(&mut self) -> Option<B> {
        if self.0.in_flight() {
            return None;
        }
        self.0.data_mut().buf.take()
    }
}

impl<B: IoBuf> SendBuf<'_, B> {
    /// The unsent bytes: their start and length.
    fn bytes(&self) -> (*const u8, usize) {
        let Some(buf) = self.buf.as_ref() else {
            panic!("Send polled after completion")
        };
        let ptr = buf.stable_ptr().wrapping_add(self.offset);
        (ptr, buf.bytes_init().saturating_sub(self.offset))
    }
}

// SAFETY: the SQE points at `buf`'s stable bytes, which the `Op` keeps to
// the completion and `dropped_in_flight` hands to the slot. No reference
// to the descriptor rides along: while the `Op` lives it borrows the
// stream, `dropped_in_flight` hands one to the slot, and a stream dropped
// with the send still unsubmitted keeps its socket open past the
// submission (`op::deregister`); once submitted, the kernel holds the
// file itself.
unsafe impl<B: IoBuf> OpAble for SendBuf<'_, B> {
    type Output = usize;

    fn uring_sqe(&mut self, _core: &Io, d: &uring::Driver) -> Sqe {
        let (ptr, len) = self.bytes();
        let fixed = self.buf.as_ref().and_then(IoBuf::fixed_index);
        let mut send = opcode::Send::new(types::Fd(self.fd.as_raw_fd()), ptr, sqe_len(len))
            .flags(libc::MSG_NOSIGNAL);
        if let (Some(index), true) = (fixed, d.fixed_send()) {
            send = send.ioprio(RECVSEND_FIXED_BUF).buf_group(index);
        }
        Sqe {
            entry: send.build(),
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
        let (ptr, len) = self.bytes();
        let fd = self.fd.as_raw_fd();
        // The raw syscall, not libc's `send`, for the reason given at the
        // receive (no cancellation-point wrapper).
        // SAFETY: `ptr..ptr+len` are initialised bytes of `buf`, which
        // this operation owns for the call's duration; every argument is
        // register-sized, as `syscall` reads them.
        poll_epoll_send(d, source, cx, || unsafe {
            libc::syscall(
                libc::SYS_sendto,
                libc::c_long::from(fd),
                ptr,
                len,
                libc::c_long::from(libc::MSG_NOSIGNAL),
                std::ptr::null::<libc::sockaddr>(),
                libc::c_long::from(0),
            )
        })
    }

    fn dropped_in_flight(&mut self) -> Retained {
        match self.buf.take() {
            Some(buf) => Retained::Buffer(self.fd.retain(), Box::new(buf)),
            None => Retained::None,
        }
    }

    fn bytes_out(n: &usize) -> Option<u64> {
        Some(*n as u64)
    }
}

impl<B: IoBuf> Future for Send<'_, B> {
    type Output = BufResult<usize, B>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let op = &mut self.get_mut().0;
        let res = std::task::ready!(op.poll(cx));
        let Some(buf) = op.data_mut().buf.take() else {
            unreachable!("a send keeps its buffer to the completion")
        };
        Poll::Ready((res, buf))
    }
}

/// A non-blocking send on epoll, `send` being the syscall: waits for
/// writability, and after `EAGAIN` (the readiness was stale) for the next
/// edge; retries at once after `EINTR`. Shared with the gathered send.
pub(super) fn poll_epoll_send(
    d: &mut epoll::Driver,
    source: SourceKey,
    cx: &mut Context<'_>,
    mut send: impl FnMut() -> libc::c_long,
) -> Poll<io::Result<usize>> {
    loop {
        if d.poll_ready(source, Interest::Write, cx).is_pending() {
            return Poll::Pending;
        }
        d.count_syscall();
        let n = send();
        if n >= 0 {
            return Poll::Ready(Ok(n as usize));
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EAGAIN) => d.clear_ready(source, Interest::Write),
            Some(libc::EINTR) => {}
            _ => return Poll::Ready(Err(err)),
        }
    }
}

/// A send's length as an SQE holds it: longer sends go out in parts of at
/// most 4 GiB − 1 (a plain `as u32` would turn an exact multiple of 4 GiB
/// into a zero-length send, which `write_all` reports as `WriteZero`).
fn sqe_len(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}
