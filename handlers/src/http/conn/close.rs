//! The end of a connection the layer closes: the answer out, then a
//! lingering read, so that the client gets the answer rather than a reset
//! caused by its own unread bytes.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use super::state::Conn;
use crate::http::service::Service;
use crate::http::wire::{after, Waited};

/// Lingering is cut to this while the server stops: the answer is already
/// out, and a stopping server should not wait on slow clients.
const STOP_LINGER: Duration = Duration::from_millis(500);

impl<S: Service> Conn<'_, S> {
    /// Sends what is pending, shuts down the write side, and reads and drops
    /// input for a bounded time so the client sees the answer, not a reset
    /// caused by its own unread bytes (RFC 9112 §9.6). A stop, whether it
    /// began before or during the linger, cuts what is left of it to
    /// [`STOP_LINGER`]: a client that keeps its end open after the answer
    /// must not hold the server's stop for the whole linger.
    pub(super) async fn close(&self) -> io::Result<()> {
        let wire = &self.wire;
        if let Err(e) = self.flush_dropping_input().await {
            return quiet(e);
        }
        // ENOTCONN here means the peer already reset: nothing left to finish.
        let _ = wire.conn.shutdown_write();
        let mut deadline = after(percore::time::now(), self.layer.config.linger_timeout);
        let mut watch = Some(&self.stop);
        loop {
            match wire.wait(wire.conn.read(), deadline, watch).await {
                Waited::Done(Ok(Some(_dropped))) => {}
                Waited::Stopped => {
                    deadline = deadline.min(after(percore::time::now(), STOP_LINGER));
                    watch = None;
                }
                Waited::Done(_) | Waited::TimedOut => return Ok(()),
            }
        }
    }

    /// Sends what is pending while dropping what the client still sends: an
    /// answer larger than the socket buffers never gets out to a client that
    /// sends its whole request (a body the layer will not read) before it
    /// reads, each side waiting for the other until the write timeout resets
    /// the connection. The write timeout bounds both.
    async fn flush_dropping_input(&self) -> io::Result<()> {
        let wire = &self.wire;
        if wire.pending() == 0 {
            return wire.flush().await;
        }
        let mut flush = pin!(wire.flush());
        let mut reading = true;
        poll_fn(|cx| {
            // The flush first, on every poll, and one read per poll: a client
            // that always has more to send must not keep the flush (and its
            // timeout) from being polled.
            if let Poll::Ready(flushed) = flush.as_mut().poll(cx) {
                return Poll::Ready(flushed);
            }
            if reading {
                // A read holds no state of its own: one per poll loses nothing.
                match pin!(wire.conn.read()).poll(cx) {
                    Poll::Ready(Ok(Some(_dropped))) => cx.waker().wake_by_ref(),
                    // The client's end of stream or an error: nothing more to drop.
                    Poll::Ready(_) => reading = false,
                    Poll::Pending => {}
                }
            }
            Poll::Pending
        })
        .await
    }
}

/// Ends the connection after a write error: resets and broken pipes are
/// reported (the server counts them); a write timeout is policy, not an
/// error, and [`Wire::flush`](crate::http::wire::Wire::flush) already made the
/// close a reset.
pub(super) fn quiet(e: io::Error) -> io::Result<()> {
    if e.kind() == io::ErrorKind::TimedOut {
        Ok(())
    } else {
        Err(e)
    }
}
