//! Sending part of a file on a socket with `sendfile`: the kernel moves the
//! page-cache pages to the socket, with no copy through user memory.
//!
//! The call is made on the core, on the non-blocking socket, on both
//! backends: epoll waits for writability after `EAGAIN` as a send does;
//! io_uring, which has no `sendfile` operation, waits with a one-shot
//! `POLL_ADD` for `POLLOUT`. `sendfile` reads the file's pages itself: a
//! page not in the page cache is read from the disk during the call, so
//! callers check first ([`File::cached`](crate::fs::File::cached)).

use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use io_uring::{opcode, types};

use super::{cqe_result, SharedFd, SocketIo};
use crate::driver::current;
use crate::driver::uring::{OpKey, OpKind, Retained};
use crate::driver::Driver;

/// Sends up to `len` bytes of the file `file` from `pos`; resolves to the
/// count sent.
pub(crate) struct SendFile<'a> {
    fd: &'a SharedFd,
    io: &'a SocketIo,
    file: RawFd,
    pos: u64,
    len: usize,
    /// io_uring: the `POLLOUT` wait in flight.
    key: Option<OpKey>,
}

impl<'a> SendFile<'a> {
    /// # Safety
    ///
    /// `file` stays open while the future lives (the caller borrows it).
    pub(crate) unsafe fn new(
        fd: &'a SharedFd,
        io: &'a SocketIo,
        file: RawFd,
        pos: u64,
        len: usize,
    ) -> Self {
        SendFile {
            fd,
            io,
            file,
            pos,
            len,
            key: None,
        }
    }

    /// One `sendfile`; the raw result.
    fn call(&self) -> libc::c_long {
        let Ok(mut offset) = libc::off_t::try_from(self.pos) else {
            // SAFETY: only sets errno.
            unsafe { *libc::__errno_location() = libc::EINVAL };
            return -1;
        };
        // SAFETY: two open fds (the socket, borrowed by this future, and
        // the file: `new`'s contract) and an offset variable of ours.
        unsafe {
            libc::sendfile(self.fd.as_raw_fd(), self.file, &mut offset, self.len) as libc::c_long
        }
    }
}

impl Future for SendFile<'_> {
    type Output = io::Result<usize>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.key.is_none() && crate::executor::budget::poll_proceed(cx).is_pending() {
            return Poll::Pending;
        }
        let result = current::with_io(|core| {
            if !this.io.belongs_to(core) {
                return Poll::Ready(Err(super::foreign_core()));
            }
            let result = match (&mut *core.driver.borrow_mut(), this.io) {
                (Driver::Uring(d), SocketIo::Uring { .. }) => loop {
                    if let Some(key) = this.key {
                        match d.poll_op(key, cx) {
                            Poll::Pending => break Poll::Pending,
                            Poll::Ready((cqe, _)) => {
                                this.key = None;
                                if let Err(e) = cqe_result(cqe.res) {
                                    break Poll::Ready(Err(e));
                                }
                            }
                        }
                    }
                    let n = this.call();
                    if n >= 0 {
                        break Poll::Ready(Ok(n as usize));
                    }
                    let err = io::Error::last_os_error();
                    match err.raw_os_error() {
                        Some(libc::EAGAIN) => {
                            let sqe = opcode::PollAdd::new(
                                types::Fd(this.fd.as_raw_fd()),
                                libc::POLLOUT as u32,
                            )
                            .build();
                            // The descriptor, as for a send: this future
                            // borrows the stream, and its `Drop` hands one
                            // to the slot. The SQE points to no memory.
                            let retained = Retained::None;
                            // SAFETY: see above.
                            let key = unsafe { d.push(sqe, OpKind::Send, false, retained) };
                            this.key = Some(key);
                        }
                        Some(libc::EINTR) => {}
                        _ => break Poll::Ready(Err(err)),
                    }
                },
                (Driver::Epoll(d), SocketIo::Epoll { source, .. }) => {
                    super::send::poll_epoll_send(d, *source, cx, || this.call())
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
        if result.is_ready() {
            this.key = None;
        }
        result
    }
}

impl Drop for SendFile<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            super::release_dropped(self.io, key, Retained::Fd(self.fd.retain()));
        }
    }
}
