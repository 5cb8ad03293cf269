//! [`Io`]: a percore stream as hyper's `Read` and `Write`.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use hyper::rt::{Read, ReadBufCursor, Write};
use percore::buf::{BufResult, RecvBuf};
use percore::net::Stream;

/// A write in flight: it owns its buffer and a share of the stream, as a
/// percore write must (the kernel may still read the buffer after a
/// cancel).
type Flight = Pin<Box<dyn Future<Output = BufResult<(), Vec<u8>>>>>;

/// A percore [`Stream`] (a handler's `Connection`, a `TcpStream`) as
/// hyper's I/O, on its core.
///
/// Needs the `hyper` feature.
///
/// Reads copy from the lease of the core's buffer that a percore read
/// hands out into hyper's buffer, and give the lease back as soon as it is
/// consumed. Writes copy hyper's bytes into a buffer of their own, which
/// is sent whole (a percore write takes owned buffers) while hyper goes
/// on; the next write, flush or shutdown waits for it, and reports its
/// error. The buffer is reused from one write to the next.
pub struct Io {
    stream: Rc<Stream>,
    /// The rest of the last read, when hyper's buffer was full.
    unread: Option<RecvBuf>,
    write: Option<Flight>,
    /// The buffer of the last completed write, for the next one.
    spare: Vec<u8>,
}

impl Io {
    /// Wraps `stream`.
    pub fn new(stream: Stream) -> Io {
        Io::from_rc(Rc::new(stream))
    }

    /// Wraps a stream shared with other code of the core.
    pub fn from_rc(stream: Rc<Stream>) -> Io {
        Io {
            stream,
            unread: None,
            write: None,
            spare: Vec::new(),
        }
    }

    /// The stream.
    pub fn stream(&self) -> &Rc<Stream> {
        &self.stream
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

impl Read for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut cursor: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let mut lease = match this.unread.take() {
            Some(lease) => lease,
            None => {
                // `Read` is only a borrow: the receive belongs to the
                // stream, so a new one each poll loses nothing.
                let mut read = this.stream.read();
                match ready!(Pin::new(&mut read).poll(cx))? {
                    Some(lease) => lease,
                    // End of stream: a read of zero bytes tells hyper.
                    None => return Poll::Ready(Ok(())),
                }
            }
        };
        let n = lease.len().min(cursor.remaining());
        cursor.put_slice(&lease[..n]);
        if n < lease.len() {
            lease.advance(n);
            this.unread = Some(lease);
        }
        Poll::Ready(Ok(()))
    }
}

impl Write for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_flight(cx))?;
        let mut out = std::mem::take(&mut this.spare);
        out.clear();
        out.extend_from_slice(buf);
        let stream = Rc::clone(&this.stream);
        let mut flight: Flight = Box::pin(async move { stream.write_all(out).await });
        // The first poll starts the send: on epoll it is the syscall, and
        // a response that fits the socket's buffer is done here.
        match flight.as_mut().poll(cx) {
            Poll::Ready((res, out)) => {
                this.spare = out;
                res?;
            }
            Poll::Pending => this.write = Some(flight),
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_flight(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_flight(cx))?;
        match this.stream.shutdown_write() {
            // A peer that reset first has nothing left to finish.
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Poll::Ready(Ok(())),
            res => Poll::Ready(res),
        }
    }
}

impl fmt::Debug for Io {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Io")
            .field("stream", &self.stream)
            .field("writing", &self.write.is_some())
            .finish_non_exhaustive()
    }
}
