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

use super::lifecycle::{Op, OpAble, Sqe};
use super::{cqe_result, SharedFd, SocketIo};
use crate::driver::current::Io;
use crate::driver::epoll::{self, SourceKey};
use crate::driver::uring::{self, Cqe, OpKind, Retained};

/// Sends up to `len` bytes of the file `file` from `pos`; resolves to the
/// count sent.
pub(crate) struct SendFile<'a>(Op<'a, FileRange<'a>>);

/// What a `sendfile` is made of.
pub(crate) struct FileRange<'a> {
    fd: &'a SharedFd,
    file: RawFd,
    pos: u64,
    len: usize,
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
        SendFile(Op::on_socket(io, FileRange { fd, file, pos, len }))
    }
}

impl FileRange<'_> {
    /// One `sendfile`; the raw result.
    fn call(&self) -> libc::c_long {
        let Ok(mut offset) = libc::off_t::try_from(self.pos) else {
            // SAFETY: only sets errno.
            unsafe { *libc::__errno_location() = libc::EINVAL };
            return -1;
        };
        // SAFETY: two open fds (the socket, borrowed by this operation,
        // and the file: `SendFile::new`'s contract) and an offset
        // variable of ours.
        unsafe {
            libc::sendfile(self.fd.as_raw_fd(), self.file, &mut offset, self.len) as libc::c_long
        }
    }
}

// SAFETY: the SQE (a `POLL_ADD`) points to no memory. The descriptor, as
// for a send: the `Op` borrows the stream, and `dropped_in_flight` hands
// one to the slot.
unsafe impl OpAble for FileRange<'_> {
    type Output = usize;

    /// The call itself: io_uring, which has no `sendfile`, only waits for
    /// the socket's room when it would block.
    fn uring_try(&mut self) -> Option<io::Result<usize>> {
        loop {
            let n = self.call();
            if n >= 0 {
                return Some(Ok(n as usize));
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EAGAIN) => return None,
                Some(libc::EINTR) => {}
                _ => return Some(Err(err)),
            }
        }
    }

    fn uring_sqe(&mut self, _core: &Io, _d: &uring::Driver) -> Sqe {
        let entry = opcode::PollAdd::new(types::Fd(self.fd.as_raw_fd()), libc::POLLOUT as u32);
        Sqe {
            entry: entry.build(),
            kind: OpKind::Send,
            retained: Retained::None,
        }
    }

    fn uring_done(&mut self, cqe: Cqe, _retained: Retained) -> Option<io::Result<usize>> {
        // The socket has room: the next `uring_try` makes the call.
        cqe_result(cqe.res).err().map(Err)
    }

    fn poll_epoll(
        &mut self,
        _core: &Io,
        d: &mut epoll::Driver,
        source: SourceKey,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        super::send::poll_epoll_send(d, source, cx, || self.call())
    }

    fn dropped_in_flight(&mut self) -> Retained {
        Retained::Fd(self.fd.retain())
    }

    fn bytes_out(n: &usize) -> Option<u64> {
        Some(*n as u64)
    }
}

impl Future for SendFile<'_> {
    type Output = io::Result<usize>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        self.get_mut().0.poll(cx)
    }
}
