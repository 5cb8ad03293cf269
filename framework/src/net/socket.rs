//! [`Socket`]: a connected socket registered with its core, and its plain
//! reads and writes. What a [`Stream`](super::Stream) is below its
//! session: TLS sends its records and receives them here, so it names
//! the socket and never the stream built over it.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::task::{Context, Poll};

use super::WriteAll;
use crate::buf::{IoBuf, RecvBuf};
use crate::op::{self, SharedFd, SocketIo};

/// A connected stream socket of the current core, without a session.
pub(crate) struct Socket {
    pub(super) fd: SharedFd,
    pub(super) io: SocketIo,
}

impl Socket {
    /// Registers an accepted or connected socket with this core.
    pub(super) fn new(fd: OwnedFd) -> io::Result<Socket> {
        Socket::try_new(fd).map_err(|(_, e)| e)
    }

    /// [`new`](Self::new), giving the descriptor back when it fails.
    pub(super) fn try_new(fd: OwnedFd) -> Result<Socket, (OwnedFd, io::Error)> {
        let fd = SharedFd::new(fd);
        match op::register(&fd) {
            Ok(io) => Ok(Socket { fd, io }),
            // Nothing else holds it: it was never registered.
            Err(e) => match fd.into_owned() {
                Ok(fd) => Err((fd, e)),
                Err(_) => unreachable!("a socket that failed to register is shared"),
            },
        }
    }

    /// Leaves this core: forgets the socket's registration and returns
    /// its descriptor, for another core to register. The standing receive
    /// must have ended (see `op::detach`). Should an operation that ends
    /// later still hold the descriptor, a duplicate is returned, and the
    /// original closes when that operation ends.
    pub(super) fn into_fd(self) -> io::Result<OwnedFd> {
        let fd = self.fd.retain();
        drop(self);
        match std::rc::Rc::try_unwrap(fd) {
            Ok(fd) => Ok(fd),
            Err(shared) => shared.try_clone(),
        }
    }

    /// The socket, shared with the operations in flight.
    pub(crate) fn fd(&self) -> &SharedFd {
        &self.fd
    }

    /// The next bytes received, as they came; `Ok(None)` at end of stream.
    #[inline]
    pub(crate) fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<io::Result<Option<RecvBuf>>> {
        op::recv::poll_recv(&self.fd, &self.io, cx)
    }

    /// Sends all of `buf` as it is, resuming after partial sends.
    pub(crate) fn write_all<B: IoBuf>(&self, buf: B) -> WriteAll<'_, B> {
        WriteAll::plain(self, buf)
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        op::deregister(&self.fd, &self.io);
    }
}

impl AsRawFd for Socket {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}
