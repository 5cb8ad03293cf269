//! Opening an outbound connection.

use std::future::Future;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use io_uring::{opcode, types};

use super::{cqe_result, SharedFd, SocketIo};
use crate::driver::current;
use crate::driver::epoll::Interest;
use crate::driver::uring::{OpKey, OpKind, Retained};
use crate::driver::Driver;
use crate::sys::{self, RawAddr};

/// Connects `fd` (already registered as `io`) to `addr`.
pub(crate) struct Connect<'a> {
    fd: &'a SharedFd,
    io: &'a SocketIo,
    addr: RawAddr,
    key: Option<OpKey>,
    started: bool,
}

impl<'a> Connect<'a> {
    pub(crate) fn new(fd: &'a SharedFd, io: &'a SocketIo, addr: RawAddr) -> Self {
        Connect {
            fd,
            io,
            addr,
            key: None,
            started: false,
        }
    }
}

impl Future for Connect<'_> {
    type Output = io::Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        current::with_io(|core| match (&mut *core.driver.borrow_mut(), this.io) {
            _ if !this.io.belongs_to(core) => Poll::Ready(Err(super::foreign_core())),
            (Driver::Uring(d), SocketIo::Uring { .. }) => {
                let key = *this.key.get_or_insert_with(|| {
                    let addr = Box::new(this.addr);
                    let sqe = opcode::Connect::new(
                        types::Fd(this.fd.as_raw_fd()),
                        addr.as_ptr(),
                        addr.len,
                    )
                    .build();
                    // SAFETY: the SQE points into `addr`'s box, which the
                    // slot keeps to the completion, and names `this.fd`, which
                    // the slot keeps open too.
                    unsafe {
                        d.push(
                            sqe,
                            OpKind::Connect,
                            false,
                            Retained::Connect(this.fd.retain(), addr),
                        )
                    }
                });
                match d.poll_op(key, cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready((cqe, _retained)) => {
                        this.key = None;
                        Poll::Ready(cqe_result(cqe.res).map(drop))
                    }
                }
            }
            (Driver::Epoll(d), SocketIo::Epoll { source, .. }) => {
                if !this.started {
                    this.started = true;
                    let raw = this.addr;
                    d.count_syscall();
                    let fd = this.fd.as_raw_fd();
                    // SAFETY: `this.fd` keeps `fd` open; `raw` holds a valid
                    // address of `raw.len` bytes for the call (a
                    // non-blocking connect copies it).
                    match sys::cvt(unsafe { libc::connect(fd, raw.as_ptr(), raw.len) }) {
                        Ok(_) => return Poll::Ready(Ok(())),
                        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
                            d.clear_ready(*source, Interest::Write);
                        }
                        Err(e) => return Poll::Ready(Err(e)),
                    }
                }
                if d.poll_ready(*source, Interest::Write, cx).is_pending() {
                    return Poll::Pending;
                }
                match sys::get_int_opt(this.fd.as_fd(), libc::SOL_SOCKET, libc::SO_ERROR) {
                    Ok(0) => Poll::Ready(Ok(())),
                    Ok(errno) => Poll::Ready(Err(io::Error::from_raw_os_error(errno))),
                    Err(e) => Poll::Ready(Err(e)),
                }
            }
            _ => Poll::Ready(Err(io::Error::other(
                "socket used on a core of another backend",
            ))),
        })
    }
}

impl Drop for Connect<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            // The address and the socket are the slot's: nothing to hand
            // over.
            super::release_dropped(self.io, key, Retained::None);
        }
    }
}
