//! [`Tunnel`]: the byte stream an upgraded exchange continues on, either
//! an HTTP/1.1 connection after its 101 or an HTTP/2 stream after the 200
//! to an extended CONNECT (RFC 8441). It reads bytes, writes owned bytes
//! and shuts down, and that is all a protocol on top (WebSocket) needs.
//!
//! An enum rather than a trait object: the HTTP/1 branch is the common
//! one, its read is the connection's own future (no box, no copy), and
//! the branch taken never changes for a tunnel's life.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::ops::Deref;
use std::pin::Pin;
use std::task::{Context, Poll};

use percore::buf::{BufResult, RecvBuf};
use percore::Connection;

/// The stream under an upgraded exchange.
pub(crate) enum Tunnel {
    /// An HTTP/1.1 connection, whole.
    H1(Connection),
    /// One stream of an HTTP/2 connection.
    #[cfg(feature = "h2")]
    H2(super::h2::H2Tunnel),
}

impl Tunnel {
    /// The next bytes the client sent; `None` once it ended its side.
    /// Dropping the future loses nothing: what arrives waits for the next.
    pub(crate) fn read(&self) -> TunnelRead<'_> {
        match self {
            Tunnel::H1(conn) => TunnelRead::H1(conn.read()),
            #[cfg(feature = "h2")]
            Tunnel::H2(stream) => TunnelRead::H2(stream),
        }
    }

    /// Writes all of `buf` and gives it back (on HTTP/2, emptied: its
    /// bytes went to the stream's frames).
    pub(crate) async fn write_all(&self, buf: Vec<u8>) -> BufResult<(), Vec<u8>> {
        match self {
            Tunnel::H1(conn) => conn.write_all(buf).await,
            #[cfg(feature = "h2")]
            Tunnel::H2(stream) => {
                let res = stream.write_all(&buf).await;
                let mut buf = buf;
                buf.clear();
                (res, buf)
            }
        }
    }

    /// Ends the server's side: a TCP half-close (TLS `close_notify`
    /// first), or `END_STREAM` on HTTP/2.
    pub(crate) fn shutdown_write(&self) -> io::Result<()> {
        match self {
            Tunnel::H1(conn) => conn.shutdown_write(),
            #[cfg(feature = "h2")]
            Tunnel::H2(stream) => stream.shutdown_write(),
        }
    }

    /// After [`shutdown_write`](Self::shutdown_write): waits up to
    /// `linger` for the client to end its side too, reading and dropping
    /// what it still sends, so that an HTTP/2 stream closes cleanly
    /// rather than by a reset (`RST_STREAM NO_ERROR`) when it is dropped.
    /// Nothing to wait for on HTTP/1, whose connection is closed.
    pub(crate) async fn linger(&self, linger: std::time::Duration) {
        #[cfg(feature = "h2")]
        if let Tunnel::H2(stream) = self {
            let drain = async {
                while let Ok(Some(_)) = std::future::poll_fn(|cx| stream.poll_read(cx)).await {}
            };
            let _ = percore::time::timeout(linger, drain).await;
        }
        #[cfg(not(feature = "h2"))]
        let _ = linger;
    }

    /// Ends the tunnel with a reset rather than a clean end, for a peer
    /// given up on: on HTTP/1 at the connection's close (`SO_LINGER` 0),
    /// on HTTP/2 at once (`RST_STREAM CANCEL`).
    pub(crate) fn reset(&self) {
        match self {
            Tunnel::H1(conn) => {
                let _ = conn.set_linger(Some(std::time::Duration::ZERO));
            }
            #[cfg(feature = "h2")]
            Tunnel::H2(stream) => stream.reset(),
        }
    }

    pub(crate) fn peer_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Tunnel::H1(conn) => conn.peer_addr(),
            #[cfg(feature = "h2")]
            Tunnel::H2(stream) => stream.peer_addr(),
        }
    }

    pub(crate) fn connection(&self) -> Option<&Connection> {
        match self {
            Tunnel::H1(conn) => Some(conn),
            #[cfg(feature = "h2")]
            Tunnel::H2(_) => None,
        }
    }
}

/// The future of [`Tunnel::read`].
pub(crate) enum TunnelRead<'a> {
    H1(percore::net::Read<'a>),
    #[cfg(feature = "h2")]
    H2(&'a super::h2::H2Tunnel),
}

impl Future for TunnelRead<'_> {
    type Output = io::Result<Option<Chunk>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            TunnelRead::H1(read) => Pin::new(read)
                .poll(cx)
                .map_ok(|buf| buf.map(|buf| Chunk(Held::Lease(buf)))),
            #[cfg(feature = "h2")]
            TunnelRead::H2(stream) => stream
                .poll_read(cx)
                .map_ok(|data| data.map(|data| Chunk(Held::Data(data)))),
        }
    }
}

/// Bytes read from an upgraded exchange's stream: a receive buffer of the
/// connection on HTTP/1 (lent by the core: copy what must be kept, and
/// drop it soon), a DATA frame's payload on HTTP/2. Derefs to the bytes.
pub struct Chunk(Held);

enum Held {
    Lease(RecvBuf),
    #[cfg(feature = "h2")]
    Data(bytes::Bytes),
}

impl Deref for Chunk {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        match &self.0 {
            Held::Lease(buf) => buf,
            #[cfg(feature = "h2")]
            Held::Data(data) => data,
        }
    }
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunk").field("len", &self.len()).finish()
    }
}
