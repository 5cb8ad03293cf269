//! [`File::writev_at`] and [`File::readv_at`]: one gathered write or one
//! scattered read over several owned buffers.
//!
//! The iovec array comes from the core's pool of message spaces, as a
//! gathered socket write's does, so that a call allocates nothing in
//! steady state. io_uring submits it as one `WRITEV`/`READV` SQE; epoll
//! tries `pwritev2`/`preadv2` with `RWF_NOWAIT` and, when that would
//! block, runs the call on the pool, whose job builds its own array.

use std::os::fd::AsRawFd;

use io_uring::{opcode, types};

use super::file::File;
use super::{on_uring, pool, sys};
use crate::buf::io_bufs::sealed::Gather;
use crate::buf::io_bufs_mut::sealed::Scatter;
use crate::buf::{BufResult, IoBufs, IoBufsMut};
use crate::driver::current;
use crate::driver::msg_space::{MsgSpace, IOV_MAX};
use crate::driver::uring::OpKind;
use crate::op::file::Submit;

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
        let inline = self.inline(true, || {
            // SAFETY: the iovecs name initialised bytes of `bufs`, owned
            // here across the call.
            unsafe { sys::pwritev(self.raw(), &space.iov, pos, libc::RWF_NOWAIT) }
        });
        let (res, bufs, space) = match inline {
            Some(res) => (res, bufs, space),
            None if on_uring() => {
                let sqe =
                    opcode::Writev::new(types::Fd(self.raw()), space.iov.as_ptr(), count(&space))
                        .offset(pos)
                        .build();
                let kept = (self.fd.clone(), bufs, space);
                // SAFETY: the SQE points to the iovecs in `space`'s heap array,
                // which point into `bufs`'s bytes; `Submit` keeps both, and the
                // fd, to the completion.
                let submit = unsafe { Submit::new(kept, sqe, OpKind::File) };
                let (res, (_fd, bufs, space)) = submit.await;
                (res.map(|n| n as usize), bufs, space)
            }
            None if space.iov.len() <= pool::INLINE_IOVECS => {
                let fd = self.fd.clone();
                // SAFETY: the iovecs name heap memory of `bufs` (its
                // initialised bytes), which the pool call holds (or,
                // dropped, keeps) until the pool thread is done.
                let call = unsafe { pool::read_write(fd, true, &space.iov, pos, bufs) };
                let (res, bufs) = call.await;
                (res, bufs, space)
            }
            None => {
                let fd = self.fd.clone();
                let job = move || {
                    let mut iov = Vec::new();
                    gather(&mut iov, &bufs);
                    // SAFETY: as above: the job owns `bufs` (and the
                    // fd) across the call.
                    let res = unsafe { sys::pwritev(fd.as_raw_fd(), &iov, pos, 0) };
                    (res, bufs)
                };
                let (res, bufs) = pool::run(job).await.unwrap_or_else(|_| lost());
                (res, bufs, space)
            }
        };
        give_back(space);
        (res.map_err(|e| self.explain(e)), bufs)
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
        let inline = self.inline(false, || {
            // SAFETY: the iovecs name writable memory of `bufs`, owned here
            // across the call.
            unsafe { sys::preadv(self.raw(), &space.iov, pos, libc::RWF_NOWAIT) }
        });
        let (res, mut bufs, space) = match inline {
            Some(res) => (res, bufs, space),
            None if on_uring() => {
                let sqe =
                    opcode::Readv::new(types::Fd(self.raw()), space.iov.as_ptr(), count(&space))
                        .offset(pos)
                        .build();
                let kept = (self.fd.clone(), bufs, space);
                // SAFETY: the SQE points to the iovecs in `space`'s heap array,
                // which point into `bufs`'s spare heap memory; `Submit` keeps
                // both, and the fd, to the completion.
                let submit = unsafe { Submit::new(kept, sqe, OpKind::File) };
                let (res, (_fd, bufs, space)) = submit.await;
                (res.map(|n| n as usize), bufs, space)
            }
            None if space.iov.len() <= pool::INLINE_IOVECS => {
                let fd = self.fd.clone();
                // SAFETY: the iovecs name heap memory of `bufs` (its
                // spare capacity), which the pool call holds (or,
                // dropped, keeps) until the pool thread is done.
                let call = unsafe { pool::read_write(fd, false, &space.iov, pos, bufs) };
                let (res, bufs) = call.await;
                (res, bufs, space)
            }
            None => {
                let fd = self.fd.clone();
                let job = move || {
                    let mut iov = Vec::new();
                    scatter(&mut iov, &mut bufs);
                    // SAFETY: as above: the job owns `bufs` (and the
                    // fd) across the call.
                    let res = unsafe { sys::preadv(fd.as_raw_fd(), &iov, pos, 0) };
                    (res, bufs)
                };
                let (res, bufs) = pool::run(job).await.unwrap_or_else(|_| lost());
                (res, bufs, space)
            }
        };
        give_back(space);
        if let Ok(n) = res {
            mark_filled(&mut bufs, n);
        }
        (res.map_err(|e| self.explain(e)), bufs)
    }
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
