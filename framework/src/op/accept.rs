//! Accepting connections.
//!
//! io_uring: one multishot accept per listener, its completions queued in
//! the listener's standing slot (paused by cancellation when the queue is
//! full, re-armed by the next `accept`). epoll: `accept4` on readiness.
//!
//! At a server stop, [`accept_queued`] hands over what is already there
//! (accepted completions, then the kernel's accept queue) without waiting
//! for new connections, so a stop resets none of the clients whose
//! connection was complete when it began.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::task::{Context, Poll, Waker};

use io_uring::{opcode, types};

use super::lifecycle::{self, Side};
use super::{cqe_result, SharedFd, SocketIo, Standing};
use crate::driver::epoll::Interest;
use crate::driver::uring::{OpKind, Retained};
use crate::sys;

/// Polls for the next accepted socket (non-blocking, close-on-exec).
/// `shared`: other cores accept from the same socket, so on io_uring each
/// accept is armed anew (see `Acceptor`) rather than one multishot.
// Long on purpose: one loop over the listener's standing operation, per
// backend; split, each state would need the loop's borrows again.
pub(crate) fn poll_accept(
    fd: &SharedFd,
    io: &SocketIo,
    shared: bool,
    cx: &mut Context<'_>,
) -> Poll<io::Result<OwnedFd>> {
    lifecycle::poll_socket(io, cx, |_core, side, cx| match side {
        Side::Uring { d, standing, .. } => loop {
            match standing.get() {
                Standing::Idle => {
                    let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
                    let key = if d.multishot() && !shared {
                        let sqe = opcode::AcceptMulti::new(types::Fd(fd.as_raw_fd()))
                            .flags(flags)
                            .build();
                        // SAFETY: the SQE points at no memory, and the slot
                        // keeps the listener open.
                        Standing::Multishot(unsafe {
                            d.push(sqe, OpKind::Accept, true, Retained::Fd(fd.retain()))
                        })
                    } else {
                        let sqe = opcode::Accept::new(
                            types::Fd(fd.as_raw_fd()),
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                        )
                        .flags(flags)
                        .build();
                        // SAFETY: the address pointers are null, and the slot
                        // keeps the listener open.
                        Standing::Single(unsafe {
                            d.push(sqe, OpKind::Accept, false, Retained::Fd(fd.retain()))
                        })
                    };
                    standing.set(key);
                }
                Standing::Multishot(key) => match d.poll_stream(key, cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Some(cqe)) => {
                        // SAFETY: `poll_stream` hands out each completion of
                        // the multishot accept once.
                        return Poll::Ready(unsafe { accepted_fd(cqe.res) });
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
                            // SAFETY: the accept's only completion, which
                            // `poll_op` hands out once (removing the slot).
                            Poll::Ready(unsafe { accepted_fd(cqe.res) })
                        }
                    };
                }
            }
        },
        Side::Epoll { d, source } => loop {
            if d.poll_ready(source, Interest::Read, cx).is_pending() {
                return Poll::Pending;
            }
            d.count_syscall();
            match sys::accept(fd.as_fd()) {
                Ok(fd) => return Poll::Ready(Ok(fd)),
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                    d.clear_ready(source, Interest::Read)
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        },
    })
}

/// Stops taking connections from the kernel's queue until the next
/// [`poll_accept`]: on io_uring the multishot accept is cancelled (what it
/// accepted already stays queued for the next accept), so that a core at
/// its connection limit leaves new connections in the kernel's backlog, as
/// epoll does by not calling `accept4`. There they are the kernel's to
/// hand to another listener on the port when this one closes.
pub(crate) fn pause_accept(io: &SocketIo) {
    // Away from its core there is nothing of this core's to pause.
    let _ = lifecycle::on_core(io, |_core, side| {
        if let Side::Uring { d, standing, .. } = side {
            if let Standing::Multishot(key) = standing.get() {
                d.end_stream(key);
            }
        }
    });
}

/// A connection that is already complete, without arming or waiting for
/// anything; `None` when none is left. On io_uring the connections the
/// accept's completions carry come first, then the accept is released
/// (cancelled; one it completes after that is closed); then, if
/// `from_kernel`, `accept4` takes the kernel's queue until it is empty.
pub(crate) fn accept_queued(
    fd: &SharedFd,
    io: &SocketIo,
    from_kernel: bool,
) -> Option<io::Result<OwnedFd>> {
    let queued = lifecycle::on_core(io, |_core, side| match side {
        Side::Uring { d, standing, .. } => take_accepted(d, standing),
        Side::Epoll { d, .. } => {
            if from_kernel {
                d.count_syscall();
            }
            None
        }
    });
    match queued {
        // SAFETY: a completion `take_accepted` just took out of the
        // accept's slot, which hands out each one once.
        Ok(Some(res)) => return Some(unsafe { accepted_fd(res) }),
        Ok(None) => {}
        Err(e) => return Some(Err(e)),
    }
    if !from_kernel {
        return None;
    }
    loop {
        match sys::accept(fd.as_fd()) {
            Ok(fd) => return Some(Ok(fd)),
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => return None,
            Err(e) if is_transient(&e) => {}
            Err(e) => return Some(Err(e)),
        }
    }
}

/// How long a stopping core waits for its multishot accept to end.
const ACCEPT_END_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The result of the next accept io_uring has completed; once none is
/// queued, the accept is released and `None` returned.
fn take_accepted(d: &mut crate::driver::uring::Driver, standing: &Cell<Standing>) -> Option<i32> {
    // Nothing waits on what is polled here: it is taken now or never.
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        match standing.get() {
            Standing::Idle => return None,
            Standing::Multishot(key) => {
                if let Poll::Ready(Some(cqe)) = d.poll_stream(key, &mut cx) {
                    return Some(cqe.res);
                }
                // Before it is released, the accept is ended and its last
                // completion awaited: released while still armed, it could
                // take a connection (the kernel runs it while this core
                // calls `accept4`, on a ring without DEFER_TASKRUN) that
                // only its orphan's cleanup would see, and close.
                if !d.stream_ended(key) {
                    let deadline = std::time::Instant::now() + ACCEPT_END_WAIT;
                    if d.finish_stream(key, deadline) {
                        continue;
                    }
                }
                standing.set(Standing::Idle);
                drop(d.release(key, Retained::None));
            }
            Standing::Single(key) => {
                standing.set(Standing::Idle);
                match d.poll_op(key, &mut cx) {
                    Poll::Ready((cqe, _fd)) => return Some(cqe.res),
                    Poll::Pending => drop(d.release(key, Retained::None)),
                }
            }
        }
    }
}

/// The descriptor an accept completion carries, or its error.
///
/// # Safety
///
/// `res` is the result of an accept completion that has not been passed
/// here before: a non-negative one is a descriptor the kernel just created
/// for this completion, which nothing owns yet.
unsafe fn accepted_fd(res: i32) -> io::Result<OwnedFd> {
    // SAFETY: per the contract, the fd is open and owned by nobody else.
    cqe_result(res).map(|fd| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Accept errors that concern one connection (or none), not the listener.
pub(crate) fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECONNABORTED) | Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EPROTO)
    )
}
