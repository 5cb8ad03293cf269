//! [`H2Tunnel`]: an HTTP/2 stream after the 200 to an extended CONNECT
//! (RFC 8441), as the byte stream of an upgraded exchange: the request's
//! DATA is what the client sends, the response's DATA what it receives.
//!
//! Memory is bounded by flow control. The stream's receive window (the
//! connection's [`H2Limits`](crate::http::H2Limits)) is given back only
//! as the protocol on top reads, so a client that sends faster than the
//! route reads waits on its window, with at most a window's worth
//! buffered. Writes go out as the client's windows allow, a piece at a
//! time: the protocol's own bound on what it queues (a WebSocket's send
//! queue and write timeout) applies as on HTTP/1.

use std::cell::RefCell;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use h2::{RecvStream, SendStream};

/// One stream, both ways, used by one task: each borrow lasts one poll.
pub(crate) struct H2Tunnel {
    send: RefCell<SendStream<Bytes>>,
    recv: RefCell<RecvStream>,
    peer: Option<SocketAddr>,
}

impl H2Tunnel {
    pub(super) fn new(send: SendStream<Bytes>, recv: RecvStream, peer: Option<SocketAddr>) -> Self {
        Self {
            send: RefCell::new(send),
            recv: RefCell::new(recv),
            peer,
        }
    }

    /// The next DATA frame's payload, its window given back; `None` at
    /// `END_STREAM`. Empty frames are passed over.
    pub(crate) fn poll_read(&self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Bytes>>> {
        let mut recv = self.recv.borrow_mut();
        loop {
            match ready!(recv.poll_data(cx)) {
                None => return Poll::Ready(Ok(None)),
                Some(Ok(data)) => {
                    let _ = recv.flow_control().release_capacity(data.len());
                    if !data.is_empty() {
                        return Poll::Ready(Ok(Some(data)));
                    }
                }
                Some(Err(e)) => return Poll::Ready(Err(io_error(e))),
            }
        }
    }

    /// Sends `data` as DATA frames, each as large as the client's windows
    /// let it be, waiting for them to open.
    pub(crate) async fn write_all(&self, mut data: Bytes) -> io::Result<()> {
        while !data.is_empty() {
            self.send.borrow_mut().reserve_capacity(data.len());
            let granted = poll_fn(|cx| self.send.borrow_mut().poll_capacity(cx)).await;
            let n = match granted {
                Some(Ok(n)) => n.min(data.len()),
                Some(Err(e)) => return Err(io_error(e)),
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        "HTTP/2 stream closed",
                    ))
                }
            };
            if n == 0 {
                continue;
            }
            let piece = data.split_to(n);
            self.send
                .borrow_mut()
                .send_data(piece, false)
                .map_err(io_error)?;
        }
        Ok(())
    }

    /// `END_STREAM`: the server sends nothing more.
    pub(crate) fn shutdown_write(&self) -> io::Result<()> {
        self.send
            .borrow_mut()
            .send_data(Bytes::new(), true)
            .map_err(io_error)
    }

    /// `RST_STREAM CANCEL`: the stream is given up.
    pub(crate) fn reset(&self) {
        self.send.borrow_mut().send_reset(h2::Reason::CANCEL);
    }

    pub(crate) fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.peer
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))
    }
}

/// An `h2` error as the I/O error a stream's user expects: a reset
/// stream is `ConnectionReset`, a broken connection its own error or
/// `BrokenPipe`.
fn io_error(e: h2::Error) -> io::Error {
    if e.is_io() {
        return e
            .into_io()
            .unwrap_or_else(|| io::Error::from(io::ErrorKind::BrokenPipe));
    }
    let kind = if e.is_reset() {
        io::ErrorKind::ConnectionReset
    } else {
        io::ErrorKind::BrokenPipe
    };
    io::Error::new(kind, e)
}
