//! Receiving into a leased buffer.
//!
//! io_uring: a multishot receive picks buffers from the provided-buffer
//! ring and queues completions in the socket's standing slot; a read takes
//! the next one. When the ring runs dry (`ENOBUFS`) the next read is a
//! single-shot receive into a pool buffer, and the multishot is re-armed
//! as soon as that completes. epoll: a non-blocking `recv` into a pool
//! buffer.

use std::io;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::task::{Context, Poll};

use io_uring::{cqueue, opcode, types};

use super::{cqe_result, SharedFd, SocketIo, Standing};
use crate::buf::RecvBuf;
use crate::driver::epoll::Interest;
use crate::driver::uring::buf_ring::BUF_GROUP;
use crate::driver::uring::{OpKind, Retained};
use crate::driver::Driver;
use crate::runtime::context;

/// Polls the next received bytes: `Some(buf)`, or `None` at end of stream.
pub(crate) fn poll_recv(
    fd: &SharedFd,
    io: &SocketIo,
    ring_dry: &std::cell::Cell<bool>,
    cx: &mut Context<'_>,
) -> Poll<io::Result<Option<RecvBuf>>> {
    if crate::executor::budget::poll_proceed(cx).is_pending() {
        return Poll::Pending;
    }
    context::with_core(|core| {
        let mut driver = core.driver.borrow_mut();
        let result = match (&mut *driver, io) {
            (Driver::Uring(d), SocketIo::Uring { standing }) => {
                poll_uring(d, fd, standing, ring_dry, &core.pool, cx)
            }
            (Driver::Epoll(d), SocketIo::Epoll { source }) => {
                poll_epoll(d, fd, *source, &core.pool, cx)
            }
            _ => Poll::Ready(Err(io::Error::other(
                "socket used on a core of another backend",
            ))),
        };
        if let Poll::Ready(Ok(Some(buf))) = &result {
            core.shared.stats.bytes_in.add(buf.len() as u64);
        }
        result
    })
}

fn poll_uring(
    d: &mut crate::driver::uring::Driver,
    fd: &SharedFd,
    standing: &std::cell::Cell<Standing>,
    ring_dry: &std::cell::Cell<bool>,
    pool: &Rc<crate::buf::pool::HeapPool>,
    cx: &mut Context<'_>,
) -> Poll<io::Result<Option<RecvBuf>>> {
    loop {
        match standing.get() {
            Standing::Idle => {
                let key = if d.multishot() && !ring_dry.get() {
                    arm_multishot(d, fd)
                } else {
                    ring_dry.set(false);
                    let mut buf = pool.get();
                    let sqe = opcode::Recv::new(
                        types::Fd(fd.as_raw_fd()),
                        buf.as_mut_ptr(),
                        buf.len() as u32,
                    )
                    .build();
                    Standing::Single(d.push(
                        sqe,
                        OpKind::Recv,
                        false,
                        Retained::PoolBuf(fd.retain(), buf),
                    ))
                };
                standing.set(key);
            }
            Standing::Multishot(key) => match d.poll_stream(key, cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(cqe)) => {
                    if cqe.res == -libc::ENOBUFS {
                        ring_dry.set(true);
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
                    return Poll::Ready(Ok(Some(RecvBuf::from_ring(ring.clone(), bid, n))));
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
                        // Re-arm the multishot now, not at the next read: a
                        // socket left idle (a pooled upstream connection)
                        // must still see its peer's close.
                        if d.multishot() {
                            standing.set(arm_multishot(d, fd));
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

/// Queues a multishot receive from the buffer ring on `fd`.
fn arm_multishot(d: &mut crate::driver::uring::Driver, fd: &SharedFd) -> Standing {
    let sqe = opcode::RecvMulti::new(types::Fd(fd.as_raw_fd()), BUF_GROUP).build();
    Standing::Multishot(d.push(sqe, OpKind::Recv, true, Retained::Fd(fd.retain())))
}

fn poll_epoll(
    d: &mut crate::driver::epoll::Driver,
    fd: &SharedFd,
    source: crate::driver::epoll::SourceKey,
    pool: &Rc<crate::buf::pool::HeapPool>,
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
