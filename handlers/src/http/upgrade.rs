//! Connection upgrades (RFC 9110 §7.8): a route answers `101 Switching
//! Protocols` and takes the connection, with the bytes already read past
//! the request's head, for another protocol (WebSocket is the first).
//!
//! The service asks with [`Response::upgrade`](super::Response::upgrade),
//! handing over what runs the new protocol. The connection loop writes
//! the 101 head once the service returns, then calls it with an
//! [`Upgraded`] in the connection's own task: the connection is counted,
//! stopped and closed as any other.

use std::future::Future;
use std::io;
use std::pin::Pin;

use percore::Connection;

use super::proto::{BodyKind, RequestHead};

/// A connection taken over by another protocol after a 101: the stream,
/// and the bytes the client sent after the request's head that the HTTP
/// layer had already read (a client may send its first frames right after
/// its request, without waiting for the 101). Read those first, with
/// [`take_read`](Self::take_read), then the stream: nothing is lost.
pub struct Upgraded {
    stream: Connection,
    read: Vec<u8>,
}

impl Upgraded {
    pub(crate) fn new(stream: Connection, read: Vec<u8>) -> Self {
        Self { stream, read }
    }

    /// The connection's stream (TCP, Unix or TLS alike).
    pub fn stream(&self) -> &Connection {
        &self.stream
    }

    /// The bytes read past the request's head before the upgrade, taken
    /// (empty after the first call).
    pub fn take_read(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.read)
    }

    /// The stream and the bytes read past the head.
    pub fn into_parts(self) -> (Connection, Vec<u8>) {
        (self.stream, self.read)
    }
}

impl std::fmt::Debug for Upgraded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upgraded")
            .field("read", &self.read.len())
            .finish_non_exhaustive()
    }
}

/// What an upgraded connection runs once the 101 is out.
pub(crate) type OnUpgrade = Box<dyn FnOnce(Upgraded) -> UpgradedFuture>;

/// The future of an [`OnUpgrade`]: the new protocol's whole life on the
/// connection.
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
