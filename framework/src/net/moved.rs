//! A stream leaving its core and arriving at another: [`Detached`], the
//! form in which it crosses threads.
//!
//! Detaching ends what the core has in flight on the socket (see
//! `op::detach`) and keeps, in order, every byte received and not yet
//! read: the bytes the stream's reads had not handed out, the bytes the
//! kernel had queued for it, and for a TLS stream its session with the
//! records not yet decrypted. Attaching registers the descriptor with
//! the new core; the new stream's reads return the plaintext carried
//! first, then read the socket, so no byte is lost, duplicated or
//! reordered. A detached stream that is never attached closes its
//! socket when dropped.

use std::future::poll_fn;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::secure::MovingSecure;
use super::{Socket, Stream};

/// A stream between two cores: its descriptor, what it carries, and its
/// session. `Send`, unlike the stream.
pub(crate) struct Detached {
    fd: OwnedFd,
    /// Plaintext that the next reads return first.
    unread: Vec<u8>,
    session: Option<Box<dyn MovingSecure>>,
}

impl Stream {
    /// Takes the stream off this core (see the module docs). Fails, giving
    /// the stream back unchanged but for its standing receive (armed again
    /// by the next read), when a TLS write's records are on their way or
    /// the socket cannot leave the core's epoll set; and without the
    /// stream, closed, in the one case where it cannot be kept: the
    /// process is out of descriptors for the duplicate that an operation
    /// still holding the socket makes necessary.
    pub(crate) async fn detach(self) -> Result<Detached, (Option<Stream>, io::Error)> {
        if self.secure().is_some_and(|session| !session.can_move()) {
            return Err((
                Some(self),
                io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "a TLS write is on its way: the session cannot move now",
                ),
            ));
        }
        let mut received = Vec::new();
        let ended = poll_fn(|cx| {
            crate::op::detach::poll_detach(self.socket.fd(), &self.socket.io, &mut received, cx)
        })
        .await;
        if let Err(e) = ended {
            // What was taken out of the kernel's queue is read first.
            self.push_unread(received);
            return Err((Some(self), e));
        }
        let Stream {
            socket,
            secure,
            unread,
            ..
        } = self;
        let mut carried = unread.take().map_or_else(Vec::new, |bytes| *bytes);
        let session = match secure {
            Some(session) => Some(session.into_moving(received)),
            None => {
                carried.append(&mut received);
                None
            }
        };
        Ok(Detached {
            fd: socket.into_fd().map_err(|e| (None, e))?,
            unread: carried,
            session,
        })
    }

    /// Puts `bytes` back in front of what the next reads return.
    pub(crate) fn push_unread(&self, mut bytes: Vec<u8>) {
        if let Some(rest) = self.unread.take() {
            bytes.extend_from_slice(&rest);
        }
        if !bytes.is_empty() {
            self.unread.set(Some(Box::new(bytes)));
        }
    }
}

impl Detached {
    /// Puts `bytes` in front of the plaintext carried: bytes the
    /// connection's handler had read and not consumed.
    pub(crate) fn push_unread(&mut self, mut bytes: Vec<u8>) {
        if !bytes.is_empty() {
            bytes.append(&mut self.unread);
            self.unread = bytes;
        }
    }

    /// Registers the stream with this core. On failure the detached
    /// stream comes back whole, to be taken elsewhere.
    pub(crate) fn attach(self) -> Result<Stream, (Detached, io::Error)> {
        let Detached {
            fd,
            unread,
            session,
        } = self;
        let socket = match Socket::try_new(fd) {
            Ok(socket) => socket,
            Err((fd, e)) => {
                return Err((
                    Detached {
                        fd,
                        unread,
                        session,
                    },
                    e,
                ))
            }
        };
        let mut stream = Stream::with_socket(socket);
        if let Some(session) = session {
            stream.set_secure(session.attach());
        }
        stream.push_unread(unread);
        Ok(stream)
    }

    /// The descriptor's number, for logs.
    pub(crate) fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }
}

impl std::fmt::Debug for Detached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detached")
            .field("fd", &self.fd.as_raw_fd())
            .field("unread", &self.unread.len())
            .field("tls", &self.session.is_some())
            .finish()
    }
}
