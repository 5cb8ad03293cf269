//! [`UnixListener`], and binding a Unix socket's path: replacing a stale
//! socket file, refusing a live one, setting the file's mode, taking a
//! running server's place, and removing the file when done.

use std::fmt;
use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::listener::Acceptor;
use super::{UnixAddr, UnixStream};
use crate::sys;

/// A listening Unix domain socket served by one core.
///
/// A standalone listener removes its socket file when dropped. Unix
/// sockets have no `SO_REUSEPORT`: a server's cores share one listening
/// socket, each accepting from it (see the server's documentation).
pub struct UnixListener {
    acceptor: Acceptor,
    addr: UnixAddr,
    _file: Option<SocketFile>,
}

impl UnixListener {
    /// Binds a socket file at `path` on this core; a stale file there (a
    /// socket no one accepts on) is replaced.
    ///
    /// # Errors
    ///
    /// `AddrInUse` when a live server accepts on `path`; `AlreadyExists`
    /// when `path` is something other than a socket; the bind's errors.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        UnixListener::bind_addr(&UnixAddr::path(path.as_ref()))
    }

    /// Binds a socket file or an abstract name on this core.
    ///
    /// # Errors
    ///
    /// As [`bind`](Self::bind); `AddrInUse` for an abstract name in use.
    pub fn bind_addr(addr: &UnixAddr) -> io::Result<UnixListener> {
        let bound = bind(addr, &UnixOptions::default())?;
        UnixListener::from_bound(bound)
    }

    /// Adopts a socket bound by [`bind`] on this core.
    pub(crate) fn from_bound(bound: BoundUnix) -> io::Result<UnixListener> {
        Ok(UnixListener {
            acceptor: Acceptor::new(bound.fd, false)?,
            addr: bound.addr,
            _file: bound.file,
        })
    }

    /// Waits for the next connection.
    ///
    /// # Errors
    ///
    /// Accept errors such as `EMFILE`; the listener stays usable.
    pub async fn accept(&self) -> io::Result<UnixStream> {
        self.acceptor.accept().await.map(UnixStream::from_stream)
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> &UnixAddr {
        &self.addr
    }
}

impl AsRawFd for UnixListener {
    fn as_raw_fd(&self) -> RawFd {
        self.acceptor.borrow_fd().as_raw_fd()
    }
}

impl fmt::Debug for UnixListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixListener")
            .field("addr", &self.addr)
            .finish()
    }
}

/// How to bind a Unix socket.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UnixOptions {
    pub(crate) backlog: i32,
    /// The socket file's permission bits; `None` leaves the umask's.
    pub(crate) mode: Option<u32>,
    /// Take a live server's path instead of refusing it.
    pub(crate) take_over: bool,
}

impl Default for UnixOptions {
    fn default() -> Self {
        UnixOptions {
            backlog: 1024,
            mode: None,
            take_over: false,
        }
    }
}

/// A listening Unix socket, not yet registered with a core.
pub(crate) struct BoundUnix {
    pub(crate) fd: OwnedFd,
    pub(crate) addr: UnixAddr,
    /// The file to remove when the last listener on it is gone.
    pub(crate) file: Option<SocketFile>,
}

/// A socket file this process made: removed when dropped, unless another
/// file has taken its path since (a server that took this one's place).
#[derive(Debug)]
pub(crate) struct SocketFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl SocketFile {
    fn new(path: &Path) -> io::Result<SocketFile> {
        let meta = fs::symlink_metadata(path)?;
        Ok(SocketFile {
            path: path.to_path_buf(),
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let ours = fs::symlink_metadata(&self.path)
            .is_ok_and(|meta| meta.dev() == self.dev && meta.ino() == self.ino);
        if !ours {
            tracing::debug!(path = %self.path.display(), "socket file taken over; left in place");
            return;
        }
        if let Err(e) = fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "could not remove the socket file");
        }
    }
}

/// Binds and listens on `addr` (usable from any thread).
pub(crate) fn bind(addr: &UnixAddr, options: &UnixOptions) -> io::Result<BoundUnix> {
    let raw = addr.to_raw()?;
    let fd = sys::unix_socket()?;
    let path = match addr {
        UnixAddr::Abstract(_) => {
            sys::bind_raw(fd.as_fd(), &raw).map_err(|e| named(e, addr))?;
            sys::listen(fd.as_fd(), options.backlog)?;
            return Ok(BoundUnix {
                fd,
                addr: addr.clone(),
                file: None,
            });
        }
        UnixAddr::Path(path) => path,
    };
    match sys::bind_raw(fd.as_fd(), &raw) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE) => match probe(path)? {
            Probe::Live if options.take_over => return take_place(path, options),
            Probe::Live => {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!(
                        "{}: a server is accepting on this socket (stop it, or start with \
                         take-over to replace it without refusing a connection)",
                        path.display()
                    ),
                ))
            }
            Probe::Stale => {
                // No one accepts on it: a server that ended without
                // removing its file (killed, or crashed).
                fs::remove_file(path).or_else(|e| match e.kind() {
                    io::ErrorKind::NotFound => Ok(()),
                    _ => Err(e),
                })?;
                tracing::info!(path = %path.display(), "replaced a stale socket file");
                sys::bind_raw(fd.as_fd(), &raw).map_err(|e| named(e, addr))?;
            }
        },
        Err(e) => return Err(named(e, addr)),
    }
    finish(fd, path, options)
}

/// Sets the new file's mode, listens, and notes the file to remove.
fn finish(fd: OwnedFd, path: &Path, options: &UnixOptions) -> io::Result<BoundUnix> {
    let file = SocketFile::new(path)?;
    // Before `listen`: no one can connect under the umask's mode.
    if let Some(mode) = options.mode {
        fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    }
    sys::listen(fd.as_fd(), options.backlog)?;
    Ok(BoundUnix {
        fd,
        addr: UnixAddr::Path(path.to_path_buf()),
        file: Some(file),
    })
}

/// Takes a live server's path without a moment where it refuses a
/// connection: binds beside it, then renames the new socket over the old
/// file. The old server keeps serving what its socket already queued; new
/// clients reach this one. The old server's stop leaves the file alone (it
/// is no longer its own).
fn take_place(path: &Path, options: &UnixOptions) -> io::Result<BoundUnix> {
    let mut beside = path.as_os_str().to_owned();
    beside.push(format!(".{}.new", std::process::id()));
    let beside = PathBuf::from(beside);
    let _ = fs::remove_file(&beside);
    let fd = sys::unix_socket()?;
    let raw = UnixAddr::path(&beside).to_raw()?;
    sys::bind_raw(fd.as_fd(), &raw).map_err(|e| named(e, &UnixAddr::path(&beside)))?;
    if let Some(mode) = options.mode {
        fs::set_permissions(&beside, fs::Permissions::from_mode(mode))?;
    }
    sys::listen(fd.as_fd(), options.backlog)?;
    if let Err(e) = fs::rename(&beside, path) {
        let _ = fs::remove_file(&beside);
        return Err(e);
    }
    tracing::info!(path = %path.display(), "took over the socket file of the running server");
    Ok(BoundUnix {
        fd,
        addr: UnixAddr::Path(path.to_path_buf()),
        file: Some(SocketFile::new(path)?),
    })
}

enum Probe {
    /// A server accepts on it.
    Live,
    /// A socket file no one accepts on (or gone since).
    Stale,
}

/// Whether someone accepts on the socket file at `path`.
fn probe(path: &Path) -> io::Result<Probe> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {}
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{}: exists and is not a socket; not replacing it",
                    path.display()
                ),
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Probe::Stale),
        Err(e) => return Err(e),
    }
    let fd = sys::unix_socket()?;
    match sys::connect_raw(fd.as_fd(), &UnixAddr::path(path).to_raw()?) {
        Ok(()) => Ok(Probe::Live),
        // A full queue is a live server's.
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Ok(Probe::Live),
        Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => Ok(Probe::Stale),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Probe::Stale),
        Err(e) => Err(e),
    }
}

/// `e`, saying which address it is about.
fn named(e: io::Error, addr: &UnixAddr) -> io::Error {
    io::Error::new(e.kind(), format!("{addr}: {e}"))
}
