//! The way each positioned read or write of [`File`] goes, decided in one
//! place ([`File::rw`]): first a call with `RWF_NOWAIT` on the core
//! ([`File::inline`]), then an SQE on io_uring or the pool on epoll; and
//! the single-buffer reads and writes on top of it.

use std::future::Future;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use io_uring::{opcode, squeue, types};

use super::file::{iovec, sqe_len, File};
use super::{on_uring, pool, sys};
use crate::buf::{BufResult, IoBuf, IoBufMut};
use crate::driver::uring::OpKind;
use crate::op::file::Submit;

impl File {
    /// Makes one positioned read (or write, if `write`) of the memory
    /// `kept` owns, the cheapest way that can take it: `inline`, with
    /// `RWF_NOWAIT` on the core, when it completes at once; else the
    /// entry `sqe` builds, on io_uring; else `pool`'s call, on epoll.
    /// Gives `kept` back with the result, an `O_DIRECT` error explained.
    ///
    /// # Safety
    ///
    /// The entry `sqe` builds points only into heap memory of `kept` that
    /// stays where it is when `kept` moves (writable, for a read), and
    /// names this file's descriptor.
    pub(super) async unsafe fn rw<K, P>(
        &self,
        write: bool,
        kept: K,
        inline: impl FnOnce(&K) -> io::Result<usize>,
        sqe: impl FnOnce(&K) -> squeue::Entry,
        pool: impl FnOnce(Arc<OwnedFd>, K) -> P,
    ) -> (io::Result<usize>, K)
    where
        K: 'static,
        P: Future<Output = (io::Result<usize>, K)>,
    {
        let (res, kept) = match self.inline(write, || inline(&kept)) {
            Some(res) => (res, kept),
            None if on_uring() => {
                let entry = sqe(&kept);
                // SAFETY: the entry points into `kept`'s heap memory (this
                // function's contract), which `Submit` keeps, with the fd,
                // to the completion.
                let submit = unsafe { Submit::new((self.fd.clone(), kept), entry, OpKind::File) };
                let (res, (_fd, kept)) = submit.await;
                (res.map(|n| n as usize), kept)
            }
            None => pool(self.fd.clone(), kept).await,
        };
        (res.map_err(|e| self.explain(e)), kept)
    }

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
        let fd = self.raw();
        // SAFETY: `ptr..ptr+len` is writable memory of `buf`, owned across
        // the call.
        let inline = |_: &B| unsafe { sys::pread(fd, ptr, len, pos, libc::RWF_NOWAIT) };
        let sqe = |_: &B| {
            opcode::Read::new(types::Fd(fd), ptr, sqe_len(len))
                .offset(pos)
                .build()
        };
        let pool = |fd, buf| {
            let iov = [iovec(ptr, len)];
            // SAFETY: `iov` names the spare heap memory of `buf`, which the
            // pool call holds (or, dropped, keeps) until the pool thread is
            // done.
            unsafe { pool::read_write(fd, false, &iov, pos, buf) }
        };
        // SAFETY: `ptr..ptr+len`, where the SQE points, is the spare part
        // of `buf`'s heap memory.
        let call = unsafe { self.rw(false, buf, inline, sqe, pool) };
        let (res, mut buf) = call.await;
        if let Ok(n) = res {
            // SAFETY: the kernel wrote `n <= len` bytes from `from` on,
            // after the `from` bytes filled before.
            unsafe { buf.set_init(from + n) };
        }
        (res, buf)
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
        let fd = self.raw();
        // SAFETY: `ptr..ptr+len` are initialised bytes of `buf`, owned
        // across the call.
        let inline = |_: &B| unsafe { sys::pwrite(fd, ptr, len, pos, libc::RWF_NOWAIT) };
        let sqe = |_: &B| {
            opcode::Write::new(types::Fd(fd), ptr, sqe_len(len))
                .offset(pos)
                .build()
        };
        let pool = |fd, buf| {
            let iov = [iovec(ptr.cast_mut(), len)];
            // SAFETY: `iov` names initialised heap bytes of `buf`, which the
            // pool call holds (or, dropped, keeps) until the pool thread is
            // done.
            unsafe { pool::read_write(fd, true, &iov, pos, buf) }
        };
        // SAFETY: `ptr..ptr+len`, where the SQE points, are initialised
        // bytes of `buf`'s heap memory.
        let call = unsafe { self.rw(true, buf, inline, sqe, pool) };
        call.await
    }

    /// Makes `call`, a read or write with `RWF_NOWAIT`, on the core: its
    /// result if it completed, `None` when it would block (or the file
    /// system refuses such calls), for the caller to go to the ring or the
    /// pool. On both backends: a page-cache hit costs one syscall, where
    /// an SQE costs more (`file_io`'s `warm_read` cells: 1.28× the reads
    /// per second). Skipped for `O_DIRECT`, whose calls need the device.
    fn inline(
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
