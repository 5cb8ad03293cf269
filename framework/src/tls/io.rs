//! A TLS stream's reads and writes: what a [`Stream`](crate::net::Stream)'s
//! read and write futures do instead of their plain operation when the
//! stream has a session. They work on the stream's [`Socket`], below it.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use super::session::Session;
use crate::buf::{IoBuf, RecvBuf};
use crate::driver::current;
use crate::net::secure::{MovingSecure, Secure, SecureWrite};
use crate::net::{Socket, WriteAll};

impl Secure for Session {
    fn poll_read(
        &self,
        socket: &Socket,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<Option<RecvBuf>>> {
        poll_read(socket, self, cx)
    }

    fn write<'a>(
        &'a self,
        socket: &'a Socket,
        chunks: &mut dyn Iterator<Item = &[u8]>,
    ) -> Box<dyn SecureWrite + 'a> {
        TlsWrite::boxed(socket, self, chunks)
    }

    fn close(&self, socket: &Socket) -> io::Result<()> {
        close_notify(socket, self)
    }

    fn alpn(&self) -> Option<Vec<u8>> {
        Session::alpn(self)
    }

    fn server_name(&self) -> Option<String> {
        Session::server_name(self)
    }

    fn can_move(&self) -> bool {
        !self.is_writing()
    }

    fn into_moving(self: Box<Self>, received: Vec<u8>) -> Box<dyn MovingSecure> {
        Box::new(self.detach(received))
    }
}

impl MovingSecure for super::session::Moving {
    fn attach(self: Box<Self>) -> Box<dyn Secure> {
        let pool = current::with_io(|io| io.pool.clone());
        Box::new(Session::attach(*self, pool))
    }
}

/// The next plaintext, decrypted into one of the core's pool buffers;
/// `Ok(None)` at the peer's `close_notify`.
fn poll_read(
    socket: &Socket,
    session: &Session,
    cx: &mut Context<'_>,
) -> Poll<io::Result<Option<RecvBuf>>> {
    loop {
        let pool = current::with_io(|io| io.pool.clone());
        let mut buf = pool.get();
        match session.read_plain(&mut buf) {
            Ok(Some(0)) => {
                pool.put(buf);
                return Poll::Ready(Ok(None));
            }
            Ok(Some(n)) => return Poll::Ready(Ok(Some(RecvBuf::from_pool(pool, buf, n)))),
            Ok(None) => pool.put(buf),
            Err(e) => {
                pool.put(buf);
                return Poll::Ready(Err(e));
            }
        }
        match sent_after(socket, session, session.feed_pending()) {
            Ok(true) => continue,
            Ok(false) => {}
            Err(e) => return Poll::Ready(Err(e)),
        }
        let received = ready!(socket.poll_recv(cx));
        let fed = match received {
            Ok(Some(records)) => session.receive(records),
            // The transport's end: the reader says whether it was clean.
            Ok(None) => session.end(),
            Err(e) => Err(e),
        };
        if let Err(e) = sent_after(socket, session, fed) {
            return Poll::Ready(Err(e));
        }
    }
}

/// After records were fed in: sends what rustls queued in answer (an
/// alert for a refused renegotiation, a KeyUpdate answer, the alert
/// before a fatal error), at once rather than with the next write, which
/// may never come. The check is all a read costs when nothing was queued.
#[inline]
fn sent_after<T>(socket: &Socket, session: &Session, fed: io::Result<T>) -> io::Result<T> {
    if !session.wants_write() {
        return fed;
    }
    let sent = send_queued(socket, session);
    // The feeding's error says more than the send's.
    let fed = fed?;
    sent.map(|()| fed)
}

/// Sends rustls's queued records as far as the socket takes them now;
/// the rest is held to go ahead of the next records. While a write's
/// records are on their way, they are left to it: these were encrypted
/// after them, and must follow them.
#[cold]
#[inline(never)]
fn send_queued(socket: &Socket, session: &Session) -> io::Result<()> {
    if session.is_writing() {
        return Ok(());
    }
    let mut out = session.take_held();
    if out.capacity() == 0 {
        out = spare_records();
    }
    session.flush(&mut out)?;
    let sent = crate::sys::send_what_fits(socket.fd().as_fd(), &out)?;
    if sent < out.len() {
        // The peer does not read: what is left waits for the next send.
        out.drain(..sent);
        session.hold(out);
    } else {
        keep_spare(out);
    }
    Ok(())
}

/// An encrypted write: the records of some plaintext, sent whole. The
/// caller's buffer waits beside it, unsent, to be handed back.
struct TlsWrite<'a> {
    socket: &'a Socket,
    session: &'a Session,
    records: Result<WriteAll<'a, Records>, Option<io::Error>>,
    /// Record bytes sent by the earlier sends of this write.
    sent_before: usize,
}

/// Encrypted records to send. A type of their own, so that sending them
/// is an instance of `WriteAll` of its own, apart from the plain
/// `Vec<u8>` writes a server makes on every request.
struct Records(Vec<u8>);

// SAFETY: as for `Vec<u8>`, whose heap bytes it owns: they stay at
// `stable_ptr` while the value moves, and `bytes_init` of them are
// initialised.
unsafe impl IoBuf for Records {
    fn stable_ptr(&self) -> *const u8 {
        self.0.as_ptr()
    }

    fn bytes_init(&self) -> usize {
        self.0.len()
    }
}

impl<'a> TlsWrite<'a> {
    /// Encrypts `chunks` now and starts sending the records.
    fn boxed(
        socket: &'a Socket,
        session: &'a Session,
        chunks: &mut dyn Iterator<Item = &[u8]>,
    ) -> Box<TlsWrite<'a>> {
        let mut out = spare_records();
        session.begin_write(&mut out);
        let mut encrypted = Ok(());
        for chunk in chunks {
            encrypted = session.encrypt(chunk, &mut out);
            if encrypted.is_err() {
                break;
            }
        }
        Box::new(TlsWrite {
            socket,
            session,
            records: match encrypted {
                Ok(()) => Ok(socket.write_all(Records(out))),
                Err(e) => Err(Some(e)),
            },
            sent_before: 0,
        })
    }
}

impl SecureWrite for TlsWrite<'_> {
    /// Record bytes the kernel has taken so far.
    fn sent(&self) -> usize {
        self.sent_before + self.records.as_ref().map_or(0, WriteAll::sent)
    }

    /// Sends the records, then those rustls queued meanwhile (a read's
    /// answers, which had to wait for these).
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let records = match &mut self.records {
                Ok(records) => records,
                Err(e) => {
                    self.session.end_write();
                    return Poll::Ready(Err(e.take().unwrap_or_else(|| {
                        io::Error::other("TLS write polled after completion")
                    })));
                }
            };
            let (res, Records(mut out)) = ready!(Pin::new(records).poll(cx));
            if res.is_ok() && self.session.wants_write() {
                self.sent_before += out.len();
                out.clear();
                match self.session.flush(&mut out) {
                    Ok(()) => {
                        self.records = Ok(self.socket.write_all(Records(out)));
                        continue;
                    }
                    Err(e) => {
                        self.records = Err(Some(e));
                        continue;
                    }
                }
            }
            self.session.end_write();
            keep_spare(out);
            return Poll::Ready(res);
        }
    }
}

impl Drop for TlsWrite<'_> {
    fn drop(&mut self) {
        // A write dropped on its way leaves later records to the next
        // send; its own are cut short, which the peer will refuse anyway.
        self.session.end_write();
    }
}

thread_local! {
    /// Record buffers of finished writes, kept for the next writes on this
    /// core: a kept-alive connection then encrypts each answer into one
    /// without an allocation. A few, and small, so an idle core holds
    /// little.
    static SPARE_RECORDS: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// How many record buffers a core keeps, and the largest it keeps: a
/// bulk write's buffer is freed rather than held.
const SPARE_BUFFERS: usize = 16;
const SPARE_CAPACITY: usize = 64 * 1024;

/// An empty buffer for records, kept from an earlier write if there is one.
fn spare_records() -> Vec<u8> {
    SPARE_RECORDS
        .try_with(|spare| spare.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Keeps a finished write's buffer for [`spare_records`], if there is room.
fn keep_spare(mut records: Vec<u8>) {
    if records.capacity() == 0 || records.capacity() > SPARE_CAPACITY {
        return;
    }
    records.clear();
    // A thread that is ending frees it instead.
    let _ = SPARE_RECORDS.try_with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < SPARE_BUFFERS {
            spare.push(records);
        }
    });
}

/// Sends `close_notify` ahead of the write side's shutdown, as far as the
/// socket takes it now: the shutdown is synchronous, and a peer that does
/// not read has no claim on a clean end.
fn close_notify(socket: &Socket, session: &Session) -> io::Result<()> {
    let records = session.close_notify()?;
    crate::sys::send_now(socket.fd().as_fd(), &records)
}
