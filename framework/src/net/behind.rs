//! A stream's writes behind: [`Stream::write_behind`] and its end (see
//! `op::send_behind`, and the design note in ARCHITECTURE.md).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::Stream;
use crate::op;

impl Stream {
    /// Starts sending all of `buf` and returns at once, without waiting
    /// for the kernel: a *write behind*. On io_uring the core keeps the
    /// buffer and sends it whole (the rest again after a partial send),
    /// waking nobody when it succeeds; the writer is polled once per
    /// answer instead of twice. The core keeps the buffers of writes
    /// behind that went out: [`write_buf`](Self::write_buf) hands one out
    /// for the next, so a writer needs none while it waits for its peer.
    ///
    /// `Err(buf)` when the stream cannot take one, and the caller sends
    /// `buf` another way ([`write_all`](Self::write_all)): on epoll, on a
    /// TLS stream, for an empty buffer or one of 4 GiB or more, and while
    /// an earlier write behind is under way (two sends in flight on one
    /// socket may go out in either order) or failed: wait for its end, or
    /// its error, with [`written_behind`](Self::written_behind) (or
    /// [`take_written_behind`](Self::take_written_behind)), which also
    /// collects the end of one that went out.
    ///
    /// Nothing else orders writes after it: wait for it
    /// ([`written_behind`](Self::written_behind)) before any other write
    /// on the stream, and before dropping the stream, which cancels a
    /// write behind still out (how much of it went out is then unknown).
    /// No timeout bounds it; the caller's wait for its end does.
    #[inline]
    pub fn write_behind(&self, buf: Vec<u8>) -> Result<(), Vec<u8>> {
        if !self.takes_write_behind() {
            return Err(buf);
        }
        op::send_behind::start(&self.socket.fd, &self.socket.io, buf)
    }

    /// An emptied buffer for the next [`write_behind`](Self::write_behind):
    /// one the core kept from a write behind that went out (on io_uring),
    /// or a new one, which allocates nothing until it is written to.
    pub fn write_buf(&self) -> Vec<u8> {
        op::send_behind::spare(&self.socket.io)
    }

    /// Whether [`write_behind`](Self::write_behind) may take a write on
    /// this stream (a plain stream on io_uring), so that a caller on
    /// epoll does not even hand it the buffer.
    #[inline]
    pub fn takes_write_behind(&self) -> bool {
        self.secure().is_none() && matches!(self.socket.io, op::SocketIo::Uring { .. })
    }

    /// Whether a [`write_behind`](Self::write_behind) was started and its
    /// end not yet collected (it may have gone out since).
    #[inline]
    pub fn writing_behind(&self) -> bool {
        op::send_behind::out(&self.socket.io)
    }

    /// Waits for the end of the [`write_behind`](Self::write_behind) that
    /// is out: once every byte went out, an emptied buffer for the next
    /// write (one the core kept, often the same, or a new one);
    /// `Ok(None)` when none is out.
    ///
    /// # Errors
    ///
    /// The send's error (`EPIPE`, `ECONNRESET`, ...), or `WriteZero` if
    /// the kernel took none of the bytes left.
    pub fn written_behind(&self) -> WrittenBehind<'_> {
        WrittenBehind { stream: self }
    }

    /// The end of the write behind that is out, if it has ended:
    /// [`written_behind`](Self::written_behind) without the wait. `None`
    /// while it is under way, or when none is out.
    pub fn take_written_behind(&self) -> Option<io::Result<Vec<u8>>> {
        match op::send_behind::poll_end(&self.socket.fd, &self.socket.io, None) {
            Poll::Ready(Ok(Some(buf))) => Some(Ok(buf)),
            Poll::Ready(Err(e)) => Some(Err(e)),
            Poll::Ready(Ok(None)) | Poll::Pending => None,
        }
    }
}

/// The future of [`Stream::written_behind`].
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct WrittenBehind<'a> {
    stream: &'a Stream,
}

impl Future for WrittenBehind<'_> {
    type Output = io::Result<Option<Vec<u8>>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        op::send_behind::poll_end(
            &self.stream.socket.fd,
            &self.stream.socket.io,
            Some(cx.waker()),
        )
    }
}
