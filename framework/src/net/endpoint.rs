//! [`Endpoint`]: a TCP address or a Unix socket, for listening and for
//! connecting alike.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use super::{Stream, TcpStream, UnixAddr, UnixStream};

/// Where a server listens or a client connects: a TCP address, or a Unix
/// socket (a path or an abstract name). A server's listeners take one
/// ([`ServerBuilder::listen`](crate::ServerBuilder::listen)), and
/// [`Stream::connect`] connects to one, so code that serves or calls
/// "an address" works over either transport.
///
/// Parsed from text as `unix:PATH` or `unix:@NAME` for a Unix socket, and
/// as `IP:PORT` otherwise.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A Unix domain socket.
    Unix(UnixAddr),
}

impl From<SocketAddr> for Endpoint {
    fn from(addr: SocketAddr) -> Endpoint {
        Endpoint::Tcp(addr)
    }
}

impl From<UnixAddr> for Endpoint {
    fn from(addr: UnixAddr) -> Endpoint {
        Endpoint::Unix(addr)
    }
}

impl From<PathBuf> for Endpoint {
    fn from(path: PathBuf) -> Endpoint {
        Endpoint::Unix(UnixAddr::Path(path))
    }
}

impl FromStr for Endpoint {
    type Err = std::net::AddrParseError;

    fn from_str(s: &str) -> Result<Endpoint, Self::Err> {
        match s.strip_prefix("unix:") {
            Some(rest) => Ok(Endpoint::Unix(rest.parse().unwrap_or_else(|e| match e {}))),
            None => s.parse().map(Endpoint::Tcp),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp(addr) => write!(f, "{addr}"),
            Endpoint::Unix(addr) => write!(f, "unix:{addr}"),
        }
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

impl Stream {
    /// Connects to `endpoint` over its transport (TCP with `TCP_NODELAY`).
    ///
    /// # Errors
    ///
    /// As [`TcpStream::connect`] or [`UnixStream::connect_addr`].
    pub async fn connect(endpoint: &Endpoint) -> io::Result<Stream> {
        match endpoint {
            Endpoint::Tcp(addr) => TcpStream::connect(*addr).await.map(Stream::from),
            Endpoint::Unix(addr) => UnixStream::connect_addr(addr).await.map(Stream::from),
        }
    }
}
