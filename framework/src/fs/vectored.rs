//! [`File::writev_at`] and [`File::readv_at`]: one gathered write or one
//! scattered read over several owned buffers.
//!
//! The iovec array comes from the core's pool of message spaces, as a
//! gathered socket write's does, so that a call allocates nothing in
//! steady state. io_uring submits it as one `WRITEV`/`READV` SQE; epoll
//! tries `pwritev2`/`preadv2` with `RWF_NOWAIT` and, when that would
//! block, runs the call on the pool, whose job builds its own array.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use io_uring::{opcode, types};

use super::file::File;
use super::{pool, sys};
use crate::buf::io_bufs::sealed::Gather;
use crate::buf::io_bufs_mut::sealed::Scatter;
use crate::buf::{BufResult, IoBufs, IoBufsMut};
use crate::driver::current;
use crate::driver::msg_space::{MsgSpace, IOV_MAX};

impl File {
    /// Writes the bytes of `bufs`, in order, at the file's offset `pos`
    /// with one call; returns how many were written (a short count, as
    /// for [`write_at`](File::write_at), is the caller's to continue).
    /// At most 1,024 non-empty buffers go in one call (`UIO_MAXIOV`).
    ///
    /// # Errors
    ///
    /// As [`write_at`](File::write_at).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # percore::block_on(percore::Backend::Auto, async {
    /// let file = percore::fs::File::create("/tmp/record").await?;
    /// let head = b"len=5\n".to_vec();
    /// let body = b"hello".to_vec();
    /// let (res, _bufs) = file.writev_at((head, body), 0).await;
    /// assert_eq!(res?, 11);
    /// # std::io::Result::Ok(())
    /// # }).unwrap().unwrap();
    /// ```
    pub async fn writev_at<B: IoBufs + Send>(&self, bufs: B, pos: u64) -> BufResult<usize, B> {
        let mut space = current::with_io(|core| core.msg_spaces.take());
        gather(&mut space.iov, &bufs);
        let fd = self.raw();
        // SAFETY: the iovecs name initialised bytes of `bufs`, owned across
        // the call.
        let inline = |(_, space): &(B, Box<MsgSpace>)| unsafe {
            sys::pwritev(fd, &space.iov, pos, libc::RWF_NOWAIT)
        };
        let sqe = |(_, space): &(B, Box<MsgSpace>)| {
            opcode::Writev::new(types::Fd(fd), space.iov.as_ptr(), count(space))
                .offset(pos)
                .build()
        };
        let pool = |fd, (bufs, space)| on_pool(fd, true, pos, bufs, space, gather_owned::<B>);
        // SAFETY: the SQE points to the iovecs in `space`'s heap array,
        // which point into `bufs`'s heap bytes.
        let call = unsafe { self.rw(true, (bufs, space), inline, sqe, pool) };
        let (res, (bufs, space)) = call.await;
        give_back(space);
        (res, bufs)
    }

    /// Reads from the file's offset `pos` into `bufs` with one call,
    /// filling each buffer from its start to its capacity before the next
    /// gets a byte; returns how many bytes were read, zero at the end of
    /// the file. At most 1,024 buffers are filled by one call.
    ///
    /// # Errors
    ///
    /// As [`read_at`](File::read_at).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # percore::block_on(percore::Backend::Auto, async {
    /// let file = percore::fs::File::open("/tmp/record").await?;
    /// let bufs = [Vec::with_capacity(6), Vec::with_capacity(64)];
    /// let (res, [head, body]) = file.readv_at(bufs, 0).await;
    /// res?;
    /// assert_eq!((&head[..], &body[..]), (&b"len=5\n"[..], &b"hello"[..]));
    /// # std::io::Result::Ok(())
    /// # }).unwrap().unwrap();
    /// ```
    pub async fn readv_at<B: IoBufsMut + Send>(&self, bufs: B, pos: u64) -> BufResult<usize, B> {
        let mut bufs = bufs;
        let mut space = current::with_io(|core| core.msg_spaces.take());
        scatter(&mut space.iov, &mut bufs);
        let fd = self.raw();
        // SAFETY: the iovecs name writable memory of `bufs`, owned across
        // the call.
        let inline = |(_, space): &(B, Box<MsgSpace>)| unsafe {
            sys::preadv(fd, &space.iov, pos, libc::RWF_NOWAIT)
        };
        let sqe = |(_, space): &(B, Box<MsgSpace>)| {
            opcode::Readv::new(types::Fd(fd), space.iov.as_ptr(), count(space))
                .offset(pos)
                .build()
        };
        let pool = |fd, (bufs, space)| on_pool(fd, false, pos, bufs, space, scatter_owned::<B>);
        // SAFETY: the SQE points to the iovecs in `space`'s heap array,
        // which point into `bufs`'s spare heap memory.
        let call = unsafe { self.rw(false, (bufs, space), inline, sqe, pool) };
        let (res, (mut bufs, space)) = call.await;
        give_back(space);
        if let Ok(n) = res {
            mark_filled(&mut bufs, n);
        }
        (res, bufs)
    }
}

/// The pool's part of a gathered write or scattered read (if `write`):
/// a call that carries the iovecs in `space` when they are few, else a
/// job that owns `bufs` and builds its own array with `point`.
async fn on_pool<B: Send + 'static>(
    fd: Arc<OwnedFd>,
    write: bool,
    pos: u64,
    bufs: B,
    space: Box<MsgSpace>,
    point: fn(&mut Vec<libc::iovec>, &mut B),
) -> (io::Result<usize>, (B, Box<MsgSpace>)) {
    if space.iov.len() <= pool::INLINE_IOVECS {
        // SAFETY: the iovecs name heap memory of `bufs` (initialised
        // bytes for a write, spare capacity for a read), which the pool
        // call holds (or, dropped, keeps) until the pool thread is done.
        let call = unsafe { pool::read_write(fd, write, &space.iov, pos, bufs) };
        let (res, bufs) = call.await;
        return (res, (bufs, space));
    }
    let job = move || {
        let mut bufs = bufs;
        let mut iov = Vec::new();
        point(&mut iov, &mut bufs);
        // SAFETY: the iovecs name memory of `bufs`, which the job owns
        // (with the fd) across the call.
        let res = unsafe {
            if write {
                sys::pwritev(fd.as_raw_fd(), &iov, pos, 0)
            } else {
                sys::preadv(fd.as_raw_fd(), &iov, pos, 0)
            }
        };
        (res, bufs)
    };
    let (res, bufs) = pool::run(job).await.unwrap_or_else(|_| lost());
    (res, (bufs, space))
}

fn gather_owned<B: IoBufs>(iov: &mut Vec<libc::iovec>, bufs: &mut B) {
    gather(iov, bufs);
}

fn scatter_owned<B: IoBufsMut>(iov: &mut Vec<libc::iovec>, bufs: &mut B) {
    scatter(iov, bufs);
}

/// Points `iov` at the non-empty buffers of `bufs`, at most [`IOV_MAX`].
fn gather(iov: &mut Vec<libc::iovec>, bufs: &impl Gather) {
    iov.clear();
    for index in 0..bufs.count() {
        if iov.len() == IOV_MAX {
            break;
        }
        let bytes = bufs.bytes(index);
        if !bytes.is_empty() {
            iov.push(libc::iovec {
                iov_base: bytes.as_ptr().cast_mut().cast(),
                iov_len: bytes.len(),
            });
        }
    }
}

/// Points `iov` at the whole capacity of each buffer of `bufs`, in
/// order, at most [`IOV_MAX`] of them.
fn scatter(iov: &mut Vec<libc::iovec>, bufs: &mut impl Scatter) {
    iov.clear();
    for index in 0..bufs.count().min(IOV_MAX) {
        let (ptr, len) = bufs.spare(index);
        iov.push(libc::iovec {
            iov_base: ptr.cast(),
            iov_len: len,
        });
    }
}

/// Marks the `n` bytes a read put into `bufs`, in order.
fn mark_filled(bufs: &mut impl Scatter, n: usize) {
    let mut left = n;
    for index in 0..bufs.count().min(IOV_MAX) {
        if left == 0 {
            break;
        }
        let (_, len) = bufs.spare(index);
        let filled = left.min(len);
        // SAFETY: the kernel filled the iovecs in order, `n` bytes in
        // all: this buffer's first `filled` bytes, at most its length.
        unsafe { bufs.set_init(index, filled) };
        left -= filled;
    }
}

/// A job unwound with the caller's buffers, which then has nothing to
/// give back. The job is one syscall, which does not unwind.
#[cold]
fn lost<T>() -> T {
    panic!("a file I/O job unwound with its buffers")
}

fn count(space: &MsgSpace) -> u32 {
    // At most IOV_MAX (`gather`, `scatter`).
    space.iov.len() as u32
}

fn give_back(space: Box<MsgSpace>) {
    current::try_with_io(|core| core.msg_spaces.put(space));
}
