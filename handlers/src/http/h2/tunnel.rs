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

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::task::{Context, Poll};

use bytes::Bytes;
use percore_http2::frame::ErrorCode;

use super::out::{poll_send, StreamRef};
use super::shared::Received;

/// One stream, both ways, used by one task.
pub(crate) struct H2Tunnel {
    stream: StreamRef,
    peer: Option<SocketAddr>,
}

impl H2Tunnel {
    pub(super) fn new(stream: StreamRef, peer: Option<SocketAddr>) -> Self {
        Self { stream, peer }
    }

    /// The DATA received since the last read, its window given back;
    /// `None` at `END_STREAM`.
    pub(crate) fn poll_read(&self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Bytes>>> {
        let mut buf = Vec::new();
        match self.stream.shared.receive(self.stream.id, &mut buf, cx) {
            Received::Data => Poll::Ready(Ok(Some(Bytes::from(buf)))),
            Received::End(_) => Poll::Ready(Ok(None)),
            Received::Gone => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "HTTP/2 stream reset",
            ))),
            Received::Wait => Poll::Pending,
        }
    }

    /// Sends `data` as DATA frames, each as large as the client's windows
    /// let it be, waiting for them to open.
    pub(crate) async fn write_all(&self, data: &[u8]) -> io::Result<()> {
        let (shared, id) = (&*self.stream.shared, self.stream.id);
        let mut rest = data;
        while !rest.is_empty() {
            if poll_fn(|cx| poll_send(shared, id, &mut rest, false, cx))
                .await
                .is_err()
            {
                return Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "HTTP/2 stream closed",
                ));
            }
        }
        Ok(())
    }

    /// `END_STREAM`: the server sends nothing more.
    pub(crate) fn shutdown_write(&self) -> io::Result<()> {
        let (shared, id) = (&*self.stream.shared, self.stream.id);
        if shared.failed(id) {
            return Err(io::Error::from(io::ErrorKind::BrokenPipe));
        }
        let sent = shared.proto.borrow_mut().send_data(id, &[], true);
        sent.map(drop)
            .map_err(|e| io::Error::new(io::ErrorKind::BrokenPipe, e))
    }

    /// `RST_STREAM CANCEL`: the stream is given up.
    pub(crate) fn reset(&self) {
        self.stream.reset(ErrorCode::Cancel);
    }

    pub(crate) fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.peer
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))
    }
}
