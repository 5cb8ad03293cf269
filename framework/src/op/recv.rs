//! Receiving into a leased buffer.
//!
//! io_uring: a multishot receive picks buffers from the provided-buffer
//! ring and queues completions in the socket's standing slot; a read takes
//! the next one. The multishot has a byte limit of one ring buffer (Linux
//! 6.17+): once it has received that much it ends by itself and is armed
//! again. Unlimited, it would read ahead into as many ring buffers as the
//! socket has data for (a megabyte at 16 × 64 KiB) before the reader sees
//! the first, each cold by the time it is written and again by the time
//! the reader sends it on; the limit gives a bulk echo in lockstep round
//! trips of 1 MiB a tenth more bytes per CPU-second and costs small
//! messages one re-arm per 64 KiB. Two cases switch the socket to
//! single-shot receives into pool buffers:
//! - the ring ran dry (`ENOBUFS`, which ends the multishot);
//! - a completion filled its whole buffer: a bulk stream. The multishot is
//!   ended (with the byte limit, that completion was its last anyway), and
//!   the stream is read one pool buffer ahead instead; the pool hands back
//!   the buffer freed last, still in cache. A bulk echo then does a fifth
//!   more bytes per CPU-second, within a few percent of epoll
//!   (`benches/bulk_duel.sh`).
//!
//! A single-shot receive that comes back short (the socket drained) arms
//! the multishot again at once, so an idle socket holds no buffer (staying
//! on single-shots until a second short read measured no better); one that
//! fills its buffer arms the next single-shot. A multishot whose last
//! completion carries bytes (its limit was reached) is likewise followed
//! at once. Either way a receive stays armed, so a socket left idle (a
//! pooled upstream connection) still sees its peer's close. The exception
//! is a multishot that was cancelled (paused; or, without the byte limit,
//! for a bulk stream) and whose end had not been reported when its last
//! bytes were read: the next receive can only follow that end, so the next
//! read arms it. (The proxy's pool then learns of a close only when it
//! uses the connection, and retries the request once, as for any
//! keep-alive race.)
//!
//! epoll: a non-blocking `recv` into a pool buffer.

use std::io;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::task::{Context, Poll};

use io_uring::{cqueue, opcode, types};

use super::lifecycle::{self, Side};
use super::{cqe_result, SharedFd, SocketIo, Standing};
use crate::buf::RecvBuf;
use crate::driver::epoll::Interest;
use crate::driver::uring::buf_ring::BUF_GROUP;
use crate::driver::uring::{OpKind, Retained};

/// Polls the next received bytes: `Some(buf)`, or `None` at end of stream.
pub(crate) fn poll_recv(
    fd: &SharedFd,
    io: &SocketIo,
    cx: &mut Context<'_>,
) -> Poll<io::Result<Option<RecvBuf>>> {
    lifecycle::poll_socket(io, cx, |core, side, cx| {
        let result = match side {
            Side::Uring {
                d,
                standing,
                pool_reads,
            } => poll_uring(d, fd, standing, pool_reads, &core.pool, cx),
            Side::Epoll { d, source } => poll_epoll(d, fd, source, &core.pool, cx),
        };
        if let Poll::Ready(Ok(Some(buf))) = &result {
            core.stats.bytes_in.add(buf.len() as u64);
        }
        result
    })
}

// Long on purpose: one loop over the socket's standing receive and its
// states; split, each would need the loop's borrows again.
fn poll_uring(
    d: &mut crate::driver::uring::Driver,
    fd: &SharedFd,
    standing: &std::cell::Cell<Standing>,
    pool_reads: &std::cell::Cell<bool>,
    pool: &Rc<crate::driver::pool::HeapPool>,
    cx: &mut Context<'_>,
) -> Poll<io::Result<Option<RecvBuf>>> {
    loop {
        match standing.get() {
            Standing::Idle => standing.set(arm(d, fd, pool_reads, pool)),
            Standing::Multishot(key) => match d.poll_stream(key, cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(cqe)) => {
                    let last = !cqueue::more(cqe.flags);
                    if cqe.res == -libc::ENOBUFS {
                        pool_reads.set(true);
                        continue;
                    }
                    let n = match cqe_result(cqe.res) {
                        Ok(n) => n as usize,
                        Err(e) => return Poll::Ready(Err(e)),
                    };
                    if n == 0 {
                        return Poll::Ready(Ok(None));
                    }
                    let (Some(bid), Some(ring)) = (cqueue::buffer_select(cqe.flags), d.buf_ring())
                    else {
                        return Poll::Ready(Err(io::Error::other(
                            "receive completion without a buffer",
                        )));
                    };
                    // SAFETY: `bid` and `n` come from the completion that
                    // `poll_stream` just handed out, once, to this receive.
                    let buf = unsafe { RecvBuf::from_ring(ring.clone(), bid, n) };
                    if n == ring.buf_size() && !pool_reads.replace(true) {
                        // What the multishot has queued is read first.
                        d.end_stream_for_bulk(key);
                    }
                    if last {
                        // The limit ended the stream with these bytes: the
                        // next receive is armed now, not at the next read.
                        drop(d.release(key, Retained::None));
                        standing.set(arm(d, fd, pool_reads, pool));
                    }
                    return Poll::Ready(Ok(Some(buf)));
                }
                Poll::Ready(None) => {
                    standing.set(Standing::Idle);
                    drop(d.release(key, Retained::None));
                }
            },
            Standing::Single(key) => {
                let (cqe, retained) = match d.poll_op(key, cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(done) => done,
                };
                standing.set(Standing::Idle);
                let Retained::PoolBuf(_, buf) = retained else {
                    unreachable!("a single-shot receive retains its pool buffer")
                };
                return Poll::Ready(match cqe_result(cqe.res) {
                    Ok(0) => {
                        pool.put(buf);
                        Ok(None)
                    }
                    Ok(n) => {
                        let full = n as usize == buf.len();
                        pool_reads.set(full);
                        // Armed now, not at the next read (see the module
                        // docs); without multishot support the next read
                        // arms its own.
                        if d.multishot() {
                            standing.set(arm(d, fd, pool_reads, pool));
                        }
                        Ok(Some(RecvBuf::from_pool(pool.clone(), buf, n as usize)))
                    }
                    Err(e) => {
                        pool.put(buf);
                        Err(e)
                    }
                });
            }
        }
    }
}

/// Queues the socket's next receive: a multishot unless it reads a bulk
/// stream into pool buffers (or the kernel has no multishot receive).
fn arm(
    d: &mut crate::driver::uring::Driver,
    fd: &SharedFd,
    pool_reads: &std::cell::Cell<bool>,
    pool: &crate::driver::pool::HeapPool,
) -> Standing {
    if d.multishot() && !pool_reads.get() {
        arm_multishot(d, fd)
    } else {
        arm_single(d, fd, pool)
    }
}

/// Queues a multishot receive from the buffer ring on `fd`.
fn arm_multishot(d: &mut crate::driver::uring::Driver, fd: &SharedFd) -> Standing {
    let mut sqe = opcode::RecvMulti::new(types::Fd(fd.as_raw_fd()), BUF_GROUP).build();
    d.limit_multishot(&mut sqe);
    // SAFETY: the SQE points at no memory (the kernel picks buffers from
    // the driver's ring), and the slot keeps the socket open.
    Standing::Multishot(unsafe { d.push(sqe, OpKind::Recv, true, Retained::Fd(fd.retain())) })
}

/// Queues a single-shot receive into a pool buffer, which the operation
/// keeps until the kernel is done with it.
fn arm_single(
    d: &mut crate::driver::uring::Driver,
    fd: &SharedFd,
    pool: &crate::driver::pool::HeapPool,
) -> Standing {
    let mut buf = pool.get();
    let sqe = opcode::Recv::new(
        types::Fd(fd.as_raw_fd()),
        buf.as_mut_ptr(),
        buf.len() as u32,
    )
    .build();
    // SAFETY: the SQE points into `buf`, whose bytes stay in place in the
    // slot (`Retained::PoolBuf`) to the completion; the slot keeps the
    // socket open too.
    Standing::Single(unsafe {
        d.push(
            sqe,
            OpKind::Recv,
            false,
            Retained::PoolBuf(fd.retain(), buf),
        )
    })
}

fn poll_epoll(
    d: &mut crate::driver::epoll::Driver,
    fd: &SharedFd,
    source: crate::driver::epoll::SourceKey,
    pool: &Rc<crate::driver::pool::HeapPool>,
    cx: &mut Context<'_>,
) -> Poll<io::Result<Option<RecvBuf>>> {
    loop {
        if d.poll_ready(source, Interest::Read, cx).is_pending() {
            return Poll::Pending;
        }
        let mut buf = pool.get();
        d.count_syscall();
        // The raw syscall, not libc's `recv`: that wrapper is a thread
        // cancellation point, and entering and leaving its cancellation
        // state costs about 30 instructions per call, a tenth of a request.
        // Every argument is register-sized, as the variadic `syscall` reads.
        // SAFETY: `buf` is live and writable for `buf.len()` bytes, all that
        // recvfrom (with null address arguments) may write.
        let n = unsafe {
            libc::syscall(
                libc::SYS_recvfrom,
                libc::c_long::from(fd.as_raw_fd()),
                buf.as_mut_ptr(),
                buf.len(),
                libc::c_long::from(0),
                std::ptr::null_mut::<libc::sockaddr>(),
                std::ptr::null_mut::<libc::socklen_t>(),
            )
        };
        if n > 0 {
            if (n as usize) < buf.len() {
                d.read_drained(source);
            }
            return Poll::Ready(Ok(Some(RecvBuf::from_pool(pool.clone(), buf, n as usize))));
        }
        pool.put(buf);
        if n == 0 {
            return Poll::Ready(Ok(None));
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EAGAIN) => d.clear_ready(source, Interest::Read),
            Some(libc::EINTR) => {}
            _ => return Poll::Ready(Err(err)),
        }
    }
}
