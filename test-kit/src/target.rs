//! [`Target`]: where a test client connects (a TCP address or a Unix
//! socket path), and [`ClientSock`], a blocking or non-blocking client
//! socket of either kind.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use super::IO_TIMEOUT;

/// Where a test client connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A Unix socket file.
    Unix(PathBuf),
}

impl From<SocketAddr> for Target {
    fn from(addr: SocketAddr) -> Target {
        Target::Tcp(addr)
    }
}

impl From<PathBuf> for Target {
    fn from(path: PathBuf) -> Target {
        Target::Unix(path)
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Tcp(addr) => write!(f, "{addr}"),
            Target::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

impl Target {
    /// A blocking connection with [`IO_TIMEOUT`] on reads and writes.
    pub fn connect(&self) -> std::io::Result<ClientSock> {
        let sock = match self {
            Target::Tcp(addr) => {
                let s = TcpStream::connect_timeout(addr, IO_TIMEOUT)?;
                s.set_nodelay(true)?;
                ClientSock::Tcp(s)
            }
            Target::Unix(path) => ClientSock::Unix(UnixStream::connect(path)?),
        };
        sock.set_timeouts()?;
        Ok(sock)
    }
}

/// A client socket, TCP or Unix.
#[derive(Debug)]
pub enum ClientSock {
    /// Over TCP.
    Tcp(TcpStream),
    /// Over a Unix socket.
    Unix(UnixStream),
}

impl ClientSock {
    fn set_timeouts(&self) -> std::io::Result<()> {
        match self {
            ClientSock::Tcp(s) => {
                s.set_read_timeout(Some(IO_TIMEOUT))?;
                s.set_write_timeout(Some(IO_TIMEOUT))
            }
            ClientSock::Unix(s) => {
                s.set_read_timeout(Some(IO_TIMEOUT))?;
                s.set_write_timeout(Some(IO_TIMEOUT))
            }
        }
    }

    /// Sets `O_NONBLOCK`.
    pub fn set_nonblocking(&self, on: bool) -> std::io::Result<()> {
        match self {
            ClientSock::Tcp(s) => s.set_nonblocking(on),
            ClientSock::Unix(s) => s.set_nonblocking(on),
        }
    }

    /// Shuts down one or both directions.
    pub fn shutdown(&self, how: Shutdown) -> std::io::Result<()> {
        match self {
            ClientSock::Tcp(s) => s.shutdown(how),
            ClientSock::Unix(s) => s.shutdown(how),
        }
    }

    /// A second handle to the same socket.
    pub fn try_clone(&self) -> std::io::Result<ClientSock> {
        Ok(match self {
            ClientSock::Tcp(s) => ClientSock::Tcp(s.try_clone()?),
            ClientSock::Unix(s) => ClientSock::Unix(s.try_clone()?),
        })
    }
}

impl Read for ClientSock {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            ClientSock::Tcp(s) => s.read(buf),
            ClientSock::Unix(s) => s.read(buf),
        }
    }
}

impl Write for ClientSock {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            ClientSock::Tcp(s) => s.write(buf),
            ClientSock::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl AsRawFd for ClientSock {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            ClientSock::Tcp(s) => s.as_raw_fd(),
            ClientSock::Unix(s) => s.as_raw_fd(),
        }
    }
}
