//! Opening an outbound connection.

use std::future::Future;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use io_uring::{opcode, types};

use super::lifecycle::{Op, OpAble, Sqe};
use super::{cqe_result, SharedFd, SocketIo};
use crate::driver::current::Io;
use crate::driver::epoll::{self, Interest, SourceKey};
use crate::driver::uring::{self, Cqe, OpKind, Retained};
use crate::sys::{self, RawAddr};

/// Connects `fd` (already registered as `io`) to `addr`.
pub(crate) struct Connect<'a>(Op<'a, ConnectTo<'a>>);

/// What a connect is made of.
pub(crate) struct ConnectTo<'a> {
    fd: &'a SharedFd,
    addr: RawAddr,
    /// epoll: the non-blocking `connect` was made.
    started: bool,
}

impl<'a> Connect<'a> {
    pub(crate) fn new(fd: &'a SharedFd, io: &'a SocketIo, addr: RawAddr) -> Self {
        let to = ConnectTo {
            fd,
            addr,
            started: false,
        };
        Connect(Op::on_socket(io, to))
    }
}

// SAFETY: the SQE points into a box of the address, which the slot keeps
// (`Retained::Connect`) with the socket, to the completion.
unsafe impl OpAble for ConnectTo<'_> {
    type Output = ();

    fn uring_sqe(&mut self, _core: &Io, _d: &uring::Driver) -> Sqe {
        let addr = Box::new(self.addr);
        let entry =
            opcode::Connect::new(types::Fd(self.fd.as_raw_fd()), addr.as_ptr(), addr.len).build();
        Sqe {
            entry,
            kind: OpKind::Connect,
            retained: Retained::Connect(self.fd.retain(), addr),
        }
    }

    fn uring_done(&mut self, cqe: Cqe, _retained: Retained) -> Option<io::Result<()>> {
        Some(cqe_result(cqe.res).map(drop))
    }

    fn poll_epoll(
        &mut self,
        _core: &Io,
        d: &mut epoll::Driver,
        source: SourceKey,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.started {
            self.started = true;
            let raw = self.addr;
            d.count_syscall();
            let fd = self.fd.as_raw_fd();
            // SAFETY: `self.fd` keeps `fd` open; `raw` holds a valid
            // address of `raw.len` bytes for the call (a non-blocking
            // connect copies it).
            match sys::cvt(unsafe { libc::connect(fd, raw.as_ptr(), raw.len) }) {
                Ok(_) => return Poll::Ready(Ok(())),
                Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
                    d.clear_ready(source, Interest::Write);
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        if d.poll_ready(source, Interest::Write, cx).is_pending() {
            return Poll::Pending;
        }
        match sys::get_int_opt(self.fd.as_fd(), libc::SOL_SOCKET, libc::SO_ERROR) {
            Ok(0) => Poll::Ready(Ok(())),
            Ok(errno) => Poll::Ready(Err(io::Error::from_raw_os_error(errno))),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn dropped_in_flight(&mut self) -> Retained {
        // The address and the socket are the slot's already.
        Retained::None
    }
}

impl Future for Connect<'_> {
    type Output = io::Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().0.poll(cx)
    }
}
