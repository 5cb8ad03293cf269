//! [`File::read_fixed_at`] and [`File::write_fixed_at`]: file I/O from the
//! core's registered buffers ([`FixedBuf`]).
//!
//! On io_uring a registered buffer spares each call the pinning and
//! mapping of its pages (`READ_FIXED`/`WRITE_FIXED`), which for files,
//! unlike for sockets, the kernel supports. On epoll the buffer is plain
//! memory: a page-cache hit is read or written inline with `RWF_NOWAIT`;
//! a miss goes to the pool through a copy, since a `FixedBuf` belongs to
//! its core and cannot travel to a pool thread (the copy is reused).

use std::cell::RefCell;

use io_uring::{opcode, types};

use super::file::{iovec, sqe_len, File};
use super::{pool, sys};
use crate::buf::{BufResult, FixedBuf, IoBuf};

impl File {
    /// Reads into `buf`, from its start up to its capacity, from the
    /// file's offset `pos`; `buf` then holds the bytes read (its
    /// [`len`](FixedBuf::len)). Returns how many, zero at the end of the
    /// file.
    ///
    /// # Errors
    ///
    /// As [`read_at`](File::read_at).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use percore::buf::FixedBuf;
    ///
    /// # percore::block_on(percore::Backend::Auto, async {
    /// let file = percore::fs::File::open("/etc/hostname").await?;
    /// // `None` when the core's registered buffers are all in use.
    /// let buf = FixedBuf::take().expect("a free registered buffer");
    /// let (res, buf) = file.read_fixed_at(buf, 0).await;
    /// println!("{} bytes: {:?}", res?, buf.as_slice());
    /// # std::io::Result::Ok(())
    /// # }).unwrap().unwrap();
    /// ```
    pub async fn read_fixed_at(&self, buf: FixedBuf, pos: u64) -> BufResult<usize, FixedBuf> {
        let mut buf = buf;
        let (ptr, len) = (buf.whole_mut_ptr(), buf.capacity());
        let fd = self.raw();
        // SAFETY: `ptr..ptr+len` is `buf`'s memory, leased here across the
        // call.
        let inline = |_: &FixedBuf| unsafe { sys::pread(fd, ptr, len, pos, libc::RWF_NOWAIT) };
        let sqe = |buf: &FixedBuf| match buf.fixed_index() {
            Some(index) => opcode::ReadFixed::new(types::Fd(fd), ptr, sqe_len(len), index)
                .offset(pos)
                .build(),
            None => opcode::Read::new(types::Fd(fd), ptr, sqe_len(len))
                .offset(pos)
                .build(),
        };
        let pool = |fd, mut buf: FixedBuf| async move {
            let mut copy = take_copy(len);
            let iov = [iovec(copy.as_mut_ptr(), len)];
            // SAFETY: `iov` names the spare heap memory of `copy`, which
            // the pool call holds (or, dropped, keeps) until the pool
            // thread is done.
            let call = unsafe { pool::read_write(fd, false, &iov, pos, copy) };
            let (res, mut copy) = call.await;
            if let Ok(n) = res {
                // SAFETY: the kernel wrote `n <= len` bytes.
                unsafe { copy.set_len(n) };
                buf.clear();
                buf.extend_from_slice(&copy);
            }
            give_copy(copy);
            (res, buf)
        };
        // SAFETY: `ptr..ptr+len` is `buf`'s memory in the core's pool
        // mapping (registered as buffer `index`, if it is), which stays
        // leased while `buf` moves.
        let (res, mut buf) = unsafe { self.rw(false, buf, inline, sqe, pool) }.await;
        if let Ok(n) = res {
            // SAFETY: `n <= capacity` bytes were written from the start
            // (the kernel's count; on the pool path, by the copy above).
            unsafe { buf.set_filled(n) };
        }
        (res, buf)
    }

    /// Writes the bytes of `buf` at the file's offset `pos`; returns how
    /// many were written.
    ///
    /// # Errors
    ///
    /// As [`write_at`](File::write_at).
    pub async fn write_fixed_at(&self, buf: FixedBuf, pos: u64) -> BufResult<usize, FixedBuf> {
        let (ptr, len) = (buf.stable_ptr(), buf.len());
        let fd = self.raw();
        // SAFETY: `ptr..ptr+len` are `buf`'s bytes, leased here across the
        // call.
        let inline = |_: &FixedBuf| unsafe { sys::pwrite(fd, ptr, len, pos, libc::RWF_NOWAIT) };
        let sqe = |buf: &FixedBuf| match buf.fixed_index() {
            Some(index) => opcode::WriteFixed::new(types::Fd(fd), ptr, sqe_len(len), index)
                .offset(pos)
                .build(),
            None => opcode::Write::new(types::Fd(fd), ptr, sqe_len(len))
                .offset(pos)
                .build(),
        };
        let pool = |fd, buf: FixedBuf| async move {
            let mut copy = take_copy(len);
            copy.extend_from_slice(buf.as_slice());
            let iov = [iovec(copy.as_mut_ptr(), len)];
            // SAFETY: `iov` names the heap bytes of `copy`, which the pool
            // call holds (or, dropped, keeps) until the pool thread is
            // done.
            let call = unsafe { pool::read_write(fd, true, &iov, pos, copy) };
            let (res, copy) = call.await;
            give_copy(copy);
            (res, buf)
        };
        // SAFETY: `ptr..ptr+len` are `buf`'s bytes in the core's pool
        // mapping (registered as buffer `index`, if it is), which stay
        // leased while `buf` moves.
        unsafe { self.rw(true, buf, inline, sqe, pool) }.await
    }
}

thread_local! {
    /// Copies a core keeps for its fixed buffers' pool calls on epoll.
    static COPIES: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Copies kept: one per fixed-buffer call a core has at the pool at once.
const KEEP_COPIES: usize = 4;

/// An empty `Vec` with room for `len` bytes, reused if the core has one.
fn take_copy(len: usize) -> Vec<u8> {
    let mut copy = COPIES.with(|c| c.borrow_mut().pop()).unwrap_or_default();
    copy.clear();
    copy.reserve(len);
    copy
}

fn give_copy(copy: Vec<u8>) {
    COPIES.with(|c| {
        let mut copies = c.borrow_mut();
        if copies.len() < KEEP_COPIES {
            copies.push(copy);
        }
    });
}
