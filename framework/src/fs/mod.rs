//! Files and paths without blocking the core.
//!
//! A handler that reads or writes a file with `std::fs` stops its whole
//! core until the disk answers. [`File`] does the same work as an
//! operation of the core's backend instead:
//!
//! - **Both backends** first try what cannot wait, on the core: a read
//!   or write with `preadv2`/`pwritev2` and `RWF_NOWAIT`, which completes
//!   at once when the page cache has the data, and an open with `openat2`
//!   and `RESOLVE_CACHED`, which succeeds when every path component is in
//!   the dentry cache. One syscall each, where a trip through the ring or
//!   the pool costs several times that.
//! - **io_uring**: everything else is one SQE (`openat`, `read`, `write`,
//!   `fsync`, `statx`, `ftruncate`, `close`, `unlinkat`, `renameat`,
//!   `mkdirat`), completed like a socket's.
//! - **epoll**: everything else runs on a small pool of threads shared by
//!   the cores, whose result wakes the core; `close` runs on the core.
//! - File systems differ: on Linux 6.18 ext4 takes reads with
//!   `RWF_NOWAIT` but not buffered writes, and tmpfs neither
//!   (`EOPNOTSUPP`); a file learns that from its first refusal, and its
//!   writes then go straight to the ring or the pool.
//!
//! Several buffers go in one call with [`File::writev_at`] and
//! [`File::readv_at`]; the core's registered buffers
//! ([`FixedBuf`](crate::buf::FixedBuf)) with [`File::read_fixed_at`] and
//! [`File::write_fixed_at`], which on io_uring spare each call the
//! mapping of its pages.
//!
//! Buffers are owned, as everywhere in percore: each call takes its buffer
//! and hands it back with the result ([`BufResult`](crate::buf::BufResult)).
//! Dropping a future while the kernel or a pool thread still uses its
//! buffer is safe: the buffer (and the file) live until that use ends.
//! Errors keep their [`io::ErrorKind`] (`NotFound`, `PermissionDenied`,
//! `IsADirectory`, ...).
//!
//! Everything here must run on a percore core (inside a handler, a task,
//! or [`block_on`](crate::block_on)), and panics elsewhere.

mod aligned;
mod file;
mod fixed;
mod metadata;
mod pool;
mod resident;
mod rw;
mod sys;
mod vectored;

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use io_uring::{opcode, types};

pub use aligned::AlignedBuf;
pub use file::{File, OpenOptions};
pub use metadata::Metadata;

use crate::driver::uring::OpKind;
use crate::driver::{current, Driver};
use crate::op::file::Submit;

/// Whether this core runs io_uring (else epoll).
fn on_uring() -> bool {
    current::with_io(|core| matches!(&*core.driver.borrow(), Driver::Uring(_)))
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
}

/// Removes the file at `path` (not a directory).
///
/// # Errors
///
/// `NotFound`, `PermissionDenied`, `IsADirectory`, ... as `unlink(2)`.
pub async fn remove_file(path: impl AsRef<Path>) -> io::Result<()> {
    let path = c_path(path.as_ref())?;
    if on_uring() {
        let sqe = opcode::UnlinkAt::new(types::Fd(libc::AT_FDCWD), path.as_ptr()).build();
        // SAFETY: the SQE points into the path's heap bytes, which
        // `Submit` keeps.
        let (res, _path) = unsafe { Submit::new(path, sqe, OpKind::File) }.await;
        return res.map(drop);
    }
    pool::run(move || std::fs::remove_file(Path::new(std::ffi::OsStr::from_bytes(path.as_bytes()))))
        .await?
}

/// Renames `from` to `to`, replacing `to` if it is a file.
///
/// # Errors
///
/// As `rename(2)`.
pub async fn rename(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
    let paths = (c_path(from.as_ref())?, c_path(to.as_ref())?);
    if on_uring() {
        let cwd = types::Fd(libc::AT_FDCWD);
        let sqe = opcode::RenameAt::new(cwd, paths.0.as_ptr(), cwd, paths.1.as_ptr()).build();
        // SAFETY: the SQE points into the paths' heap bytes, which
        // `Submit` keeps.
        let (res, _paths) = unsafe { Submit::new(paths, sqe, OpKind::File) }.await;
        return res.map(drop);
    }
    let (from, to) = (from.as_ref().to_owned(), to.as_ref().to_owned());
    pool::run(move || std::fs::rename(from, to)).await?
}

/// Creates the directory `path` (mode `0o777` less the umask); its parent
/// must exist.
///
/// # Errors
///
/// `AlreadyExists`, `NotFound` (no parent), ... as `mkdir(2)`.
pub async fn create_dir(path: impl AsRef<Path>) -> io::Result<()> {
    let c = c_path(path.as_ref())?;
    if on_uring() {
        let sqe = opcode::MkDirAt::new(types::Fd(libc::AT_FDCWD), c.as_ptr())
            .mode(0o777)
            .build();
        // SAFETY: the SQE points into the path's heap bytes, which
        // `Submit` keeps.
        let (res, _path) = unsafe { Submit::new(c, sqe, OpKind::File) }.await;
        return res.map(drop);
    }
    let path = path.as_ref().to_owned();
    pool::run(move || std::fs::create_dir(path)).await?
}

/// The metadata of what `path` names, following symbolic links.
///
/// # Errors
///
/// As `statx(2)`.
pub async fn metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    stat(None, c_path(path.as_ref())?, 0).await
}

/// The metadata of `path` itself, not following a final symbolic link.
///
/// # Errors
///
/// As `statx(2)`.
pub async fn symlink_metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    stat(None, c_path(path.as_ref())?, libc::AT_SYMLINK_NOFOLLOW).await
}

/// `statx` of `path`, relative to `dir` (or the working directory).
async fn stat(dir: Option<Arc<OwnedFd>>, path: CString, flags: i32) -> io::Result<Metadata> {
    let dirfd = dir.as_ref().map_or(libc::AT_FDCWD, |fd| fd.as_raw_fd());
    if on_uring() {
        let mut buf = sys::statx_buf();
        let out: *mut libc::statx = &mut *buf;
        let sqe = opcode::Statx::new(types::Fd(dirfd), path.as_ptr(), out.cast())
            .flags(flags | libc::AT_STATX_SYNC_AS_STAT)
            .mask(libc::STATX_BASIC_STATS)
            .build();
        // SAFETY: the SQE points into the path's and the record's heap
        // memory, which `Submit` keeps with the directory's fd.
        let submit = unsafe { Submit::new((dir, path, buf), sqe, OpKind::File) };
        let (res, (_dir, _path, buf)) = submit.await;
        return res.map(|_| Metadata::from_statx(*buf));
    }
    pool::run(move || {
        let _dir = dir;
        sys::statx(dirfd, &path, flags)
    })
    .await?
    .map(Metadata::from_statx)
}
