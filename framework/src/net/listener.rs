//! [`TcpListener`]: a listening socket of the current core.

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use super::{Stream, TcpStream};
use crate::op::{self, SharedFd, SocketIo};
use crate::sys;

/// A listening socket served by one core.
///
/// The server binds one per core on the same port with `SO_REUSEPORT`, so
/// the kernel spreads connections over cores with no shared accept queue.
pub struct TcpListener {
    acceptor: Acceptor,
    local_addr: SocketAddr,
}

/// A listening socket registered with this core, TCP or Unix: what both
/// listeners share, and what a server's accept loop uses.
pub(crate) struct Acceptor {
    fd: SharedFd,
    io: SocketIo,
    /// Accepted sockets get `TCP_NODELAY`.
    tcp: bool,
    /// Every core accepts from this one socket (a Unix listener). On
    /// io_uring each accept is then armed anew: a multishot accept stays
    /// first in the socket's wait queue, and the kernel, waking one
    /// accept per connection, would hand every connection to the core
    /// that armed first; an accept armed anew queues behind the others.
    shared: bool,
}

/// Creates a bound, listening, non-blocking socket. Usable from any thread;
/// the socket is registered with a core only by [`TcpListener::from_socket`].
fn bind_socket(addr: SocketAddr, reuse_port: bool, backlog: i32) -> io::Result<OwnedFd> {
    let fd = sys::tcp_socket(&addr)?;
    sys::set_int_opt(fd.as_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    if reuse_port {
        sys::set_int_opt(fd.as_fd(), libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    }
    sys::bind(fd.as_fd(), &addr)?;
    sys::listen(fd.as_fd(), backlog)?;
    Ok(fd)
}

/// A listening socket that joins the port's `SO_REUSEPORT` group.
pub(crate) fn bind_reuseport(addr: SocketAddr, backlog: i32) -> io::Result<OwnedFd> {
    bind_socket(addr, true, backlog)
}

/// A bound (not listening) socket without `SO_REUSEPORT`: binding it fails
/// if anything else holds the port.
pub(crate) fn bind_probe(addr: SocketAddr) -> io::Result<OwnedFd> {
    let fd = sys::tcp_socket(&addr)?;
    sys::set_int_opt(fd.as_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    sys::bind(fd.as_fd(), &addr)?;
    Ok(fd)
}

/// A bound (not listening) socket with `SO_REUSEPORT`: binding it succeeds
/// beside a listener that shares its port with the same user (a percore
/// server, say), and being no listener it takes none of its connections.
pub(crate) fn bind_probe_shared(addr: SocketAddr) -> io::Result<OwnedFd> {
    let fd = sys::tcp_socket(&addr)?;
    sys::set_int_opt(fd.as_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    sys::set_int_opt(fd.as_fd(), libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    sys::bind(fd.as_fd(), &addr)?;
    Ok(fd)
}

impl TcpListener {
    /// Binds a listener on this core (`SO_REUSEADDR`, no `SO_REUSEPORT`).
    ///
    /// # Errors
    ///
    /// Socket, bind or listen errors, e.g. `AddrInUse`.
    pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
        TcpListener::from_socket(bind_socket(addr, false, 1024)?)
    }

    /// Adopts an already listening socket on this core.
    pub(crate) fn from_socket(fd: OwnedFd) -> io::Result<TcpListener> {
        let local_addr = sys::local_addr(fd.as_fd())?;
        Ok(TcpListener {
            acceptor: Acceptor::new(fd, true)?,
            local_addr,
        })
    }

    /// Waits for the next connection. The stream has `TCP_NODELAY` set.
    ///
    /// # Errors
    ///
    /// Accept errors such as `EMFILE` (out of file descriptors); the
    /// listener stays usable, and the server backs off before retrying.
    pub async fn accept(&self) -> io::Result<TcpStream> {
        self.acceptor.accept().await.map(TcpStream::from_stream)
    }

    /// The bound address (with the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
}

impl Acceptor {
    /// Registers a listening socket with this core.
    pub(crate) fn new(fd: OwnedFd, tcp: bool) -> io::Result<Acceptor> {
        let fd = SharedFd::new(fd);
        let io = op::register(&fd)?;
        Ok(Acceptor {
            fd,
            io,
            tcp,
            shared: !tcp,
        })
    }

    /// Waits for the next connection.
    pub(crate) async fn accept(&self) -> io::Result<Stream> {
        let fd = poll_fn(|cx| op::accept::poll_accept(&self.fd, &self.io, self.shared, cx)).await?;
        self.adopt(fd)
    }

    /// Leaves new connections in the kernel's queue until the next
    /// [`accept`](Self::accept) (a core at its connection limit).
    pub(crate) fn pause_accepting(&self) {
        op::accept::pause_accept(&self.io);
    }

    /// Takes a connection that is already complete, without waiting for a
    /// new one; `None` when none is left. Used at a server stop, before the
    /// listener closes: what it hands over is served instead of reset.
    /// Without `from_kernel`, only what this core has accepted already
    /// (io_uring's accept completions) is taken, and the kernel's queue is
    /// left to the close.
    pub(crate) fn accept_queued(&self, from_kernel: bool) -> Option<io::Result<Stream>> {
        Some(
            op::accept::accept_queued(&self.fd, &self.io, from_kernel)?
                .and_then(|fd| self.adopt(fd)),
        )
    }

    /// Whether it listens on TCP (else on a Unix socket).
    pub(crate) fn is_tcp(&self) -> bool {
        self.tcp
    }

    /// The listening socket, for a direct `accept4` (see `serve`).
    pub(crate) fn borrow_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Registers an accepted socket with this core, with `TCP_NODELAY`
    /// set on a TCP one.
    fn adopt(&self, fd: OwnedFd) -> io::Result<Stream> {
        let stream = Stream::from_fd(fd)?;
        if self.tcp {
            // Best effort: a socket reset already may refuse options.
            let _ = sys::set_int_opt(stream.fd().as_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
        }
        Ok(stream)
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        op::deregister(&self.fd, &self.io);
    }
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.acceptor.fd.as_raw_fd()
    }
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpListener")
            .field("local_addr", &self.local_addr)
            .finish()
    }
}
