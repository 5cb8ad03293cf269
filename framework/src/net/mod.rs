//! Sockets with owned-buffer, completion-style I/O on both backends.
//!
//! [`Stream`] is the I/O every connected stream socket has (reads that lend
//! buffers, owned-buffer writes, gathered writes, half-close). A
//! [`TcpStream`] or a [`UnixStream`] is a `Stream` made over its transport
//! (it dereferences to one and turns into one), with what only that
//! transport has. A [`Handler`](crate::Handler) is handed a `Stream` (its
//! [`Connection`](crate::Connection)) whichever listener accepted it, so
//! the same handler serves TCP and Unix clients unchanged. A stream that
//! wraps another (TLS) takes a `Stream` in and serves the same kind of
//! handler.
//!
//! [`UdpSocket`] is the datagram socket: one datagram per owned-buffer
//! receive or send, with truncation reported and GSO and GRO where the
//! kernel offers them.

mod behind;
mod endpoint;
mod listener;
pub(crate) mod moved;
pub(crate) mod secure;
mod socket;
mod stream;
mod tcp;
mod udp;
mod unix;
mod unix_listener;

pub use behind::WrittenBehind;
pub use endpoint::Endpoint;
pub(crate) use listener::Acceptor;
pub use listener::TcpListener;
pub(crate) use listener::{bind_probe, bind_probe_shared, bind_reuseport};
pub(crate) use socket::Socket;
pub use stream::{Read, Stream, WriteAll, WriteAllVectored};
pub use tcp::TcpStream;
pub(crate) use udp::bind_udp;
pub use udp::{Batch, RecvMeta, UdpSocket, MAX_BATCH, MAX_SEGMENTS};
pub use unix::{PeerCred, UnixAddr, UnixStream};
pub use unix_listener::UnixListener;
pub(crate) use unix_listener::{bind as bind_unix, SocketFile, UnixOptions};
