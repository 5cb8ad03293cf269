//! What a secured stream's reads and writes go through: the contract a
//! session (TLS, in [`crate::tls`]) fulfils for a [`Stream`](super::Stream).
//!
//! The stream is one type whether it is secured or not, so it holds its
//! session; `net` sits below `tls`, so it holds it behind this trait
//! rather than by its type. Only a secured stream calls through it, out
//! of line: a plain read or write pays one branch, as before.

use std::io;
use std::task::{Context, Poll};

use super::Socket;
use crate::buf::RecvBuf;

/// A stream's session: it turns the socket's bytes into the stream's
/// plaintext and back.
pub(crate) trait Secure {
    /// The next plaintext; `Ok(None)` at the peer's clean end.
    fn poll_read(&self, socket: &Socket, cx: &mut Context<'_>)
        -> Poll<io::Result<Option<RecvBuf>>>;

    /// Encrypts `chunks`, in order, and starts sending the result.
    fn write<'a>(
        &'a self,
        socket: &'a Socket,
        chunks: &mut dyn Iterator<Item = &[u8]>,
    ) -> Box<dyn SecureWrite + 'a>;

    /// Sends the session's end ahead of the socket's write side shutdown,
    /// as far as the socket takes it now.
    fn close(&self, socket: &Socket) -> io::Result<()>;

    /// The protocol agreed on by ALPN.
    fn alpn(&self) -> Option<Vec<u8>>;

    /// The server name the client asked for (server side).
    fn server_name(&self) -> Option<String>;

    /// Whether the session can leave its core now: no write's records
    /// are on their way.
    fn can_move(&self) -> bool;

    /// The session as it travels to another core, with `received`: the
    /// bytes the socket received after the records it holds.
    fn into_moving(self: Box<Self>, received: Vec<u8>) -> Box<dyn MovingSecure>;
}

/// A session on its way to another core (see
/// [`Stream::detach`](super::Stream::detach)).
pub(crate) trait MovingSecure: Send {
    /// The session again, on the core that takes the stream.
    fn attach(self: Box<Self>) -> Box<dyn Secure>;
}

/// A secured write on its way: the bytes the session made of the
/// caller's, sent whole.
pub(crate) trait SecureWrite {
    /// Sends what is left; ready once all of it went out.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// Bytes the kernel has taken so far.
    fn sent(&self) -> usize;
}
