//! Connection upgrades: a route takes the exchange for another protocol
//! (WebSocket is the first). On HTTP/1.1 (RFC 9110 §7.8) the client gets
//! `101 Switching Protocols` and the route the connection, with the bytes
//! already read past the request's head; on HTTP/2, an extended CONNECT
//! (RFC 8441) gets `200` and the route the stream's DATA both ways.
//!
//! The service asks with [`Response::upgrade`](super::Response::upgrade),
//! handing over what runs the new protocol. The connection loop (or the
//! HTTP/2 stream's task) sends the answer's head once the service
//! returns, then calls it with an [`Upgraded`] in the same task: the
//! connection is counted, stopped and closed as any other.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;

use percore::buf::BufResult;
use percore::Connection;

use super::proto::{BodyKind, RequestHead};
pub use super::tunnel::Chunk;
use super::tunnel::Tunnel;

/// An exchange taken over by another protocol: a byte stream both ways,
/// over an HTTP/1.1 connection after its 101 or an HTTP/2 stream after
/// the 200 to an extended CONNECT. The same route code runs on either.
///
/// On HTTP/1.1 a client may send its first bytes right behind its
/// request, without waiting for the 101, and the HTTP layer may already
/// have read them: [`take_read`](Self::take_read) gives those, and
/// [`read`](Self::read) what comes after. Nothing is lost. (On HTTP/2
/// nothing is read ahead: `take_read` is empty.)
///
/// ```no_run
/// use percore_handlers::http::Upgraded;
///
/// /// Echoes the bytes of an upgraded exchange until the client ends.
/// async fn echo(mut up: Upgraded) -> std::io::Result<()> {
///     let early = up.take_read();
///     if !early.is_empty() {
///         up.write_all(early).await.0?;
///     }
///     while let Some(chunk) = up.read().await? {
///         up.write_all(chunk.to_vec()).await.0?;
///     }
///     up.shutdown_write()
/// }
/// ```
pub struct Upgraded {
    tunnel: Tunnel,
    read: Vec<u8>,
}

impl Upgraded {
    pub(crate) fn new(tunnel: Tunnel, read: Vec<u8>) -> Self {
        Self { tunnel, read }
    }

    /// The bytes read past the request's head before the upgrade, taken
    /// (empty after the first call, and always on HTTP/2).
    pub fn take_read(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.read)
    }

    /// The next bytes the client sent, after those of
    /// [`take_read`](Self::take_read); `None` once it ended its side (a
    /// TCP half-close, or `END_STREAM`). Cancel-safe: a read dropped
    /// before it finished loses nothing.
    ///
    /// # Errors
    ///
    /// The connection's error, or on HTTP/2 `ConnectionReset` for a
    /// stream the client reset and `BrokenPipe` for a connection that
    /// ended.
    pub async fn read(&self) -> io::Result<Option<Chunk>> {
        self.tunnel.read().await
    }

    /// Writes all of `buf`, and gives it back for reuse (on HTTP/2
    /// emptied, as its bytes went into the stream's frames). On HTTP/2 it
    /// waits for the client's flow-control windows.
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read), in the result's first half.
    pub async fn write_all(&self, buf: Vec<u8>) -> BufResult<(), Vec<u8>> {
        self.tunnel.write_all(buf).await
    }

    /// Ends the server's side: a TCP half-close (after TLS's
    /// `close_notify`) on HTTP/1.1, `END_STREAM` on HTTP/2. The client's
    /// side may still be read.
    ///
    /// # Errors
    ///
    /// When the connection or stream is already gone.
    pub fn shutdown_write(&self) -> io::Result<()> {
        self.tunnel.shutdown_write()
    }

    /// The client's address.
    ///
    /// # Errors
    ///
    /// When the socket is no longer connected.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.tunnel.peer_addr()
    }

    /// Whether the exchange is an HTTP/2 stream (an extended CONNECT)
    /// rather than an HTTP/1.1 connection.
    pub fn is_h2(&self) -> bool {
        self.tunnel.connection().is_none()
    }

    /// The HTTP/1.1 connection, for what only a connection has (its TLS
    /// state, socket options, the framework's own reads and writes of
    /// owned buffers); `None` on HTTP/2, where the exchange is one stream
    /// among others of the connection.
    pub fn connection(&self) -> Option<&Connection> {
        self.tunnel.connection()
    }

    /// The HTTP/1.1 connection and the bytes read past the head, or the
    /// `Upgraded` back on HTTP/2.
    ///
    /// # Errors
    ///
    /// `self`, unchanged, on HTTP/2.
    pub fn into_connection(self) -> Result<(Connection, Vec<u8>), Self> {
        match self.tunnel {
            Tunnel::H1(conn) => Ok((conn, self.read)),
            #[cfg(feature = "h2")]
            tunnel @ Tunnel::H2(_) => Err(Self {
                tunnel,
                read: self.read,
            }),
        }
    }

    /// The tunnel and the bytes read past the head.
    pub(crate) fn into_parts(self) -> (Tunnel, Vec<u8>) {
        (self.tunnel, self.read)
    }
}

impl std::fmt::Debug for Upgraded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upgraded")
            .field("h2", &self.is_h2())
            .field("read", &self.read.len())
            .finish_non_exhaustive()
    }
}

/// What an upgraded exchange runs once the 101 (or HTTP/2's 200) is out.
pub(crate) type OnUpgrade = Box<dyn FnOnce(Upgraded) -> UpgradedFuture>;

/// The future of an [`OnUpgrade`]: the new protocol's whole life on the
/// connection or stream.
pub(crate) type UpgradedFuture = Pin<Box<dyn Future<Output = io::Result<()>>>>;

/// Boxes `then` as an [`OnUpgrade`].
pub(crate) fn on_upgrade<F, Fut>(then: F) -> OnUpgrade
where
    F: FnOnce(Upgraded) -> Fut + 'static,
    Fut: Future<Output = io::Result<()>> + 'static,
{
    Box::new(move |up| Box::pin(then(up)) as UpgradedFuture)
}

/// The protocol an HTTP/1.1 request asks to switch to (its `Upgrade`
/// field), when it may: `Connection` lists `upgrade` (RFC 9110 §7.8: the
/// field is otherwise ignored), and the request has no body, whose bytes
/// would be mistaken for the new protocol's (FAULTS M1). `None` for
/// HTTP/1.0, which has no upgrades.
pub(crate) fn requested<'b>(head: &RequestHead<'_, 'b>) -> Option<&'b [u8]> {
    if head.version != 1 || !matches!(head.body, BodyKind::None | BodyKind::Length(0)) {
        return None;
    }
    let mut upgrade = None;
    let mut listed = false;
    for field in head.headers {
        if field.name.eq_ignore_ascii_case("upgrade") {
            if upgrade.is_some() {
                // Two fields: which one the client meant is unclear.
                return None;
            }
            upgrade = Some(field.value);
        } else if field.name.eq_ignore_ascii_case("connection") {
            listed |= field
                .value
                .split(|&b| b == b',')
                .any(|token| token.trim_ascii().eq_ignore_ascii_case(b"upgrade"));
        }
    }
    upgrade.filter(|value| listed && !value.trim_ascii().is_empty())
}
