//! [`TcpStream`]: a TCP connection of the current core.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::ops::Deref;
use std::os::fd::{AsFd, AsRawFd, RawFd};

use super::Stream;
use crate::op;
use crate::sys::{self, RawAddr};

/// A TCP connection owned by one core: a [`Stream`] (whose methods it
/// has, by dereference) that was made over TCP, with what only TCP has.
///
/// Turn it into the plain `Stream` with [`into_stream`](Self::into_stream)
/// (or `From`) to keep TCP and Unix connections in one pool or hand either
/// to the same code.
pub struct TcpStream {
    stream: Stream,
}

impl TcpStream {
    /// Opens a connection to `addr` (with `TCP_NODELAY` set).
    ///
    /// # Errors
    ///
    /// The connect error (`ECONNREFUSED`, `ETIMEDOUT`, …). Wrap the call in
    /// [`timeout`](crate::time::timeout) for a connect deadline; dropping
    /// the future cancels the attempt and closes the socket.
    pub async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
        let fd = sys::tcp_socket(&addr)?;
        let stream = Stream::from_fd(fd)?;
        op::connect::Connect::new(stream.fd(), stream.io(), RawAddr::from_std(addr)).await?;
        let stream = TcpStream { stream };
        stream.set_nodelay(true)?;
        Ok(stream)
    }

    /// An accepted TCP connection.
    pub(crate) fn from_stream(stream: Stream) -> TcpStream {
        TcpStream { stream }
    }

    /// Sets `TCP_NODELAY` (on by default for accepted and connected streams).
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        sys::set_int_opt(
            self.stream.fd().as_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            i32::from(on),
        )
    }

    /// The connection as a plain [`Stream`].
    pub fn into_stream(self) -> Stream {
        self.stream
    }

    /// Closes the connection (the same as dropping it).
    pub fn close(self) {}
}

impl Deref for TcpStream {
    type Target = Stream;

    fn deref(&self) -> &Stream {
        &self.stream
    }
}

impl From<TcpStream> for Stream {
    fn from(tcp: TcpStream) -> Stream {
        tcp.stream
    }
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpStream")
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}
