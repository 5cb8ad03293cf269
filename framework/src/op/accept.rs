//! Accepting connections.
//!
//! io_uring: one multishot accept per listener, its completions queued in
//! the listener's standing slot (paused by cancellation when the queue is
//! full, re-armed by the next `accept`). epoll: `accept4` on readiness.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::task::{Context, Poll};

use io_uring::{opcode, types};

use super::{cqe_result, SharedFd, SocketIo, Standing};
use crate::driver::epoll::Interest;
use crate::driver::uring::{OpKind, Retained};
use crate::driver::Driver;
use crate::runtime::context;
use crate::sys;

/// Polls for the next accepted socket (non-blocking, close-on-exec).
pub(crate) fn poll_accept(
    fd: &SharedFd,
    io: &SocketIo,
    cx: &mut Context<'_>,
) -> Poll<io::Result<OwnedFd>> {
    if crate::executor::budget::poll_proceed(cx).is_pending() {
        return Poll::Pending;
    }
    context::with_core(|core| match (&mut *core.driver.borrow_mut(), io) {
        (Driver::Uring(d), SocketIo::Uring { standing, .. }) => loop {
            match standing.get() {
                Standing::Idle => {
                    let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
                    let key = if d.multishot() {
                        let sqe = opcode::AcceptMulti::new(types::Fd(fd.as_raw_fd()))
                            .flags(flags)
                            .build();
                        Standing::Multishot(d.push(
                            sqe,
                            OpKind::Accept,
                            true,
                            Retained::Fd(fd.retain()),
                        ))
                    } else {
                        let sqe = opcode::Accept::new(
                            types::Fd(fd.as_raw_fd()),
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                        )
                        .flags(flags)
                        .build();
                        Standing::Single(d.push(
                            sqe,
                            OpKind::Accept,
                            false,
                            Retained::Fd(fd.retain()),
                        ))
                    };
                    standing.set(key);
                }
                Standing::Multishot(key) => match d.poll_stream(key, cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Some(cqe)) => {
                        return Poll::Ready(cqe_result(cqe.res).map(|fd| sys::owned_fd(fd as i32)))
                    }
                    Poll::Ready(None) => {
                        standing.set(Standing::Idle);
                        drop(d.release(key, Retained::None));
                    }
                },
                Standing::Single(key) => {
                    return match d.poll_op(key, cx) {
                        Poll::Pending => Poll::Pending,
                        Poll::Ready((cqe, _fd)) => {
                            standing.set(Standing::Idle);
                            Poll::Ready(cqe_result(cqe.res).map(|fd| sys::owned_fd(fd as i32)))
                        }
                    };
                }
            }
        },
        (Driver::Epoll(d), SocketIo::Epoll { source }) => loop {
            if d.poll_ready(*source, Interest::Read, cx).is_pending() {
                return Poll::Pending;
            }
            d.count_syscall();
            match sys::accept(fd.as_raw_fd()) {
                Ok(fd) => return Poll::Ready(Ok(fd)),
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                    d.clear_ready(*source, Interest::Read)
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        },
        _ => Poll::Ready(Err(io::Error::other(
            "socket used on a core of another backend",
        ))),
    })
}
