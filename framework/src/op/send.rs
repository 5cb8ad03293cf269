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

use super::{cqe_result, SharedFd, SocketIo};
use crate::buf::{BufResult, IoBuf};
use crate::driver::current;
use crate::driver::epoll::{self, Interest, SourceKey};
use crate::driver::uring::{OpKey, OpKind, Retained, RECVSEND_FIXED_BUF};
use crate::driver::Driver;

/// Sends the bytes of `buf` from `offset` on; resolves to the count sent.
pub(crate) struct Send<'a, B: IoBuf> {
    fd: &'a SharedFd,
    io: &'a SocketIo,
    buf: Option<B>,
    offset: usize,
    key: Option<OpKey>,
}

impl<'a, B: IoBuf> Send<'a, B> {
    pub(crate) fn new(fd: &'a SharedFd, io: &'a SocketIo, buf: B, offset: usize) -> Self {
        Send {
            fd,
            io,
            buf: Some(buf),
            offset,
            key: None,
        }
    }
}

impl<B: IoBuf> Send<'_, B> {
    /// The buffer of a send that was never submitted (an empty
    /// `write_all` completes without one).
    pub(crate) fn take_buf(&mut self) -> Option<B> {
        if self.key.is_some() {
            return None;
        }
        self.buf.take()
    }
}

impl<B: IoBuf> Future for Send<'_, B> {
    type Output = BufResult<usize, B>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.key.is_none() && crate::executor::budget::poll_proceed(cx).is_pending() {
            return Poll::Pending;
        }
        let Some(buf) = this.buf.as_ref() else {
            panic!("Send polled after completion")
        };
        let ptr = buf.stable_ptr().wrapping_add(this.offset);
        let len = buf.bytes_init().saturating_sub(this.offset);
        let fixed = buf.fixed_index();
        let result = current::with_io(|core| {
            if !this.io.belongs_to(core) {
                return Poll::Ready(Err(super::foreign_core()));
            }
            let result = match (&mut *core.driver.borrow_mut(), this.io) {
                (Driver::Uring(d), SocketIo::Uring { .. }) => {
                    let key = *this.key.get_or_insert_with(|| {
                        let mut send =
                            opcode::Send::new(types::Fd(this.fd.as_raw_fd()), ptr, sqe_len(len))
                                .flags(libc::MSG_NOSIGNAL);
                        if let (Some(index), true) = (fixed, d.fixed_send()) {
                            send = send.ioprio(RECVSEND_FIXED_BUF).buf_group(index);
                        }
                        let sqe = send.build();
                        // No reference to the descriptor rides along: while
                        // this future lives it borrows the stream, its `Drop`
                        // hands one to the slot, and a stream dropped with
                        // the operation still unsubmitted keeps its socket
                        // open past the submission (`op::deregister`); once
                        // submitted, the kernel holds the file itself.
                        // SAFETY: `ptr..ptr+len` are `buf`'s stable bytes,
                        // which this future holds to the completion or hands
                        // to the slot in its `Drop`; the fd: see above.
                        unsafe { d.push(sqe, OpKind::Send, false, Retained::None) }
                    });
                    match d.poll_op(key, cx) {
                        Poll::Pending => Poll::Pending,
                        Poll::Ready((cqe, _fd)) => {
                            this.key = None;
                            Poll::Ready(cqe_result(cqe.res).map(|n| n as usize))
                        }
                    }
                }
                (Driver::Epoll(d), SocketIo::Epoll { source, .. }) => {
                    // The raw syscall, not libc's `send`, for the reason
                    // given at the receive (no cancellation-point wrapper).
                    // SAFETY: `ptr..ptr+len` are initialised bytes of `buf`,
                    // which this future owns for the call's duration; every
                    // argument is register-sized, as `syscall` reads them.
                    poll_epoll_send(d, *source, cx, || unsafe {
                        libc::syscall(
                            libc::SYS_sendto,
                            libc::c_long::from(this.fd.as_raw_fd()),
                            ptr,
                            len,
                            libc::c_long::from(libc::MSG_NOSIGNAL),
                            std::ptr::null::<libc::sockaddr>(),
                            libc::c_long::from(0),
                        )
                    })
                }
                _ => Poll::Ready(Err(io::Error::other(
                    "socket used on a core of another backend",
                ))),
            };
            if let Poll::Ready(Ok(n)) = &result {
                core.stats.bytes_out.add(*n as u64);
            }
            result
        });
        match result {
            Poll::Pending => Poll::Pending,
            Poll::Ready(res) => {
                let Some(buf) = this.buf.take() else {
                    unreachable!("checked at the top of poll")
                };
                Poll::Ready((res, buf))
            }
        }
    }
}

impl<B: IoBuf> Drop for Send<'_, B> {
    fn drop(&mut self) {
        let (Some(key), Some(buf)) = (self.key.take(), self.buf.take()) else {
            return;
        };
        let extra = Retained::Buffer(self.fd.retain(), Box::new(buf));
        super::release_dropped(self.io, key, extra);
    }
}

/// A send's length as an SQE holds it: longer sends go out in parts of at
/// most 4 GiB − 1 (a plain `as u32` would turn an exact multiple of 4 GiB
/// into a zero-length send, which `write_all` reports as `WriteZero`).
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

fn sqe_len(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}
