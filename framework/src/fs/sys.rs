//! The blocking file syscalls the epoll backend makes, inline (with
//! `RWF_NOWAIT`) or on the pool, and `statx` for both backends'
//! metadata. The only place in `fs` that calls `libc` for them.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a `RWF_NOWAIT` call's error means "would block: go to the
/// pool" rather than a real failure. File systems without `RWF_NOWAIT`
/// support say so with `EOPNOTSUPP`.
pub(crate) fn would_block(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EOPNOTSUPP))
}

/// Whether a file's file system takes `RWF_NOWAIT` reads and writes,
/// learnt from the first `EOPNOTSUPP` of each: after it, calls of that
/// kind go straight to the pool, without a call that cannot succeed.
#[derive(Debug)]
pub(crate) struct NoWait {
    reads: AtomicBool,
    writes: AtomicBool,
}

impl NoWait {
    pub(crate) fn new() -> NoWait {
        NoWait {
            reads: AtomicBool::new(true),
            writes: AtomicBool::new(true),
        }
    }

    /// Makes `call`, an `RWF_NOWAIT` read (or write, if `write`), unless
    /// the file system is known to refuse it: then, as after a refusal,
    /// the answer is `EOPNOTSUPP`, which [`would_block`] sends to the pool.
    pub(crate) fn attempt(
        &self,
        write: bool,
        call: impl FnOnce() -> io::Result<usize>,
    ) -> io::Result<usize> {
        let works = if write { &self.writes } else { &self.reads };
        if !works.load(Ordering::Relaxed) {
            return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        }
        let res = call();
        if matches!(&res, Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP)) {
            works.store(false, Ordering::Relaxed);
        }
        res
    }
}

fn offset(pos: u64) -> io::Result<i64> {
    i64::try_from(pos)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset past i64::MAX"))
}

/// `preadv2` of one buffer at `pos`. A file that cannot seek (a FIFO)
/// is read at its current position instead, as io_uring does.
///
/// # Safety
///
/// `ptr..ptr+len` is writable memory that outlives the call.
pub(crate) unsafe fn pread(
    fd: RawFd,
    ptr: *mut u8,
    len: usize,
    pos: u64,
    flags: libc::c_int,
) -> io::Result<usize> {
    let iov = [libc::iovec {
        iov_base: ptr.cast(),
        iov_len: len,
    }];
    // SAFETY: this function's contract is `preadv`'s for one iovec.
    unsafe { preadv(fd, &iov, pos, flags) }
}

/// `pwritev2` of one buffer at `pos` (or at the end, for a file opened
/// to append; at the current position, for one that cannot seek).
///
/// # Safety
///
/// `ptr..ptr+len` is readable memory that outlives the call.
pub(crate) unsafe fn pwrite(
    fd: RawFd,
    ptr: *const u8,
    len: usize,
    pos: u64,
    flags: libc::c_int,
) -> io::Result<usize> {
    let iov = [libc::iovec {
        iov_base: ptr.cast_mut().cast(),
        iov_len: len,
    }];
    // SAFETY: this function's contract is `pwritev`'s for one iovec.
    unsafe { pwritev(fd, &iov, pos, flags) }
}

/// `preadv2` into the memory `iov` names, filled in order.
///
/// # Safety
///
/// Every iovec names writable memory that outlives the call.
pub(crate) unsafe fn preadv(
    fd: RawFd,
    iov: &[libc::iovec],
    pos: u64,
    flags: libc::c_int,
) -> io::Result<usize> {
    let count = iov_count(iov);
    rw(offset(pos)?, |pos| {
        // SAFETY: the iovecs name memory writable for the call (this
        // function's contract), and live across it.
        unsafe { libc::preadv2(fd, iov.as_ptr(), count, pos, flags) }
    })
}

/// `pwritev2` of the bytes `iov` names, in order.
///
/// # Safety
///
/// Every iovec names readable memory that outlives the call.
pub(crate) unsafe fn pwritev(
    fd: RawFd,
    iov: &[libc::iovec],
    pos: u64,
    flags: libc::c_int,
) -> io::Result<usize> {
    let count = iov_count(iov);
    rw(offset(pos)?, |pos| {
        // SAFETY: the iovecs name memory readable for the call (this
        // function's contract), and live across it.
        unsafe { libc::pwritev2(fd, iov.as_ptr(), count, pos, flags) }
    })
}

/// An iovec count as the calls take it; callers pass at most
/// `UIO_MAXIOV` (1,024).
fn iov_count(iov: &[libc::iovec]) -> libc::c_int {
    libc::c_int::try_from(iov.len()).unwrap_or(libc::c_int::MAX)
}

fn rw(pos: i64, mut call: impl FnMut(i64) -> isize) -> io::Result<usize> {
    let mut pos = pos;
    loop {
        let n = call(pos);
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::ESPIPE) if pos != -1 => pos = -1,
            _ => return Err(e),
        }
    }
}

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `fsync`, or `fdatasync` when `data_only`.
pub(crate) fn fsync(fd: RawFd, data_only: bool) -> io::Result<()> {
    // SAFETY: plain calls on an fd number; a stale one is EBADF.
    check(unsafe {
        if data_only {
            libc::fdatasync(fd)
        } else {
            libc::fsync(fd)
        }
    })
}

/// `ftruncate`.
pub(crate) fn ftruncate(fd: RawFd, len: u64) -> io::Result<()> {
    let len = offset(len)?;
    // SAFETY: a plain call on an fd number; a stale one is EBADF.
    check(unsafe { libc::ftruncate(fd, len) })
}

/// `fallocate`: `mode` 0 allocates (and extends), `FALLOC_FL_KEEP_SIZE`
/// allocates without changing the length.
pub(crate) fn fallocate(fd: RawFd, mode: libc::c_int, pos: u64, len: u64) -> io::Result<()> {
    let (pos, len) = (offset(pos)?, offset(len)?);
    loop {
        // SAFETY: a plain call on an fd number; a stale one is EBADF.
        match check(unsafe { libc::fallocate(fd, mode, pos, len) }) {
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
            res => return res,
        }
    }
}

/// `statx` of `path` relative to `dirfd` (or of `dirfd` itself, with an
/// empty path and `AT_EMPTY_PATH`).
pub(crate) fn statx(dirfd: RawFd, path: &CStr, flags: libc::c_int) -> io::Result<libc::statx> {
    // SAFETY: `statx` is plain integers, for which zero is a valid value.
    let mut buf: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `buf` writable, both for the
    // call's duration.
    check(unsafe {
        libc::statx(
            dirfd,
            path.as_ptr(),
            flags | libc::AT_STATX_SYNC_AS_STAT,
            libc::STATX_BASIC_STATS,
            &mut buf,
        )
    })?;
    Ok(buf)
}

/// A zeroed `statx` record on the heap, for io_uring to fill.
pub(crate) fn statx_buf() -> Box<libc::statx> {
    // SAFETY: `statx` is plain integers, for which zero is a valid value.
    Box::new(unsafe { std::mem::zeroed() })
}

/// `open` relative to the working directory, close-on-exec.
pub(crate) fn open(path: &CStr, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
    loop {
        // SAFETY: `path` is NUL-terminated for the call's duration.
        let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC, mode) };
        if fd >= 0 {
            // SAFETY: `open` just created `fd`, and nothing else owns it.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// `struct open_how` of `openat2(2)` (`libc`'s cannot be built: it is
/// marked non-exhaustive).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// Opens `path` on the core if that cannot wait: `openat2` with
/// `RESOLVE_CACHED` (every path component in the dentry cache, no I/O to
/// look it up) and `O_NONBLOCK` (a FIFO's open does not wait for its other
/// end), which is then cleared unless `flags` asked for it. `None` on any
/// failure, for the caller to open the way that may wait (and gives the
/// real error). Creating or truncating always needs that way.
pub(crate) fn open_cached(path: &CStr, flags: libc::c_int) -> Option<OwnedFd> {
    if flags & (libc::O_CREAT | libc::O_TRUNC) != 0 {
        return None;
    }
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC | libc::O_NONBLOCK) as u64,
        // `openat2` refuses a mode without `O_CREAT`, excluded above.
        mode: 0,
        resolve: libc::RESOLVE_CACHED,
    };
    // SAFETY: `path` is NUL-terminated and `how` readable for the call,
    // with its size passed along.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::c_long::from(libc::AT_FDCWD),
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    let fd = libc::c_int::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: `openat2` just created `fd`, and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    if flags & libc::O_NONBLOCK == 0 {
        // Left set, it would change how the file's later calls behave (an
        // io_uring read of an `O_NONBLOCK` file fails with `EAGAIN`
        // instead of waiting).
        let plain = (flags | libc::O_CLOEXEC) & !libc::O_NONBLOCK;
        // SAFETY: a plain call on the fd just opened.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, plain) } < 0 {
            return None;
        }
    }
    Some(fd)
}

/// Closes `fd`, reporting what `close` says (a deferred write error on
/// some file systems) instead of dropping it silently.
pub(crate) fn close(fd: OwnedFd) -> io::Result<()> {
    // SAFETY: `fd` is owned here and given up: `close` is its one close,
    // and it is not retried after EINTR (Linux has closed it by then).
    check(unsafe { libc::close(fd.into_raw_fd()) })
}
