//! A write behind: all of a buffer sent without its writer waiting.
//!
//! io_uring only. The buffer goes into an operation slot of the driver,
//! which sends it whole: after a partial send it submits the rest itself,
//! and a send that completes every byte wakes nobody; its buffer then
//! goes to the core's spares, which [`spare`] lends to the next write.
//! The writer learns the end later: the next write behind collects it,
//! or [`poll_end`] waits for it when the writer must know the bytes are
//! out (a failure waits in the slot until then). A server that writes each
//! answer this way is polled once per request, not twice: on io_uring the
//! completion of an awaited send is a wake-up and a poll of its own.
//! One write behind at a time per socket: the next waits for the last,
//! since two sends on one socket in flight at once may go out in either
//! order.

use std::io;
use std::os::fd::AsRawFd;
use std::task::{Context, Poll, Waker};

use super::lifecycle::{self, Side};
use super::{SharedFd, SocketIo};
use crate::driver::uring::{OpKey, BEHIND_DONE};

/// A socket's write behind in `SocketIo::Uring::behind`: its slot's key,
/// [`NONE`] when it has none, with [`COLLECTED`] set once the end of its
/// latest write behind was collected. The slot stays with the socket
/// between writes behind (a request's answer, the next request's), so
/// that a connection's sends take no slot of their own.
pub(crate) const NONE: u32 = u32::MAX;
/// Set in `behind` when the latest write behind's end was collected.
const COLLECTED: u32 = 1 << 31;

/// Starts sending all of `buf`; `Err(buf)` when the socket
/// cannot take a write behind now: an epoll socket, one still under way
/// or one that failed (its error waits for [`poll_end`]), an empty buffer
/// or one of 4 GiB or more, a socket away from its core. The end of the
/// write behind before, if it went out, is collected here.
pub(crate) fn start(fd: &SharedFd, io: &SocketIo, buf: Vec<u8>) -> Result<(), Vec<u8>> {
    let SocketIo::Uring { behind, .. } = io else {
        return Err(buf);
    };
    if buf.is_empty() || u32::try_from(buf.len()).is_err() {
        return Err(buf);
    }
    let raw = fd.as_raw_fd();
    let mut buf = Some(buf);
    let started = lifecycle::on_core(io, |_, side| {
        let Side::Uring { d, .. } = side else {
            return None;
        };
        let last = behind.get();
        let slot = (last != NONE).then_some(OpKey((last & !COLLECTED) as usize));
        if let Some(key) = slot {
            match d.behind_over(key, raw) {
                // Under way, or failed: the caller waits for its end.
                Some(end) if end != BEHIND_DONE => return None,
                _ => {}
            }
        }
        let buf = buf.take()?;
        // SAFETY: the socket releases this slot when it is dropped
        // (`op::deregister`), before its descriptor closes, and keeps the
        // descriptor open until the SQE is submitted.
        let key = unsafe { d.push_behind(slot, raw, buf) };
        // Slot keys stay far below 2^31 (a slot is 80 bytes).
        behind.set(key.0 as u32 & !COLLECTED);
        Some(())
    });
    match (started, buf) {
        (Ok(Some(())), _) => Ok(()),
        (_, Some(buf)) => Err(buf),
        (_, None) => Err(Vec::new()),
    }
}

/// Whether a write behind was started and its end not yet collected (it
/// may have gone out since).
#[inline]
pub(crate) fn out(io: &SocketIo) -> bool {
    matches!(io, SocketIo::Uring { behind, .. } if behind.get() & COLLECTED == 0)
}

/// The slot of the socket's write behind, if it has one (see `behind`).
pub(crate) fn slot(behind: u32) -> Option<OpKey> {
    (behind != NONE).then_some(OpKey((behind & !COLLECTED) as usize))
}

/// The end of the socket's write behind: `Ready(Ok(Some(buf)))` once every
/// byte went out (an emptied buffer for the next one: the core's spare,
/// or a new one), `Ready(Ok(None))` when none is out (or its end was
/// collected), its error if it failed; `Pending` while it is under way,
/// with `waker` (if given) woken at its end.
pub(crate) fn poll_end(
    fd: &SharedFd,
    io: &SocketIo,
    waker: Option<&Waker>,
) -> Poll<io::Result<Option<Vec<u8>>>> {
    let SocketIo::Uring { behind, .. } = io else {
        return Poll::Ready(Ok(None));
    };
    let last = behind.get();
    if last & COLLECTED != 0 {
        return Poll::Ready(Ok(None));
    }
    let key = OpKey(last as usize);
    let polled = lifecycle::on_core(io, |_, side| match side {
        Side::Uring { d, .. } => d.poll_behind(key, fd.as_raw_fd(), waker),
        Side::Epoll { .. } => Poll::Ready(Ok(Vec::new())),
    });
    match polled {
        Ok(Poll::Pending) => Poll::Pending,
        Ok(Poll::Ready(Ok(buf))) => {
            behind.set(last | COLLECTED);
            Poll::Ready(Ok(Some(buf)))
        }
        Ok(Poll::Ready(Err(e))) => {
            // A failed write behind's slot is gone.
            behind.set(NONE);
            Poll::Ready(Err(e))
        }
        Err(e) => Poll::Ready(Err(e)),
    }
}

/// An emptied buffer for the socket's next write behind: one its core kept
/// from a write behind that went out, or a new one.
pub(crate) fn spare(io: &SocketIo) -> Vec<u8> {
    if !matches!(io, SocketIo::Uring { .. }) {
        return Vec::new();
    }
    lifecycle::on_core(io, |_, side| match side {
        Side::Uring { d, .. } => d.spare_write_buf(),
        Side::Epoll { .. } => Vec::new(),
    })
    .unwrap_or_default()
}

/// For a socket leaving its core: waits for its write behind, if one is
/// under way, then gives its slot (this core's) back. The write behind's
/// error, if it failed.
pub(crate) fn poll_release(
    fd: &SharedFd,
    io: &SocketIo,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>> {
    let SocketIo::Uring { behind, .. } = io else {
        return Poll::Ready(Ok(()));
    };
    if behind.get() == NONE {
        return Poll::Ready(Ok(()));
    }
    if let Err(e) = std::task::ready!(poll_end(fd, io, Some(cx.waker()))) {
        return Poll::Ready(Err(e));
    }
    if let Some(key) = slot(behind.replace(NONE)) {
        let released = lifecycle::on_core(io, |_, side| match side {
            Side::Uring { d, .. } => d.release_behind(key, fd.as_raw_fd()),
            Side::Epoll { .. } => None,
        });
        // Dropped outside the driver's borrow (it holds no buffer: the
        // write behind went out).
        drop(released);
    }
    Poll::Ready(Ok(()))
}
