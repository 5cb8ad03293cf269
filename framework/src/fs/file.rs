//! [`File`] and [`OpenOptions`]: positioned reads and writes with owned
//! buffers, on either backend.
//!
//! io_uring submits each call as one SQE (`op::file`). epoll tries a read
//! or write inline with `RWF_NOWAIT`, which succeeds on a page-cache hit,
//! and otherwise runs it on the pool (`fs::pool`); every other call goes
//! to the pool directly.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::Arc;

use io_uring::{opcode, types};

use super::{on_uring, pool, sys, Metadata};
use crate::buf::{BufResult, IoBuf, IoBufMut};
use crate::driver::uring::OpKind;
use crate::op::file::Submit;

/// An open file, read and written at explicit offsets.
///
/// Each call takes its buffer by value and gives it back with the result,
/// as [`Stream`](crate::net::Stream) does: the kernel (or a pool thread)
/// may still use the buffer after a future is dropped, so the buffer goes
/// with the operation, not with the future. Buffers must be `Send` for
/// the epoll backend, whose pool threads take them.
///
/// Dropping a `File` closes it at once, synchronously; [`close`](File::close)
/// closes it off the core and reports the error.
///
/// # Examples
///
/// ```no_run
/// use percore::fs::File;
///
/// # fn main() -> std::io::Result<()> {
/// percore::block_on(percore::Backend::Auto, async {
///     let file = File::create("/tmp/greeting").await?;
///     let (res, _) = file.write_all_at(b"hello".to_vec(), 0).await;
///     res?;
///     let (res, buf) = file.read_at(Vec::with_capacity(16), 0).await;
///     assert_eq!(&buf[..res?], b"hello");
///     file.close().await
/// })?
/// # }
/// ```
#[derive(Debug)]
pub struct File {
    /// Shared with the operations in flight (and the pool's jobs), which
    /// keep it open until they are done.
    pub(super) fd: Arc<OwnedFd>,
    /// Opened with `O_DIRECT`: an `EINVAL` then most likely means a
    /// misaligned buffer, offset or length, and says so.
    pub(super) direct: bool,
    /// Which `RWF_NOWAIT` calls the file system takes (epoll).
    pub(super) nowait: sys::NoWait,
}

/// How to open a file: `std::fs::OpenOptions`'s options, plus the mode
/// and flags of `open(2)`.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    truncate: bool,
    create: bool,
    create_new: bool,
    mode: u32,
    custom_flags: i32,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions::new()
    }
}

impl OpenOptions {
    /// No access at all (set at least `read`, `write` or `append`);
    /// created files get mode `0o666` less the umask.
    pub fn new() -> OpenOptions {
        OpenOptions {
            read: false,
            write: false,
            append: false,
            truncate: false,
            create: false,
            create_new: false,
            mode: 0o666,
            custom_flags: 0,
        }
    }

    /// Open for reading.
    pub fn read(&mut self, read: bool) -> &mut Self {
        self.read = read;
        self
    }

    /// Open for writing.
    pub fn write(&mut self, write: bool) -> &mut Self {
        self.write = write;
        self
    }

    /// Open for appending: every write goes to the end, whatever offset it
    /// names (`O_APPEND`).
    pub fn append(&mut self, append: bool) -> &mut Self {
        self.append = append;
        self
    }

    /// Empty the file when it is opened (`O_TRUNC`).
    pub fn truncate(&mut self, truncate: bool) -> &mut Self {
        self.truncate = truncate;
        self
    }

    /// Create the file if it does not exist (`O_CREAT`).
    pub fn create(&mut self, create: bool) -> &mut Self {
        self.create = create;
        self
    }

    /// Create the file, failing with `AlreadyExists` if it exists
    /// (`O_CREAT | O_EXCL`).
    pub fn create_new(&mut self, create_new: bool) -> &mut Self {
        self.create_new = create_new;
        self
    }

    /// The permission bits of a file this creates, before the umask.
    pub fn mode(&mut self, mode: u32) -> &mut Self {
        self.mode = mode;
        self
    }

    /// Extra `open(2)` flags, such as `libc::O_DIRECT` or
    /// `libc::O_NOATIME`; the access mode bits are ignored.
    pub fn custom_flags(&mut self, flags: i32) -> &mut Self {
        self.custom_flags = flags;
        self
    }

    /// The `open(2)` flags, with the same refusals as `std`'s options.
    fn flags(&self) -> io::Result<i32> {
        let invalid = |why| Err(io::Error::new(io::ErrorKind::InvalidInput, why));
        let access = match (self.read, self.write || self.append) {
            (true, false) => libc::O_RDONLY,
            (false, true) => libc::O_WRONLY,
            (true, true) => libc::O_RDWR,
            (false, false) => return invalid("open for neither reading nor writing"),
        };
        if !(self.write || self.append) && (self.truncate || self.create || self.create_new) {
            return invalid("create or truncate without write access");
        }
        if self.append && self.truncate && !self.create_new {
            return invalid("both append and truncate");
        }
        let creation = if self.create_new {
            libc::O_CREAT | libc::O_EXCL
        } else {
            (if self.create { libc::O_CREAT } else { 0 })
                | (if self.truncate { libc::O_TRUNC } else { 0 })
        };
        let append = if self.append { libc::O_APPEND } else { 0 };
        Ok(access | creation | append | libc::O_CLOEXEC | (self.custom_flags & !libc::O_ACCMODE))
    }

    /// Opens `path` with these options.
    ///
    /// # Errors
    ///
    /// The options contradict each other (`InvalidInput`), or `open(2)`
    /// failed: `NotFound`, `PermissionDenied`, `AlreadyExists`,
    /// `IsADirectory` and so on.
    ///
    /// # Panics
    ///
    /// Outside a percore core.
    pub async fn open(&self, path: impl AsRef<Path>) -> io::Result<File> {
        let flags = self.flags()?;
        let path = super::c_path(path.as_ref())?;
        let mode = self.mode;
        let direct = flags & libc::O_DIRECT != 0;
        // A path the dentry cache knows opens on the core in one syscall;
        // a round trip through the ring or the pool costs several times
        // that (`file_io`'s `open_close` cells).
        let fd = if let Some(fd) = sys::open_cached(&path, flags) {
            fd
        } else if on_uring() {
            let sqe = opcode::OpenAt::new(types::Fd(libc::AT_FDCWD), path.as_ptr())
                .flags(flags)
                .mode(mode)
                .build();
            // SAFETY: the SQE points into the path's heap bytes, which
            // `Submit` keeps; it names no fd of ours.
            let (res, _path) = unsafe { Submit::new(path, sqe, OpKind::Open) }.await;
            // SAFETY: the kernel created this fd for this completion, and
            // nothing else owns it.
            res.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })?
        } else {
            pool::run(move || sys::open(&path, flags, mode)).await??
        };
        Ok(File {
            fd: Arc::new(fd),
            direct,
            nowait: sys::NoWait::new(),
        })
    }
}

/// The completion of a write-all or read-exact step.
enum Step {
    /// `n` more bytes were moved.
    Moved(usize),
    /// The call moved nothing: end of file, or a full device.
    Nothing,
}

impl File {
    /// Opens `path` for reading.
    ///
    /// # Errors
    ///
    /// As [`OpenOptions::open`].
    pub async fn open(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new().read(true).open(path).await
    }

    /// Opens `path` for writing, creating it or emptying it.
    ///
    /// # Errors
    ///
    /// As [`OpenOptions::open`].
    pub async fn create(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .await
    }

    /// Options to open a file with; the same as [`OpenOptions::new`].
    pub fn options() -> OpenOptions {
        OpenOptions::new()
    }

    /// Reads into `buf` from its start, up to its capacity
    /// ([`IoBufMut::bytes_total`]), from the file's offset `pos`; returns
    /// how many bytes were read, zero at the end of the file.
    ///
    /// On a file that cannot seek (a FIFO) the offset is ignored.
    ///
    /// # Errors
    ///
    /// What the kernel says; `InvalidInput` for an `O_DIRECT` file whose
    /// buffer, offset or length is not aligned.
    pub async fn read_at<B: IoBufMut + Send>(&self, buf: B, pos: u64) -> BufResult<usize, B> {
        self.read_from(buf, 0, pos).await
    }

    /// Fills `buf` to its capacity from `pos` on, reading as often as it
    /// takes.
    ///
    /// # Errors
    ///
    /// `UnexpectedEof` if the file ends first (the bytes read so far are
    /// in `buf`); otherwise as [`read_at`](File::read_at).
    pub async fn read_exact_at<B: IoBufMut + Send>(&self, buf: B, pos: u64) -> BufResult<(), B> {
        let mut buf = buf;
        let mut done = 0;
        while done < buf.bytes_total() {
            let (res, back) = self.read_from(buf, done, pos + done as u64).await;
            buf = back;
            match res.map(step) {
                Ok(Step::Moved(n)) => done += n,
                Ok(Step::Nothing) => {
                    let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "the file ended first");
                    return (Err(eof), buf);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (Err(e), buf),
            }
        }
        (Ok(()), buf)
    }

    /// Writes the bytes of `buf` at the file's offset `pos` (at the end,
    /// for a file opened to append); returns how many were written.
    ///
    /// # Errors
    ///
    /// What the kernel says (`StorageFull`, `QuotaExceeded`, ...);
    /// `InvalidInput` for a misaligned `O_DIRECT` write.
    pub async fn write_at<B: IoBuf + Send>(&self, buf: B, pos: u64) -> BufResult<usize, B> {
        self.write_from(buf, 0, pos).await
    }

    /// Writes all of `buf` at `pos`, writing as often as it takes.
    ///
    /// # Errors
    ///
    /// `WriteZero` if a write took nothing; otherwise as
    /// [`write_at`](File::write_at).
    pub async fn write_all_at<B: IoBuf + Send>(&self, buf: B, pos: u64) -> BufResult<(), B> {
        let mut buf = buf;
        let mut done = 0;
        while done < buf.bytes_init() {
            let (res, back) = self.write_from(buf, done, pos + done as u64).await;
            buf = back;
            match res.map(step) {
                Ok(Step::Moved(n)) => done += n,
                Ok(Step::Nothing) => {
                    let zero = io::Error::new(io::ErrorKind::WriteZero, "the file took no bytes");
                    return (Err(zero), buf);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (Err(e), buf),
            }
        }
        (Ok(()), buf)
    }

    /// Flushes the file's data and metadata to the device (`fsync`).
    ///
    /// # Errors
    ///
    /// What `fsync` says, such as a deferred write error (`EIO`).
    pub async fn sync_all(&self) -> io::Result<()> {
        self.sync(false).await
    }

    /// Flushes the file's data, and only the metadata needed to read it
    /// back (`fdatasync`).
    ///
    /// # Errors
    ///
    /// As [`sync_all`](File::sync_all).
    pub async fn sync_data(&self) -> io::Result<()> {
        self.sync(true).await
    }

    /// Truncates or extends the file to `len` bytes; an extension reads
    /// as zeroes.
    ///
    /// # Errors
    ///
    /// What `ftruncate` says: `InvalidInput` for a file not open for
    /// writing, `StorageFull`, ...
    pub async fn set_len(&self, len: u64) -> io::Result<()> {
        if on_uring() {
            let sqe = opcode::Ftruncate::new(types::Fd(self.raw()), len).build();
            // SAFETY: the SQE points to no memory; `Submit` keeps the fd.
            let (res, _fd) = unsafe { Submit::new(self.fd.clone(), sqe, OpKind::File) }.await;
            match res {
                // Kernels before 6.9 have no `IORING_OP_FTRUNCATE` and say
                // EINVAL: the pool then gives the real answer.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                res => return res.map(drop),
            }
        }
        let fd = self.fd.clone();
        pool::run(move || sys::ftruncate(fd.as_raw_fd(), len)).await?
    }

    /// Allocates disk space for `len` bytes from `pos` (`fallocate`), so
    /// that later writes there cannot fail for lack of space; a range past
    /// the end extends the file, which reads as zeroes.
    ///
    /// # Errors
    ///
    /// What `fallocate` says: `StorageFull`, `Unsupported` on a file
    /// system without it, ...
    pub async fn allocate(&self, pos: u64, len: u64) -> io::Result<()> {
        if on_uring() {
            let sqe = opcode::Fallocate::new(types::Fd(self.raw()), len)
                .offset(pos)
                .build();
            // SAFETY: the SQE points to no memory; `Submit` keeps the fd.
            let (res, _fd) = unsafe { Submit::new(self.fd.clone(), sqe, OpKind::File) }.await;
            return res.map(drop);
        }
        let fd = self.fd.clone();
        pool::run(move || sys::fallocate(fd.as_raw_fd(), 0, pos, len)).await?
    }

    /// The file's metadata (`statx` on io_uring, on the pool on epoll).
    ///
    /// # Errors
    ///
    /// What `statx` says.
    pub async fn metadata(&self) -> io::Result<Metadata> {
        super::stat(
            Some(self.fd.clone()),
            CString::default(),
            libc::AT_EMPTY_PATH,
        )
        .await
    }

    /// Closes the file, reporting the error `close` gives (some file
    /// systems report a failed write there): on io_uring as an operation
    /// of the ring, on epoll on the core (closing a local file does not
    /// wait for the disk). If an operation that was dropped still uses the
    /// file, it closes when that ends.
    ///
    /// # Errors
    ///
    /// What `close` says.
    pub async fn close(self) -> io::Result<()> {
        let Ok(fd) = Arc::try_unwrap(self.fd) else {
            return Ok(());
        };
        if on_uring() {
            let sqe =
                opcode::Close::new(types::Fd(std::os::fd::IntoRawFd::into_raw_fd(fd))).build();
            // SAFETY: the SQE points to no memory, and hands the fd (given
            // up above) to the kernel to close.
            let (res, ()) = unsafe { Submit::new((), sqe, OpKind::File) }.await;
            res.map(drop)
        } else {
            // On the core: closing a local file does not wait for the
            // disk, and a trip to the pool costs more than the call.
            sys::close(fd)
        }
    }

    pub(super) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    async fn sync(&self, data_only: bool) -> io::Result<()> {
        if on_uring() {
            let flags = if data_only {
                types::FsyncFlags::DATASYNC
            } else {
                types::FsyncFlags::empty()
            };
            let sqe = opcode::Fsync::new(types::Fd(self.raw()))
                .flags(flags)
                .build();
            // SAFETY: the SQE points to no memory; `Submit` keeps the fd.
            let (res, _fd) = unsafe { Submit::new(self.fd.clone(), sqe, OpKind::File) }.await;
            return res.map(drop);
        }
        let fd = self.fd.clone();
        pool::run(move || sys::fsync(fd.as_raw_fd(), data_only)).await?
    }

    /// Names the likely cause of an `EINVAL` on an `O_DIRECT` file.
    pub(super) fn explain(&self, e: io::Error) -> io::Error {
        if self.direct && e.raw_os_error() == Some(libc::EINVAL) {
            return io::Error::new(
                io::ErrorKind::InvalidInput,
                "O_DIRECT I/O needs its buffer, offset and length aligned to the \
                 device's logical block size (EINVAL)",
            );
        }
        e
    }
}

/// One iovec.
pub(super) fn iovec(ptr: *mut u8, len: usize) -> libc::iovec {
    libc::iovec {
        iov_base: ptr.cast(),
        iov_len: len,
    }
}

fn step(n: usize) -> Step {
    if n == 0 {
        Step::Nothing
    } else {
        Step::Moved(n)
    }
}

/// A length as an SQE holds it: longer calls move at most 4 GiB − 1 bytes,
/// a short count the callers handle.
pub(super) fn sqe_len(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

impl From<std::fs::File> for File {
    fn from(file: std::fs::File) -> File {
        File {
            fd: Arc::new(file.into()),
            direct: false,
            nowait: sys::NoWait::new(),
        }
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.raw()
    }
}

impl AsFd for File {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
