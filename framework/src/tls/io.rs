//! A TLS stream's reads and writes: what [`Stream`]'s read and write
//! futures do instead of their plain operation when the stream has a
//! session.

use std::future::Future;
use std::io;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use super::session::Session;
use crate::buf::{IoBuf, RecvBuf};
use crate::driver::current;
use crate::net::{Stream, WriteAll};
use crate::op;

/// The next plaintext, decrypted into one of the core's pool buffers;
/// `Ok(None)` at the peer's `close_notify`. Out of line: the plain read
/// it branches from stays small enough to inline.
#[cold]
#[inline(never)]
pub(crate) fn poll_read(
    stream: &Stream,
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
        match session.feed_pending() {
            Ok(true) => continue,
            Ok(false) => {}
            Err(e) => return Poll::Ready(Err(e)),
        }
        let received = ready!(op::recv::poll_recv(stream.fd(), stream.io(), cx));
        let fed = match received {
            Ok(Some(records)) => session.receive(records),
            // The transport's end: the reader says whether it was clean.
            Ok(None) => session.end(),
            Err(e) => Err(e),
        };
        if let Err(e) = fed {
            return Poll::Ready(Err(e));
        }
    }
}

/// An encrypted write: the records of some plaintext, sent whole. The
/// caller's buffer waits beside it, unsent, to be handed back.
pub(crate) struct TlsWrite<'a> {
    records: Result<WriteAll<'a, Records>, Option<io::Error>>,
}

/// Encrypted records to send. A type of their own, so that sending them
/// is an instance of `WriteAll` of its own, apart from the plain
/// `Vec<u8>` writes a server makes on every request.
pub(crate) struct Records(Vec<u8>);

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
    /// Encrypts `chunks` now and starts sending the records. Out of line,
    /// as [`poll_read`].
    #[cold]
    #[inline(never)]
    pub(crate) fn boxed<'c>(
        stream: &'a Stream,
        session: &Session,
        chunks: impl Iterator<Item = &'c [u8]>,
    ) -> Box<TlsWrite<'a>> {
        let mut out = Vec::new();
        let mut encrypted = Ok(());
        for chunk in chunks {
            encrypted = session.encrypt(chunk, &mut out);
            if encrypted.is_err() {
                break;
            }
        }
        Box::new(TlsWrite {
            records: match encrypted {
                Ok(()) => Ok(stream.write_all_plain(Records(out))),
                Err(e) => Err(Some(e)),
            },
        })
    }

    /// Record bytes the kernel has taken so far.
    pub(crate) fn sent(&self) -> usize {
        self.records.as_ref().map_or(0, WriteAll::sent)
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.records {
            Ok(records) => Pin::new(records).poll(cx).map(|(res, _records)| res),
            Err(e) => Poll::Ready(Err(e
                .take()
                .unwrap_or_else(|| io::Error::other("TLS write polled after completion")))),
        }
    }
}

/// Sends `close_notify` ahead of the write side's shutdown, as far as the
/// socket takes it now: the shutdown is synchronous, and a peer that does
/// not read has no claim on a clean end.
pub(crate) fn close_notify(stream: &Stream, session: &Session) -> io::Result<()> {
    let records = session.close_notify()?;
    crate::sys::send_now(stream.fd().as_fd(), &records)
}
