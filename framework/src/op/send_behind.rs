//! A write behind: all of a buffer sent without its writer waiting.
//!
//! io_uring only. The buffer goes into an operation slot of the driver,
//! which sends it whole: after a partial send it submits the rest itself,
//! and a send that completes every byte wakes nobody. The writer collects
//! the result (and its buffer, for reuse) later, when it next needs the
//! buffer or must know the bytes are out. A server that writes each
//! answer this way is polled once per request, not twice: on io_uring the
//! completion of an awaited send is a wake-up and a poll of its own.
//! One write behind at a time per socket: the next waits for the last,
//! since two sends on one socket in flight at once may go out in either
//! order.

use std::io;
use std::os::fd::AsRawFd;
use std::task::{Poll, Waker};

use super::lifecycle::{self, Side};
use super::{SharedFd, SocketIo};
use crate::driver::uring::OpKey;

/// No write behind is out (`SocketIo::Uring::behind`).
pub(crate) const NONE: u32 = u32::MAX;

/// Starts sending all of `buf`; `Err(buf)` when the socket cannot take a
/// write behind now: an epoll socket, one still out, an empty buffer or
/// one of 4 GiB or more, a socket away from its core.
pub(crate) fn start(fd: &SharedFd, io: &SocketIo, buf: Vec<u8>) -> Result<(), Vec<u8>> {
    let SocketIo::Uring { behind, .. } = io else {
        return Err(buf);
    };
    if behind.get() != NONE || buf.is_empty() || u32::try_from(buf.len()).is_err() {
        return Err(buf);
    }
    let mut buf = Some(buf);
    let started = lifecycle::on_core(io, |_, side| match (side, buf.take()) {
        (Side::Uring { d, .. }, Some(buf)) => {
            // SAFETY: the socket releases this slot when it is dropped
            // (`op::deregister`), before its descriptor closes, and keeps
            // the descriptor open until the SQE is submitted.
            let key = unsafe { d.push_behind(fd.as_raw_fd(), buf) };
            // Slot keys stay far below `u32::MAX` (a slot is 80 bytes).
            behind.set(key.0 as u32);
            Ok(())
        }
        (_, other) => Err(other),
    });
    match started {
        Ok(Ok(())) => Ok(()),
        Ok(Err(Some(buf))) => Err(buf),
        _ => Err(buf.take().unwrap_or_default()),
    }
}

/// Whether a write behind is out and not yet collected.
pub(crate) fn out(io: &SocketIo) -> bool {
    matches!(io, SocketIo::Uring { behind, .. } if behind.get() != NONE)
}

/// The end of the socket's write behind: `Ready(Ok(Some(buf)))` once every
/// byte went out (an emptied buffer for the next one: the core's spare,
/// or a new one),
/// `Ready(Ok(None))` when none is out, its error if it failed; `Pending`
/// while it is under way, with `waker` (if given) woken at its end.
pub(crate) fn poll_end(
    fd: &SharedFd,
    io: &SocketIo,
    waker: Option<&Waker>,
) -> Poll<io::Result<Option<Vec<u8>>>> {
    let SocketIo::Uring { behind, .. } = io else {
        return Poll::Ready(Ok(None));
    };
    let key = behind.get();
    if key == NONE {
        return Poll::Ready(Ok(None));
    }
    let polled = lifecycle::on_core(io, |_, side| match side {
        Side::Uring { d, .. } => d.poll_behind(OpKey(key as usize), fd.as_raw_fd(), waker),
        Side::Epoll { .. } => Poll::Ready(Ok(Vec::new())),
    });
    match polled {
        Ok(Poll::Pending) => Poll::Pending,
        Ok(Poll::Ready(result)) => {
            behind.set(NONE);
            Poll::Ready(result.map(Some))
        }
        Err(e) => Poll::Ready(Err(e)),
    }
}
