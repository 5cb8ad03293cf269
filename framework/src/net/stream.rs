//! [`Stream`]: the I/O of a connected stream socket of the current core,
//! TCP or Unix. [`TcpStream`](super::TcpStream) and
//! [`UnixStream`](super::UnixStream) make one and dereference to it; a
//! [`Handler`](crate::Handler)'s [`Connection`](crate::Connection) is one,
//! whatever listener accepted it, so a handler serves both transports
//! unchanged.

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::secure::{Secure, SecureWrite};
use super::{PeerCred, Socket};
use crate::buf::{BufResult, IoBuf, IoBufs, RecvBuf};
use crate::op::{self, SharedFd, SocketIo};
use crate::sys;

/// A connected stream socket (TCP or Unix) owned by one core.
///
/// Reads hand out [`RecvBuf`] leases; writes take owned buffers and give
/// them back. All methods take `&self`, so a read and a write may wait at
/// the same time: two futures of one task, run together by
/// [`future::try_join`](crate::future::try_join) (whose module shows a
/// relay that copies both ways at once), or two tasks that share the
/// stream through an `Rc`. At most one read and one write at a time: a
/// second read would take the first one's wake-up, a second write could
/// interleave its bytes with the first's. Reads are cancel-safe: the
/// receive operation belongs to the stream, not to the `read()` future, so
/// dropping a read (say, on a timeout) loses no data. Dropping the stream
/// cancels what is in flight and closes the socket once the kernel is done
/// with it. A `Stream` cannot leave its core (it is `!Send`).
pub struct Stream {
    pub(super) socket: Socket,
    /// The peer's address, looked up once (a syscall) on first use. Boxed:
    /// inline it would be 32 bytes in every connection's task, used or not.
    peer: std::cell::OnceCell<Box<SocketAddr>>,
    /// The session, once a handshake made one (see [`crate::tls`]).
    pub(super) secure: Option<Box<dyn Secure>>,
    /// Bytes the next read returns before any from the socket: those a
    /// connection brought when it moved here from another core (see
    /// `net::moved`). Boxed, so a stream that never moved holds a
    /// null pointer for them.
    #[allow(clippy::box_collection)] // The box is the point: 8 bytes inline.
    pub(super) unread: Cell<Option<Box<Vec<u8>>>>,
}

impl Stream {
    /// Wraps an accepted or connected socket; registers it with this core.
    pub(crate) fn from_fd(fd: OwnedFd) -> io::Result<Stream> {
        Ok(Stream::with_socket(Socket::new(fd)?))
    }

    /// A stream over `socket`, registered already.
    pub(super) fn with_socket(socket: Socket) -> Stream {
        Stream {
            socket,
            peer: std::cell::OnceCell::new(),
            secure: None,
            unread: Cell::new(None),
        }
    }

    /// The session, if the stream has one.
    pub(crate) fn secure(&self) -> Option<&dyn Secure> {
        self.secure.as_deref()
    }

    /// Makes every later read and write go through `session`.
    pub(crate) fn set_secure(&mut self, session: Box<dyn Secure>) {
        self.secure = Some(session);
    }

    /// The socket, shared with the operations in flight.
    pub(crate) fn fd(&self) -> &SharedFd {
        &self.socket.fd
    }

    /// The socket's registration with its core.
    pub(crate) fn io(&self) -> &SocketIo {
        &self.socket.io
    }

    /// Receives the next bytes; `Ok(None)` once the peer has closed its
    /// write side (end of stream).
    pub fn read(&self) -> Read<'_> {
        Read { stream: self }
    }

    /// Sends some of `buf`; returns how many bytes went out (on a TLS
    /// stream, all of them: records are sent whole).
    pub async fn write<B: IoBuf>(&self, buf: B) -> BufResult<usize, B> {
        if self.secure.is_some() {
            let len = buf.bytes_init();
            let (res, buf) = self.write_all(buf).await;
            return (res.map(|()| len), buf);
        }
        op::send::Send::new(&self.socket.fd, &self.socket.io, buf, 0).await
    }

    /// Sends all of `buf`, resuming after partial sends.
    ///
    /// # Errors
    ///
    /// The first send error (`EPIPE`, `ECONNRESET`, …; `SIGPIPE` is never
    /// raised), or `WriteZero` if the kernel accepted nothing. A peer that
    /// reset gives `ConnectionReset` to the first operation that meets the
    /// reset and `BrokenPipe` to later sends; which one a write meets
    /// depends on the backend (io_uring keeps a receive armed, which may
    /// meet it first), so treat both as "the peer is gone".
    pub fn write_all<B: IoBuf>(&self, buf: B) -> WriteAll<'_, B> {
        let (tls, len) = match self.secure() {
            None => (None, buf.bytes_init()),
            // Nothing of `buf` itself to send: the poll goes straight to
            // its end, where the records are sent.
            Some(session) => (
                Some(secure_write(
                    &self.socket,
                    session,
                    &mut std::iter::once(buf.as_bytes()),
                )),
                0,
            ),
        };
        WriteAll {
            socket: &self.socket,
            len,
            send: op::send::Send::new(&self.socket.fd, &self.socket.io, buf, 0),
            sent: 0,
            tls,
        }
    }

    /// Sends all the bytes of several buffers, in order, as gathered
    /// sends (`sendmsg`): a header and a body go out together without
    /// being copied into one buffer. Resumes after partial sends, which
    /// may end inside any buffer; the buffers come back, as with
    /// [`write_all`](Stream::write_all).
    ///
    /// `bufs` is an array or `Vec` of one buffer type, or a tuple of two to
    /// four buffers of any types (see [`IoBufs`]). Empty buffers are
    /// skipped, and an empty collection completes at once. One send
    /// carries at most 1,024 buffers (the kernel's `UIO_MAXIOV`): more are
    /// sent in several, in order, as if the first sends had been partial.
    /// Dropping the future mid-send is safe (the kernel keeps reading valid
    /// memory until it is done), but how much of the data went out is then
    /// unknown, as with `write_all`.
    ///
    /// In steady state a write of up to 64 buffers allocates nothing: the
    /// kernel's message header and iovec array come from a per-core pool.
    /// Registered buffers ([`FixedBuf`](crate::buf::FixedBuf)) are sent as
    /// plain memory here.
    ///
    /// # Errors
    ///
    /// As [`write_all`](Stream::write_all): the first send error, or
    /// `WriteZero` if the kernel accepted nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::Read;
    ///
    /// use percore::{net::TcpStream, Backend};
    ///
    /// /// Sends a length-prefixed frame: the prefix and the body go out
    /// /// together, and the body comes back to be reused.
    /// async fn send_frame(conn: &TcpStream, body: Vec<u8>) -> std::io::Result<Vec<u8>> {
    ///     let prefix = u32::try_from(body.len()).expect("a frame under 4 GiB");
    ///     let prefix = prefix.to_be_bytes().to_vec();
    ///     let (res, (_prefix, body)) = conn.write_all_vectored((prefix, body)).await;
    ///     res.map(|()| body)
    /// }
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    /// let addr = listener.local_addr()?;
    /// let peer = std::thread::spawn(move || -> std::io::Result<Vec<u8>> {
    ///     let mut frame = Vec::new();
    ///     listener.accept()?.0.read_to_end(&mut frame)?;
    ///     Ok(frame)
    /// });
    /// let body = percore::block_on(Backend::Auto, async move {
    ///     let conn = TcpStream::connect(addr).await?;
    ///     send_frame(&conn, b"hello".to_vec()).await
    /// })??;
    /// assert_eq!(body, b"hello");
    /// assert_eq!(peer.join().expect("peer thread")?, b"\0\0\0\x05hello");
    /// # Ok(())
    /// # }
    /// ```
    pub fn write_all_vectored<B: IoBufs>(&self, bufs: B) -> WriteAllVectored<'_, B> {
        let tls = match self.secure() {
            None => None,
            Some(session) => {
                let mut chunks = (0..bufs.count()).map(|i| bufs.bytes(i));
                Some(secure_write(&self.socket, session, &mut chunks))
            }
        };
        WriteAllVectored {
            send: op::send_msg::SendMsg::new(&self.socket.fd, &self.socket.io, bufs),
            sent: 0,
            tls,
        }
    }

    /// Sends up to `len` bytes of `file` from its offset `pos` with
    /// `sendfile`: the kernel moves the file's page-cache pages to the
    /// socket with no copy through user memory (about 0.4× the sender's
    /// CPU of a read and a send, `benches/src/bin/send_paths.rs`). Returns
    /// how many bytes went out: fewer than `len` when the socket took
    /// fewer (call again from `pos + n`), zero at the end of the file.
    ///
    /// The call reads the file's pages itself, on the core: a page not in
    /// the page cache is read from the disk while the core waits. Check
    /// with [`File::cached`](crate::fs::File::cached) first, and read a
    /// cold range with [`File::read_at`](crate::fs::File::read_at), which
    /// does not block the core.
    ///
    /// # Errors
    ///
    /// `Unsupported` on a TLS stream, whose bytes must be encrypted (read
    /// them and [`write_all`](Self::write_all) them instead); otherwise as
    /// a send (`BrokenPipe`, `ConnectionReset`, ...).
    pub async fn send_file(
        &self,
        file: &crate::fs::File,
        pos: u64,
        len: usize,
    ) -> io::Result<usize> {
        if self.secure.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "sendfile cannot encrypt: a TLS stream sends files with reads and writes",
            ));
        }
        // SAFETY: the future borrows `file`, which keeps its fd open.
        unsafe {
            op::send_file::SendFile::new(
                &self.socket.fd,
                &self.socket.io,
                file.as_raw_fd(),
                pos,
                len,
            )
        }
        .await
    }

    /// Shuts down the write side: the peer reads end of stream after the
    /// bytes already sent.
    /// On a TLS stream `close_notify` goes first, as far as the socket
    /// takes it without waiting.
    pub fn shutdown_write(&self) -> io::Result<()> {
        if let Some(session) = self.secure() {
            session.close(&self.socket)?;
        }
        sys::shutdown(self.socket.fd.as_fd(), libc::SHUT_WR)
    }

    /// Sets `SO_LINGER`; `Some(0)` makes `close` send a reset. The kernel
    /// counts whole seconds: a part of a second counts as one, so that a
    /// short linger is not taken for a reset.
    pub fn set_linger(&self, linger: Option<std::time::Duration>) -> io::Result<()> {
        let seconds = linger.map_or(0, |d| {
            let whole = d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0));
            i32::try_from(whole).unwrap_or(i32::MAX)
        });
        let value = libc::linger {
            l_onoff: i32::from(linger.is_some()),
            l_linger: seconds,
        };
        // SAFETY: `self.fd` keeps the socket open; the kernel reads
        // `size_of::<linger>()` bytes of `value`, a live local.
        sys::cvt(unsafe {
            libc::setsockopt(
                self.socket.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                &value as *const libc::linger as *const libc::c_void,
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        })?;
        Ok(())
    }

    /// The remote IP address and port (looked up once, then cached).
    ///
    /// # Errors
    ///
    /// `Unsupported` on a Unix socket, whose peer has no IP address (see
    /// [`peer_cred`](Self::peer_cred)); `NotConnected` once the peer left.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        if let Some(addr) = self.peer.get() {
            return Ok(**addr);
        }
        let addr = sys::peer_addr(self.socket.fd.as_fd())?;
        let _ = self.peer.set(Box::new(addr));
        Ok(addr)
    }

    /// The local IP address and port.
    ///
    /// # Errors
    ///
    /// `Unsupported` on a Unix socket.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        sys::local_addr(self.socket.fd.as_fd())
    }

    /// The process, user and group at the other end of a Unix socket, as
    /// they were when it connected (`SO_PEERCRED`): who is calling, for a
    /// service that admits some local users and not others.
    ///
    /// # Errors
    ///
    /// `Unsupported` on a TCP socket.
    pub fn peer_cred(&self) -> io::Result<PeerCred> {
        sys::peer_cred(self.socket.fd.as_fd()).map(PeerCred::from)
    }

    /// Whether this is a Unix domain socket (else TCP).
    pub fn is_unix(&self) -> bool {
        sys::is_unix(self.socket.fd.as_fd())
    }

    /// Closes the connection (the same as dropping it).
    pub fn close(self) {}
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        self.socket.fd.as_raw_fd()
    }
}

/// Starts a secured write. Out of line, as the secured read: the plain
/// write it branches from stays small enough to inline.
#[cold]
#[inline(never)]
fn secure_write<'a>(
    socket: &'a Socket,
    session: &'a dyn Secure,
    chunks: &mut dyn Iterator<Item = &[u8]>,
) -> Box<dyn SecureWrite + 'a> {
    session.write(socket, chunks)
}

/// Carried bytes (see `unread`) as a receive lease of this core's pool
/// (freed, not kept, when dropped: the pool keeps only its own size);
/// `None` when there are none.
#[cold]
#[inline(never)]
fn unread_buf(bytes: Vec<u8>) -> Option<RecvBuf> {
    if bytes.is_empty() {
        return None;
    }
    let len = bytes.len();
    let pool = crate::driver::current::with_io(|io| io.pool.clone());
    Some(RecvBuf::from_pool(pool, bytes.into_boxed_slice(), len))
}

/// A secured stream's read.
#[cold]
#[inline(never)]
fn secure_read(
    socket: &Socket,
    session: &dyn Secure,
    cx: &mut Context<'_>,
) -> Poll<io::Result<Option<RecvBuf>>> {
    session.poll_read(socket, cx)
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("fd", &self.socket.fd.as_raw_fd())
            .finish()
    }
}

/// The future of [`Stream::read`].
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Read<'a> {
    stream: &'a Stream,
}

impl Future for Read<'_> {
    type Output = io::Result<Option<RecvBuf>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let stream = self.stream;
        if let Some(unread) = stream.unread.take() {
            if let Some(buf) = unread_buf(*unread) {
                return Poll::Ready(Ok(Some(buf)));
            }
        }
        if let Some(session) = stream.secure() {
            return secure_read(&stream.socket, session, cx);
        }
        op::recv::poll_recv(&stream.socket.fd, &stream.socket.io, cx)
    }
}

/// The future of [`Stream::write_all`], written out by hand: a server
/// awaits one per response, and an `async fn` would add a layer of state
/// machine to every poll.
#[must_use = "futures do nothing unless polled"]
pub struct WriteAll<'a, B: IoBuf> {
    socket: &'a Socket,
    send: op::send::Send<'a, B>,
    sent: usize,
    len: usize,
    /// On a TLS stream, the records sent instead; `send` only keeps the
    /// caller's buffer.
    tls: Option<Box<dyn SecureWrite + 'a>>,
}

impl<'a, B: IoBuf> WriteAll<'a, B> {
    /// A write of `buf` as it is, on the socket: how [`Socket::write_all`]
    /// sends a session's records.
    pub(super) fn plain(socket: &'a Socket, buf: B) -> WriteAll<'a, B> {
        WriteAll {
            socket,
            len: buf.bytes_init(),
            send: op::send::Send::new(&socket.fd, &socket.io, buf, 0),
            sent: 0,
            tls: None,
        }
    }

    /// Bytes the kernel has taken so far (on a TLS stream, of the
    /// records): a caller that bounds the write by time can count from
    /// its last progress rather than its start.
    pub fn sent(&self) -> usize {
        self.tls.as_ref().map_or(self.sent, |tls| tls.sent())
    }
}

impl<B: IoBuf> Future for WriteAll<'_, B> {
    type Output = BufResult<(), B>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            if this.sent >= this.len {
                if this.tls.is_some() {
                    return this.poll_tls(cx);
                }
                return match this.send.take_buf() {
                    Some(buf) => Poll::Ready((Ok(()), buf)),
                    None => panic!("WriteAll polled after completion"),
                };
            }
            let (res, buf) = std::task::ready!(Pin::new(&mut this.send).poll(cx));
            match res {
                Ok(0) => return Poll::Ready((Err(io::ErrorKind::WriteZero.into()), buf)),
                Ok(n) => {
                    this.sent += n;
                    if this.sent >= this.len {
                        return Poll::Ready((Ok(()), buf));
                    }
                    let socket = this.socket;
                    this.send = op::send::Send::new(&socket.fd, &socket.io, buf, this.sent);
                }
                Err(e) => return Poll::Ready((Err(e), buf)),
            }
        }
    }
}

impl<B: IoBuf> WriteAll<'_, B> {
    /// A TLS stream's write: the records' send, then the caller's buffer
    /// back. Out of line and given only `self`: the plain write is
    /// inlined into a server's connection loop, which any more code here
    /// made slower by 40 to 60 instructions per HTTP request.
    #[cold]
    #[inline(never)]
    fn poll_tls(&mut self, cx: &mut Context<'_>) -> Poll<BufResult<(), B>> {
        let res = match &mut self.tls {
            Some(tls) => std::task::ready!(tls.poll(cx)),
            None => Ok(()),
        };
        match self.send.take_buf() {
            Some(buf) => Poll::Ready((res, buf)),
            None => panic!("WriteAll polled after completion"),
        }
    }
}

impl<B: IoBuf> fmt::Debug for WriteAll<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteAll")
            .field("sent", &self.sent)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// The future of [`Stream::write_all_vectored`].
#[must_use = "futures do nothing unless polled"]
pub struct WriteAllVectored<'a, B: IoBufs> {
    send: op::send_msg::SendMsg<'a, B>,
    sent: usize,
    /// As for [`WriteAll`].
    tls: Option<Box<dyn SecureWrite + 'a>>,
}

impl<B: IoBufs> Future for WriteAllVectored<'_, B> {
    type Output = BufResult<(), B>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(tls) = &mut this.tls {
            let res = std::task::ready!(tls.poll(cx));
            return match this.send.take_bufs() {
                Some(bufs) => Poll::Ready((res, bufs)),
                None => panic!("WriteAllVectored polled after completion"),
            };
        }
        let res = loop {
            if this.send.is_done() {
                break Ok(());
            }
            match std::task::ready!(this.send.poll_send(cx)) {
                Ok(0) => break Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => this.sent += n,
                Err(e) => break Err(e),
            }
        };
        match this.send.take_bufs() {
            Some(bufs) => Poll::Ready((res, bufs)),
            None => panic!("WriteAllVectored polled after completion"),
        }
    }
}

impl<B: IoBufs> fmt::Debug for WriteAllVectored<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteAllVectored")
            .field("sent", &self.sent)
            .finish_non_exhaustive()
    }
}
