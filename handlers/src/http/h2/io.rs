//! [`Io`]: a percore stream as tokio's `AsyncRead` and `AsyncWrite`, which
//! the `h2` crate drives for the client's connections (`crate::client`).
//! The traits need no tokio runtime: their polls are percore's reads and
//! writes on the connection's core.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use percore::buf::{BufResult, RecvBuf};
use percore::net::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A write in flight: it owns its buffer, as a percore write must (the
/// kernel may still read it after a cancel).
type Flight<'a> = Pin<Box<dyn Future<Output = BufResult<(), Vec<u8>>> + 'a>>;

/// How an [`Io`] holds its stream: a client's connection is a task of
/// its own that owns it.
enum Held {
    Owned(Rc<Stream>),
}

/// A percore stream as tokio's I/O.
///
/// Reads copy from the lease of each percore read into the caller's
/// buffer, keeping what did not fit. Writes copy into a buffer of their
/// own that is sent whole while `h2` goes on; the next write, flush or
/// shutdown waits for it and reports its error. The buffer is reused
/// from one write to the next.
pub(crate) struct Io<'a> {
    stream: Held,
    /// The rest of the last read, when the caller's buffer was full.
    unread: Option<RecvBuf>,
    write: Option<Flight<'a>>,
    spare: Vec<u8>,
}

impl<'a> Io<'a> {
    /// A client's connection, which owns `stream`.
    pub(crate) fn client(stream: Stream) -> Io<'static> {
        Io {
            stream: Held::Owned(Rc::new(stream)),
            unread: None,
            write: None,
            spare: Vec::new(),
        }
    }

    fn stream(&self) -> &Stream {
        match &self.stream {
            Held::Owned(stream) => stream,
        }
    }

    /// Waits for the write in flight, if any, and hands back its result.
    fn poll_flight(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(flight) = self.write.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let (res, buf) = ready!(flight.as_mut().poll(cx));
        self.write = None;
        self.spare = buf;
        Poll::Ready(res)
    }
}

impl AsyncRead for Io<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.get_mut().read_into(cx, buf)
    }
}

impl Io<'_> {
    /// Fills `buf` from the last read's rest, or a new read.
    fn read_into(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self;
        let mut lease = match this.unread.take() {
            Some(lease) => lease,
            None => {
                // `Read` is only a borrow: the receive belongs to the
                // stream, so a new one each poll loses nothing.
                let mut read = this.stream().read();
                match ready!(Pin::new(&mut read).poll(cx))? {
                    Some(lease) => lease,
                    // End of stream: a read of nothing says so.
                    None => return Poll::Ready(Ok(())),
                }
            }
        };
        let n = lease.len().min(buf.remaining());
        buf.put_slice(&lease[..n]);
        if n < lease.len() {
            lease.advance(n);
            this.unread = Some(lease);
        }
        Poll::Ready(Ok(()))
    }
}

impl<'a> AsyncWrite for Io<'a> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }

    /// All of `bufs` in one send: `h2` writes a frame as its head and its
    /// payload, which would otherwise be a send each.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_flight(cx))?;
        let mut out = std::mem::take(&mut this.spare);
        out.clear();
        for buf in bufs {
            out.extend_from_slice(buf);
        }
        let len = out.len();
        let mut flight: Flight<'a> = match &this.stream {
            Held::Owned(stream) => {
                let stream = Rc::clone(stream);
                Box::pin(async move { stream.write_all(out).await })
            }
        };
        // The first poll starts the send: on epoll it is the syscall, and
        // frames that fit the socket's buffer are done here.
        match flight.as_mut().poll(cx) {
            Poll::Ready((res, out)) => {
                this.spare = out;
                res?;
            }
            Poll::Pending => this.write = Some(flight),
        }
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_flight(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_flight(cx))?;
        match this.stream().shutdown_write() {
            // A peer that reset first has nothing left to finish.
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Poll::Ready(Ok(())),
            res => Poll::Ready(res),
        }
    }
}
