//! Unix domain sockets: [`UnixStream`], [`UnixAddr`] and [`PeerCred`].
//! The listener is in `unix_listener.rs`.

use std::fmt;
use std::io;
use std::ops::Deref;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::Stream;
use crate::op;
use crate::sys::{self, RawAddr};

/// Where a Unix socket listens: a path in the filesystem, or a name in
/// Linux's abstract namespace (no file; it goes away with its socket, and
/// only the network namespace bounds who can reach it).
///
/// Parsed from text (`"@name"` is an abstract name, as `ss` prints them;
/// anything else a path), or made with [`path`](Self::path) and
/// [`abstract_name`](Self::abstract_name).
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum UnixAddr {
    /// A socket file at this path.
    Path(PathBuf),
    /// A name in the abstract namespace (without the leading NUL).
    Abstract(Vec<u8>),
}

impl UnixAddr {
    /// A socket file at `path`.
    pub fn path(path: impl Into<PathBuf>) -> UnixAddr {
        UnixAddr::Path(path.into())
    }

    /// A name in the abstract namespace.
    pub fn abstract_name(name: impl Into<Vec<u8>>) -> UnixAddr {
        UnixAddr::Abstract(name.into())
    }

    /// The socket file's path, if this is one.
    pub fn as_path(&self) -> Option<&Path> {
        match self {
            UnixAddr::Path(path) => Some(path),
            UnixAddr::Abstract(_) => None,
        }
    }

    /// The address in the kernel's form.
    pub(crate) fn to_raw(&self) -> io::Result<RawAddr> {
        match self {
            UnixAddr::Path(path) => RawAddr::unix(path.as_os_str().as_bytes(), false),
            UnixAddr::Abstract(name) => RawAddr::unix(name, true),
        }
    }
}

impl FromStr for UnixAddr {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<UnixAddr, Self::Err> {
        Ok(match s.strip_prefix('@') {
            Some(name) => UnixAddr::Abstract(name.as_bytes().to_vec()),
            None => UnixAddr::Path(PathBuf::from(s)),
        })
    }
}

impl From<&Path> for UnixAddr {
    fn from(path: &Path) -> UnixAddr {
        UnixAddr::Path(path.to_path_buf())
    }
}

impl From<PathBuf> for UnixAddr {
    fn from(path: PathBuf) -> UnixAddr {
        UnixAddr::Path(path)
    }
}

impl fmt::Display for UnixAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnixAddr::Path(path) => write!(f, "{}", path.display()),
            UnixAddr::Abstract(name) => write!(f, "@{}", String::from_utf8_lossy(name)),
        }
    }
}

impl fmt::Debug for UnixAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

/// Who was at the other end of a Unix socket when it connected
/// (`SO_PEERCRED`; see [`Stream::peer_cred`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerCred {
    /// The peer's process id.
    pub pid: i32,
    /// Its effective user id.
    pub uid: u32,
    /// Its effective group id.
    pub gid: u32,
}

impl From<libc::ucred> for PeerCred {
    fn from(cred: libc::ucred) -> PeerCred {
        PeerCred {
            pid: cred.pid,
            uid: cred.uid,
            gid: cred.gid,
        }
    }
}

/// A Unix domain stream connection owned by one core: a [`Stream`] (whose
/// methods it has, by dereference) that was made over a Unix socket.
///
/// # Examples
///
/// ```
/// use percore::{net::UnixStream, Backend};
///
/// # fn main() -> std::io::Result<()> {
/// let said = percore::block_on(Backend::Auto, async {
///     let (a, b) = UnixStream::pair()?;
///     let (res, _) = a.write_all(b"ping".to_vec()).await;
///     res?;
///     let got = b.read().await?.expect("bytes before the end");
///     Ok::<_, std::io::Error>(got.to_vec())
/// })??;
/// assert_eq!(said, b"ping");
/// # Ok(())
/// # }
/// ```
pub struct UnixStream {
    stream: Stream,
}

impl UnixStream {
    /// Connects to the socket file at `path`.
    ///
    /// # Errors
    ///
    /// `NotFound` when there is no such file, `ConnectionRefused` when no
    /// one accepts on it, `WouldBlock` when its listener's queue is full.
    pub async fn connect(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        UnixStream::connect_addr(&UnixAddr::path(path.as_ref())).await
    }

    /// Connects to a socket file or an abstract name.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect), and `InvalidInput` for an address
    /// longer than 107 bytes.
    pub async fn connect_addr(addr: &UnixAddr) -> io::Result<UnixStream> {
        let raw = addr.to_raw()?;
        let stream = Stream::from_fd(sys::unix_socket()?)?;
        op::connect::Connect::new(stream.fd(), stream.io(), raw).await?;
        Ok(UnixStream { stream })
    }

    /// Two connected streams, both on this core: one end for a task, the
    /// other for another, with the same I/O as any connection.
    ///
    /// # Errors
    ///
    /// Out of file descriptors, or not on a core.
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = sys::socket_pair_nonblocking()?;
        Ok((UnixStream::from_fd(a)?, UnixStream::from_fd(b)?))
    }

    /// Wraps a created socket; registers it with this core.
    fn from_fd(fd: std::os::fd::OwnedFd) -> io::Result<UnixStream> {
        Ok(UnixStream::from_stream(Stream::from_fd(fd)?))
    }

    /// An accepted Unix connection.
    pub(crate) fn from_stream(stream: Stream) -> UnixStream {
        UnixStream { stream }
    }

    /// The connection as a plain [`Stream`].
    pub fn into_stream(self) -> Stream {
        self.stream
    }

    /// Closes the connection (the same as dropping it).
    pub fn close(self) {}
}

impl Deref for UnixStream {
    type Target = Stream;

    fn deref(&self) -> &Stream {
        &self.stream
    }
}

impl From<UnixStream> for Stream {
    fn from(unix: UnixStream) -> Stream {
        unix.stream
    }
}

impl AsRawFd for UnixStream {
    fn as_raw_fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }
}

impl fmt::Debug for UnixStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixStream")
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}
