//! Taking a socket off its core, so that another core can serve it.
//!
//! io_uring: a write behind under way is waited for and its slot given
//! back (`op::send_behind`); the socket's standing receive is ended (a
//! multishot or a single-shot is cancelled: a single-shot armed ahead of
//! the next read would wait for bytes a peer waiting for an answer never
//! sends) and its last completion awaited; the bytes of the completions
//! it queued, received but not yet read, are copied out in order, and
//! their buffers go back.
//! Once the standing receive has ended the kernel holds nothing of the
//! socket's, and what the socket receives later waits in its own queue
//! for the next core. epoll: nothing is in flight; the socket leaves the
//! core's epoll set (`EPOLL_CTL_DEL`, so its events stop coming here even
//! while another descriptor keeps the socket open).

use std::io;
use std::os::fd::AsFd;
use std::task::{Context, Poll};

use io_uring::cqueue;

use super::lifecycle::{self, Side};
use super::{cqe_result, SharedFd, SocketIo, Standing};
use crate::buf::RecvBuf;
use crate::driver::uring::Retained;

/// Ends the socket's standing receive, appending the bytes it had
/// received to `out`; ready once the kernel is done with the socket.
///
/// An end of stream or an error it met is not reported: the socket
/// reports its end again to the next receive, wherever that is (a reset
/// as an end of stream).
pub(crate) fn poll_detach(
    fd: &SharedFd,
    io: &SocketIo,
    out: &mut Vec<u8>,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>> {
    // A write behind goes out first (the next core's sends come after
    // it), and its slot, of this core's driver, goes back.
    if let Err(e) = std::task::ready!(super::send_behind::poll_release(fd, io, cx)) {
        return Poll::Ready(Err(e));
    }
    let detached = lifecycle::on_core(io, |core, side| match side {
        Side::Uring { d, standing, .. } => poll_uring(d, standing, &core.pool, out, cx),
        Side::Epoll { d, .. } => Poll::Ready(d.remove_fd(fd.as_fd())),
    });
    detached.unwrap_or_else(|e| Poll::Ready(Err(e)))
}

fn poll_uring(
    d: &mut crate::driver::uring::Driver,
    standing: &std::cell::Cell<Standing>,
    pool: &crate::driver::pool::HeapPool,
    out: &mut Vec<u8>,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>> {
    loop {
        match standing.get() {
            Standing::Idle => return Poll::Ready(Ok(())),
            Standing::Multishot(key) => {
                // Cancels it once; the completions it queued stay queued,
                // and its end comes after them.
                d.end_stream(key);
                match d.poll_stream(key, cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Some(cqe)) => {
                        let Ok(n @ 1..) = cqe_result(cqe.res) else {
                            continue;
                        };
                        if let (Some(bid), Some(ring)) =
                            (cqueue::buffer_select(cqe.flags), d.buf_ring())
                        {
                            // SAFETY: `bid` and `n` come from the completion
                            // `poll_stream` just handed out, once.
                            let buf = unsafe { RecvBuf::from_ring(ring.clone(), bid, n as usize) };
                            out.extend_from_slice(&buf);
                        }
                    }
                    Poll::Ready(None) => {
                        standing.set(Standing::Idle);
                        drop(d.release(key, Retained::None));
                    }
                }
            }
            Standing::Single(key) => {
                let (cqe, retained) = match d.poll_op(key, cx) {
                    Poll::Pending => {
                        // A receive armed ahead of the next read: a
                        // peer that waits for an answer sends nothing
                        // that would complete it. Cancelled, it ends
                        // with the bytes it took, or none.
                        d.cancel_waiting(key);
                        return Poll::Pending;
                    }
                    Poll::Ready(done) => done,
                };
                standing.set(Standing::Idle);
                if let Retained::PoolBuf(_, buf) = retained {
                    if let Ok(n) = cqe_result(cqe.res) {
                        out.extend_from_slice(buf.get(..n as usize).unwrap_or_default());
                    }
                    pool.put(buf);
                }
            }
        }
    }
}
