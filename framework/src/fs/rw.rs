//! The single-buffer read and write paths of [`File`]: first a call
//! with `RWF_NOWAIT` on the core ([`File::inline`]), then an SQE on
//! io_uring or a job of the pool on epoll.

use std::io;

use io_uring::{opcode, types};

use super::file::{iovec, sqe_len, File};
use super::{on_uring, pool, sys};
use crate::buf::{BufResult, IoBuf, IoBufMut};
use crate::driver::uring::OpKind;
use crate::op::file::Submit;

impl File {
    /// Reads into `buf[from..]` (its capacity), marking `from + n` bytes
    /// initialised after a read of `n`.
    pub(super) async fn read_from<B: IoBufMut + Send>(
        &self,
        mut buf: B,
        from: usize,
        pos: u64,
    ) -> BufResult<usize, B> {
        let len = buf.bytes_total().saturating_sub(from);
        let ptr = buf.stable_mut_ptr().wrapping_add(from);
        let inline = self.inline(false, || {
            // SAFETY: `ptr..ptr+len` is writable memory of `buf`, owned
            // here across the call.
            unsafe { sys::pread(self.raw(), ptr, len, pos, libc::RWF_NOWAIT) }
        });
        let (res, mut buf) = match inline {
            Some(res) => (res, buf),
            None if on_uring() => {
                let sqe = opcode::Read::new(types::Fd(self.raw()), ptr, sqe_len(len))
                    .offset(pos)
                    .build();
                // SAFETY: `ptr..ptr+len` is the spare part of `buf`'s heap
                // memory, which `Submit` keeps with the fd.
                let submit = unsafe { Submit::new((self.fd.clone(), buf), sqe, OpKind::File) };
                let (res, (_fd, buf)) = submit.await;
                (res.map(|n| n as usize), buf)
            }
            None => {
                let iov = [iovec(ptr, len)];
                // SAFETY: `iov` names the spare heap memory of `buf`,
                // which the pool call holds (or, dropped, keeps) until
                // the pool thread is done.
                unsafe { pool::read_write(self.fd.clone(), false, &iov, pos, buf) }.await
            }
        };
        if let Ok(n) = res {
            // SAFETY: the kernel wrote `n <= len` bytes from `from` on,
            // after the `from` bytes filled before.
            unsafe { buf.set_init(from + n) };
        }
        (res.map_err(|e| self.explain(e)), buf)
    }

    /// Writes `buf[from..]`.
    pub(super) async fn write_from<B: IoBuf + Send>(
        &self,
        buf: B,
        from: usize,
        pos: u64,
    ) -> BufResult<usize, B> {
        let len = buf.bytes_init().saturating_sub(from);
        let ptr = buf.stable_ptr().wrapping_add(from);
        let inline = self.inline(true, || {
            // SAFETY: `ptr..ptr+len` are initialised bytes of `buf`, owned
            // here across the call.
            unsafe { sys::pwrite(self.raw(), ptr, len, pos, libc::RWF_NOWAIT) }
        });
        let (res, buf) = match inline {
            Some(res) => (res, buf),
            None if on_uring() => {
                let sqe = opcode::Write::new(types::Fd(self.raw()), ptr, sqe_len(len))
                    .offset(pos)
                    .build();
                // SAFETY: `ptr..ptr+len` are initialised bytes of `buf`'s heap
                // memory, which `Submit` keeps with the fd.
                let submit = unsafe { Submit::new((self.fd.clone(), buf), sqe, OpKind::File) };
                let (res, (_fd, buf)) = submit.await;
                (res.map(|n| n as usize), buf)
            }
            None => {
                let iov = [iovec(ptr.cast_mut(), len)];
                // SAFETY: `iov` names initialised heap bytes of `buf`,
                // which the pool call holds (or, dropped, keeps) until
                // the pool thread is done.
                unsafe { pool::read_write(self.fd.clone(), true, &iov, pos, buf) }.await
            }
        };
        (res.map_err(|e| self.explain(e)), buf)
    }

    /// Makes `call`, a read or write with `RWF_NOWAIT`, on the core: its
    /// result if it completed, `None` when it would block (or the file
    /// system refuses such calls), for the caller to go to the ring or the
    /// pool. On both backends: a page-cache hit costs one syscall, where
    /// an SQE costs more (`file_io`'s `warm_read` cells: 1.28× the reads
    /// per second). Skipped for `O_DIRECT`, whose calls need the device.
    pub(super) fn inline(
        &self,
        write: bool,
        call: impl FnOnce() -> io::Result<usize>,
    ) -> Option<io::Result<usize>> {
        if self.direct {
            return None;
        }
        match self.nowait.attempt(write, call) {
            Err(e) if sys::would_block(&e) => None,
            res => Some(res),
        }
    }
}
