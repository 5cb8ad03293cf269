//! [`TcpStream`]: a connected socket of the current core.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::buf::{BufResult, IoBuf, RecvBuf};
use crate::op::{self, SharedFd, SocketIo};
use crate::sys;

/// A TCP connection owned by one core.
///
/// Reads hand out [`RecvBuf`] leases; writes take owned buffers and give
/// them back. All methods take `&self`, so a read and a write may wait at
/// the same time: two futures of one task, run together by
/// [`future::try_join`](crate::future::try_join) (whose module shows a
/// relay that copies both ways at once), or two tasks that share the
/// stream through an `Rc`. At most one read and one write at a time: a
/// second read would take the first one's wake-up, a second write could
/// interleave its bytes with the first's. Reads are cancel-safe: the
/// receive operation belongs to the stream, not to the `read()` future, so
/// dropping a read (say, on a timeout) loses no data. Dropping the stream
/// cancels what is in flight and closes the socket once the kernel is done
/// with it. A `TcpStream` cannot leave its core (it is `!Send`).
pub struct TcpStream {
    fd: SharedFd,
    io: SocketIo,
    /// The peer's address, looked up once (a syscall) on first use.
    peer: std::cell::Cell<Option<SocketAddr>>,
}

impl TcpStream {
    /// Wraps an accepted or connected socket; registers it with this core.
    pub(crate) fn from_fd(fd: OwnedFd) -> io::Result<TcpStream> {
        let fd = SharedFd::new(fd);
        let io = op::register(&fd)?;
        Ok(TcpStream {
            fd,
            io,
            peer: std::cell::Cell::new(None),
        })
    }

    /// Opens a connection to `addr` (with `TCP_NODELAY` set).
    ///
    /// # Errors
    ///
    /// The connect error (`ECONNREFUSED`, `ETIMEDOUT`, …). Wrap the call in
    /// [`timeout`](crate::time::timeout) for a connect deadline; dropping
    /// the future cancels the attempt and closes the socket.
    pub async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
        let fd = sys::tcp_socket(&addr)?;
        let stream = TcpStream::from_fd(fd)?;
        op::connect::Connect::new(&stream.fd, &stream.io, addr).await?;
        stream.set_nodelay(true)?;
        Ok(stream)
    }

    /// Receives the next bytes; `Ok(None)` once the peer has closed its
    /// write side (end of stream).
    pub fn read(&self) -> Read<'_> {
        Read { stream: self }
    }

    /// Sends some of `buf`; returns how many bytes went out.
    pub async fn write<B: IoBuf>(&self, buf: B) -> BufResult<usize, B> {
        op::send::Send::new(&self.fd, &self.io, buf, 0).await
    }

    /// Sends all of `buf`, resuming after partial sends.
    ///
    /// # Errors
    ///
    /// The first send error (`EPIPE`, `ECONNRESET`, …; `SIGPIPE` is never
    /// raised), or `WriteZero` if the kernel accepted nothing. A peer that
    /// reset gives `ConnectionReset` to the first operation that meets the
    /// reset and `BrokenPipe` to later sends; which one a write meets
    /// depends on the backend (io_uring keeps a receive armed, which may
    /// meet it first), so treat both as "the peer is gone".
    pub fn write_all<B: IoBuf>(&self, buf: B) -> WriteAll<'_, B> {
        WriteAll {
            stream: self,
            len: buf.bytes_init(),
            send: op::send::Send::new(&self.fd, &self.io, buf, 0),
            sent: 0,
        }
    }

    /// Shuts down the write side: the peer reads end of stream after the
    /// bytes already sent.
    pub fn shutdown_write(&self) -> io::Result<()> {
        sys::shutdown(self.fd.as_raw_fd(), libc::SHUT_WR)
    }

    /// Sets `TCP_NODELAY` (on by default for accepted and connected streams).
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        sys::set_int_opt(
            self.fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            i32::from(on),
        )
    }

    /// Sets `SO_LINGER`; `Some(0)` makes `close` send a reset. The kernel
    /// counts whole seconds: a part of a second counts as one, so that a
    /// short linger is not taken for a reset.
    pub fn set_linger(&self, linger: Option<std::time::Duration>) -> io::Result<()> {
        let seconds = linger.map_or(0, |d| {
            let whole = d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0));
            i32::try_from(whole).unwrap_or(i32::MAX)
        });
        let value = libc::linger {
            l_onoff: i32::from(linger.is_some()),
            l_linger: seconds,
        };
        // SAFETY: the kernel reads `size_of::<linger>()` bytes of `value`,
        // live for the call.
        sys::syscall!(setsockopt(
            self.fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &value as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t
        ))?;
        Ok(())
    }

    /// The remote address (looked up once, then cached).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        if let Some(addr) = self.peer.get() {
            return Ok(addr);
        }
        let addr = sys::peer_addr(self.fd.as_raw_fd())?;
        self.peer.set(Some(addr));
        Ok(addr)
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        sys::local_addr(self.fd.as_raw_fd())
    }

    /// Closes the connection (the same as dropping it).
    pub fn close(self) {}
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        op::deregister(&self.fd, &self.io);
    }
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpStream")
            .field("fd", &self.fd.as_raw_fd())
            .finish()
    }
}

/// The future of [`TcpStream::read`].
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Read<'a> {
    stream: &'a TcpStream,
}

impl Future for Read<'_> {
    type Output = io::Result<Option<RecvBuf>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let stream = self.stream;
        op::recv::poll_recv(&stream.fd, &stream.io, cx)
    }
}

/// The future of [`TcpStream::write_all`], written out by hand: a server
/// awaits one per response, and an `async fn` would add a layer of state
/// machine to every poll.
#[must_use = "futures do nothing unless polled"]
pub struct WriteAll<'a, B: IoBuf> {
    stream: &'a TcpStream,
    send: op::send::Send<'a, B>,
    sent: usize,
    len: usize,
}

impl<B: IoBuf> Future for WriteAll<'_, B> {
    type Output = BufResult<(), B>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            if this.sent >= this.len {
                return match this.send.take_buf() {
                    Some(buf) => Poll::Ready((Ok(()), buf)),
                    None => panic!("WriteAll polled after completion"),
                };
            }
            let (res, buf) = std::task::ready!(Pin::new(&mut this.send).poll(cx));
            match res {
                Ok(0) => return Poll::Ready((Err(io::ErrorKind::WriteZero.into()), buf)),
                Ok(n) => {
                    this.sent += n;
                    if this.sent >= this.len {
                        return Poll::Ready((Ok(()), buf));
                    }
                    let stream = this.stream;
                    this.send = op::send::Send::new(&stream.fd, &stream.io, buf, this.sent);
                }
                Err(e) => return Poll::Ready((Err(e), buf)),
            }
        }
    }
}

impl<B: IoBuf> fmt::Debug for WriteAll<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteAll")
            .field("sent", &self.sent)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}
