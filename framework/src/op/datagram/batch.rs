//! Several datagrams per system call: [`Batch`], and its receive and send.
//!
//! A batch owns its slots (one datagram each), their message headers and
//! addresses, all on the heap, so the batch moves in and out of an
//! operation (owned, as a buffer) without moving what the kernel reads.
//!
//! Receive: `recvmmsg` takes every datagram already queued, up to the
//! slots, in one call. On epoll it is tried first, and again at each
//! readable edge. On io_uring it is tried first too (`MSG_DONTWAIT`); when
//! nothing is queued, one `RECVMSG` SQE waits for the first datagram into
//! the first slot, and a `recvmmsg` right after its completion takes what
//! came with it. Send: `sendmmsg` sends as many queued datagrams as the
//! socket takes; when it takes none (`EAGAIN`), epoll waits for the next
//! writable edge and io_uring sends the first with a `SENDMSG` SQE, which
//! waits for room.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::task::{Context, Poll};

use io_uring::{opcode, types};

use super::recv::RecvMeta;
use crate::driver::current::Io;
use crate::driver::epoll::{self, Interest, SourceKey};
use crate::driver::uring::{self, Cqe, OpKind, Retained};
use crate::op::cqe_result;
use crate::op::lifecycle::{OpAble, Sqe};
use crate::op::send::poll_epoll_send;
use crate::op::SharedFd;
use crate::sys::RawAddr;

/// Most slots a batch has: the kernel's `UIO_MAXIOV`, the most messages
/// one `recvmmsg` or `sendmmsg` takes.
pub const MAX_BATCH: usize = 1024;

/// Datagrams to receive or send together, each in a slot of fixed size.
///
/// Received: [`len`](Self::len) datagrams, read with [`get`](Self::get)
/// or [`iter`](Self::iter). To send: [`push`](Self::push) copies each in,
/// with its destination; a send takes them in order and says how many
/// went ([`sent`](Self::sent)). Reuse one batch: its memory is kept.
pub struct Batch {
    slot: usize,
    bytes: Vec<u8>,
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    addrs: Vec<RawAddr>,
    /// Received: what each slot's datagram was. To send: each length.
    metas: Vec<RecvMeta>,
    /// To send: the datagrams already sent.
    sent: usize,
}

impl Batch {
    /// A batch of `slots` datagrams of up to `slot_size` bytes each
    /// (`slots` at least 1 and at most [`MAX_BATCH`]).
    pub fn new(slots: usize, slot_size: usize) -> Batch {
        let slots = slots.clamp(1, MAX_BATCH);
        // SAFETY: `mmsghdr` and `iovec` are plain C data; all zeroes is an
        // empty header and an empty iovec.
        let empty_hdr: libc::mmsghdr = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let empty_iov: libc::iovec = unsafe { std::mem::zeroed() };
        Batch {
            slot: slot_size,
            bytes: vec![0; slots * slot_size],
            hdrs: vec![empty_hdr; slots],
            iovs: vec![empty_iov; slots],
            addrs: vec![RawAddr::empty(); slots],
            metas: Vec::with_capacity(slots),
            sent: 0,
        }
    }

    /// The number of slots.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// The datagrams held: received, or queued to send.
    pub fn len(&self) -> usize {
        self.metas.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.metas.is_empty()
    }

    /// Received datagram `i`: its bytes (cut to the slot) and what it was.
    pub fn get(&self, i: usize) -> Option<(&[u8], RecvMeta)> {
        let meta = *self.metas.get(i)?;
        let start = i * self.slot;
        Some((&self.bytes[start..start + meta.len], meta))
    }

    /// The received datagrams in order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], RecvMeta)> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// Forgets what it holds.
    pub fn clear(&mut self) {
        self.metas.clear();
        self.sent = 0;
    }

    /// Queues `bytes` to send to `to`; `false` (nothing queued) when every
    /// slot is taken or `bytes` is longer than a slot.
    pub fn push(&mut self, bytes: &[u8], to: SocketAddr) -> bool {
        let i = self.metas.len();
        if i == self.capacity() || bytes.len() > self.slot {
            return false;
        }
        let start = i * self.slot;
        self.bytes[start..start + bytes.len()].copy_from_slice(bytes);
        self.addrs[i] = RawAddr::from_std(to);
        self.metas.push(RecvMeta {
            len: bytes.len(),
            datagram_len: bytes.len(),
            peer: Some(to),
            segment_size: None,
        });
        true
    }

    /// Of the queued datagrams, how many a send has sent so far.
    pub fn sent(&self) -> usize {
        self.sent
    }

    /// Points the headers from `from` on at their slots and address rooms:
    /// empty ones to receive into, or the queued datagrams to send.
    fn point(&mut self, from: usize, receive: bool) -> (*mut libc::mmsghdr, usize) {
        let end = if receive { self.capacity() } else { self.len() };
        for i in from..end {
            let len = if receive {
                self.addrs[i] = RawAddr::empty();
                self.slot
            } else {
                self.metas[i].len
            };
            self.iovs[i] = libc::iovec {
                iov_base: self.bytes[i * self.slot..].as_mut_ptr().cast(),
                iov_len: len,
            };
            let hdr = &mut self.hdrs[i];
            hdr.msg_len = 0;
            hdr.msg_hdr.msg_name = self.addrs[i].as_mut_ptr().cast();
            hdr.msg_hdr.msg_namelen = self.addrs[i].len;
            hdr.msg_hdr.msg_iov = &mut self.iovs[i];
            hdr.msg_hdr.msg_iovlen = 1;
            hdr.msg_hdr.msg_control = std::ptr::null_mut();
            hdr.msg_hdr.msg_controllen = 0;
            hdr.msg_hdr.msg_flags = 0;
        }
        (self.hdrs[from..].as_mut_ptr(), end - from)
    }

    /// Records slot `i`'s datagram of `n` bytes (the whole length).
    fn received(&mut self, i: usize, n: usize) {
        let mut addr = self.addrs[i];
        addr.len = self.hdrs[i].msg_hdr.msg_namelen;
        self.metas.push(RecvMeta {
            len: n.min(self.slot),
            datagram_len: n,
            peer: addr.to_std().ok(),
            segment_size: None,
        });
    }

    /// One `recvmmsg` into the slots from `self.len()` on, without
    /// waiting: the count received, or the error (`EAGAIN`: none queued).
    fn recvmmsg(&mut self, fd: libc::c_int) -> io::Result<usize> {
        let from = self.len();
        if from == self.capacity() {
            return Ok(0);
        }
        let (hdrs, count) = self.point(from, true);
        let flags = libc::MSG_TRUNC | libc::MSG_DONTWAIT;
        // The raw syscall, as the stream receive makes it (no
        // cancellation-point wrapper); every argument is register-sized.
        // SAFETY: `hdrs` points at `count` headers, each at its own iovec
        // (over its slot of `bytes`) and address room, all in this batch,
        // borrowed mutably for the call.
        let n = unsafe {
            libc::syscall(
                libc::SYS_recvmmsg,
                libc::c_long::from(fd),
                hdrs,
                count as libc::c_long,
                libc::c_long::from(flags),
                std::ptr::null_mut::<libc::timespec>(),
            )
        };
        let n = cvt_long(n)?;
        for i in from..from + n {
            let len = self.hdrs[i].msg_len as usize;
            self.received(i, len);
        }
        Ok(n)
    }

    /// One `sendmmsg` of the unsent datagrams, without waiting: the count
    /// sent, or the error (`EAGAIN`: no room).
    fn sendmmsg(&mut self, fd: libc::c_int) -> io::Result<usize> {
        let from = self.sent;
        let (hdrs, count) = self.point(from, false);
        if count == 0 {
            return Ok(0);
        }
        let flags = libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT;
        // SAFETY: `hdrs` points at `count` headers, each at its own iovec
        // (over its queued bytes) and address, all in this batch, borrowed
        // for the call.
        let n = unsafe {
            libc::syscall(
                libc::SYS_sendmmsg,
                libc::c_long::from(fd),
                hdrs,
                count as libc::c_long,
                libc::c_long::from(flags),
            )
        };
        let n = cvt_long(n)?;
        self.sent += n;
        Ok(n)
    }
}

/// A raw syscall's result: the count, or the thread's `errno`.
fn cvt_long(n: libc::c_long) -> io::Result<usize> {
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("slots", &self.capacity())
            .field("slot_size", &self.slot)
            .field("len", &self.len())
            .field("sent", &self.sent)
            .finish()
    }
}

/// A batch receive: at least one datagram, every one already queued.
pub(crate) struct RecvBatch<'a> {
    pub(crate) fd: &'a SharedFd,
    pub(crate) batch: Option<Batch>,
}

impl RecvBatch<'_> {
    fn batch(&mut self) -> &mut Batch {
        let Some(batch) = self.batch.as_mut() else {
            panic!("a batch receive polled after completion")
        };
        batch
    }
}

/// An error other than "nothing queued".
fn failed(res: io::Result<usize>) -> Option<io::Result<usize>> {
    match res {
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => None,
        Err(e) if e.raw_os_error() == Some(libc::EINTR) => None,
        res => Some(res),
    }
}

// SAFETY: the SQE points at the first header of the batch, which points
// at its own iovec, slot and address room, all in the batch's heap
// memory; the `Op` holds the batch to the completion and
// `dropped_in_flight` hands it to the slot, with the descriptor.
unsafe impl OpAble for RecvBatch<'_> {
    type Output = usize;

    fn uring_try(&mut self) -> Option<io::Result<usize>> {
        let fd = self.fd.as_raw_fd();
        self.batch().clear();
        failed(self.batch().recvmmsg(fd)).filter(|res| !matches!(res, Ok(0)))
    }

    fn uring_sqe(&mut self, _core: &Io, _d: &uring::Driver) -> Sqe {
        let (hdr, _) = self.batch().point(0, true);
        // SAFETY: `point` returned a pointer to the batch's first header.
        let msg = unsafe { &raw mut (*hdr).msg_hdr };
        let entry = opcode::RecvMsg::new(types::Fd(self.fd.as_raw_fd()), msg)
            .flags(libc::MSG_TRUNC as u32)
            .build();
        Sqe {
            entry,
            kind: OpKind::Recv,
            retained: Retained::None,
        }
    }

    fn uring_done(&mut self, cqe: Cqe, _retained: Retained) -> Option<io::Result<usize>> {
        let fd = self.fd.as_raw_fd();
        let n = match cqe_result(cqe.res) {
            Ok(n) => n as usize,
            Err(e) => return Some(Err(e)),
        };
        let batch = self.batch();
        batch.received(0, n);
        // What came with it; an error here is the next receive's.
        let _more = batch.recvmmsg(fd);
        Some(Ok(batch.len()))
    }

    fn poll_epoll(
        &mut self,
        _core: &Io,
        d: &mut epoll::Driver,
        source: SourceKey,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        let fd = self.fd.as_raw_fd();
        self.batch().clear();
        loop {
            if d.poll_ready(source, Interest::Read, cx).is_pending() {
                return Poll::Pending;
            }
            d.count_syscall();
            match self.batch().recvmmsg(fd) {
                Ok(n) => return Poll::Ready(Ok(n)),
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                    d.clear_ready(source, Interest::Read);
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn dropped_in_flight(&mut self) -> Retained {
        match self.batch.take() {
            Some(batch) => Retained::Buffer(self.fd.retain(), Box::new(batch)),
            None => Retained::None,
        }
    }
}

/// A batch send: as many of the unsent datagrams as the socket takes, at
/// least one.
pub(crate) struct SendBatch<'a> {
    pub(crate) fd: &'a SharedFd,
    pub(crate) batch: Option<Batch>,
}

impl SendBatch<'_> {
    fn batch(&mut self) -> &mut Batch {
        let Some(batch) = self.batch.as_mut() else {
            panic!("a batch send polled after completion")
        };
        batch
    }
}

// SAFETY: as for `RecvBatch`: the SQE points at the first unsent header,
// in the batch's heap memory, which the `Op` or the slot holds to the
// completion.
unsafe impl OpAble for SendBatch<'_> {
    type Output = usize;

    fn uring_try(&mut self) -> Option<io::Result<usize>> {
        let fd = self.fd.as_raw_fd();
        failed(self.batch().sendmmsg(fd))
    }

    fn uring_sqe(&mut self, _core: &Io, _d: &uring::Driver) -> Sqe {
        let batch = self.batch();
        let (hdr, _) = batch.point(batch.sent, false);
        // SAFETY: `point` returned a pointer to the first unsent header.
        let msg = unsafe { &raw const (*hdr).msg_hdr };
        let entry = opcode::SendMsg::new(types::Fd(self.fd.as_raw_fd()), msg)
            .flags(libc::MSG_NOSIGNAL as u32)
            .build();
        Sqe {
            entry,
            kind: OpKind::Send,
            retained: Retained::None,
        }
    }

    fn uring_done(&mut self, cqe: Cqe, _retained: Retained) -> Option<io::Result<usize>> {
        Some(cqe_result(cqe.res).map(|_| {
            self.batch().sent += 1;
            1
        }))
    }

    fn poll_epoll(
        &mut self,
        _core: &Io,
        d: &mut epoll::Driver,
        source: SourceKey,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        let fd = self.fd.as_raw_fd();
        let Some(batch) = self.batch.as_mut() else {
            panic!("a batch send polled after completion")
        };
        poll_epoll_send(d, source, cx, || match batch.sendmmsg(fd) {
            Ok(n) => n as libc::c_long,
            // `poll_epoll_send` reads the errno the call left.
            Err(_) => -1,
        })
    }

    fn dropped_in_flight(&mut self) -> Retained {
        match self.batch.take() {
            Some(batch) => Retained::Buffer(self.fd.retain(), Box::new(batch)),
            None => Retained::None,
        }
    }
}

/// Receives into `batch` (emptied first): at least one datagram, and
/// every one already queued behind it, up to its slots.
pub(crate) async fn recv(
    fd: &SharedFd,
    io: &crate::op::SocketIo,
    batch: Batch,
) -> crate::buf::BufResult<usize, Batch> {
    let data = RecvBatch {
        fd,
        batch: Some(batch),
    };
    let mut op = crate::op::lifecycle::Op::on_socket(io, data);
    let res = std::future::poll_fn(|cx| op.poll(cx)).await;
    let Some(batch) = op.data_mut().batch.take() else {
        unreachable!("a batch receive keeps its batch to the completion")
    };
    (res, batch)
}

/// Sends as many of `batch`'s unsent datagrams as the socket takes, at
/// least one; resolves to the count.
pub(crate) async fn send(
    fd: &SharedFd,
    io: &crate::op::SocketIo,
    batch: Batch,
) -> crate::buf::BufResult<usize, Batch> {
    let data = SendBatch {
        fd,
        batch: Some(batch),
    };
    let mut op = crate::op::lifecycle::Op::on_socket(io, data);
    let res = std::future::poll_fn(|cx| op.poll(cx)).await;
    let Some(batch) = op.data_mut().batch.take() else {
        unreachable!("a batch send keeps its batch to the completion")
    };
    (res, batch)
}
