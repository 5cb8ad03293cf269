//! [`UdpSocket`]: a UDP socket of the current core, with owned-buffer
//! receives and sends on both backends.

use std::cell::Cell;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use crate::buf::{BufResult, IoBuf, IoBufMut};
pub use crate::op::datagram::batch::{Batch, MAX_BATCH};
pub use crate::op::datagram::recv::RecvMeta;
use crate::op::datagram::recv::RecvMsg;
use crate::op::datagram::send::{SendMsg, Target};
use crate::op::datagram::Spares;
use crate::op::{self, SharedFd, SocketIo};
use crate::sys::{self, RawAddr};

/// Most datagrams one GSO send may carry (the kernel's `UDP_MAX_SEGMENTS`
/// was 64 before Linux 6.10; 64 is accepted by every kernel with GSO).
pub const MAX_SEGMENTS: usize = 64;

/// A UDP socket owned by one core.
///
/// Every receive and send takes an owned buffer and gives it back with
/// the result ([`BufResult`]), as a stream's do: on io_uring the kernel
/// reads or writes it until the completion, after the future may have
/// been dropped. One datagram per call: a receive writes one datagram at
/// the buffer's start (up to the buffer's capacity) and says how long it
/// really was ([`RecvMeta`]); a send sends the buffer as one datagram.
///
/// Errors belong to the call that sees them and leave the socket working:
/// a connected socket whose peer answered an earlier datagram with ICMP
/// port unreachable fails its next receive or send once with
/// `ConnectionRefused`, and the call after it works again.
///
/// A receive future dropped in flight (a timeout, [`until_stopped`]) is
/// cancelled; a datagram that the kernel had already written into its
/// buffer is then lost, as UDP may lose any datagram.
///
/// [`until_stopped`]: crate::until_stopped
///
/// # Examples
///
/// ```no_run
/// use percore::net::UdpSocket;
///
/// # fn main() -> std::io::Result<()> {
/// percore::block_on(percore::Backend::Auto, async {
///     let socket = UdpSocket::bind("127.0.0.1:9000".parse().unwrap())?;
///     let mut buf = Vec::with_capacity(2048);
///     loop {
///         let (res, mut got) = socket.recv_from(buf).await;
///         let meta = res?;
///         if let Some(peer) = meta.peer {
///             let (res, back) = socket.send_to(got, peer).await;
///             res?;
///             got = back;
///         }
///         got.clear();
///         buf = got;
///     }
/// })?
/// # }
/// ```
pub struct UdpSocket {
    fd: SharedFd,
    io: SocketIo,
    spares: Spares,
    local_addr: SocketAddr,
    /// Whether the kernel takes `UDP_SEGMENT`; `None` until first asked.
    gso: Cell<Option<bool>>,
}

/// Creates a bound, non-blocking UDP socket. Usable from any thread; the
/// socket is registered with a core only by [`UdpSocket::from_fd`].
pub(crate) fn bind_udp(addr: SocketAddr, reuse_port: bool) -> io::Result<OwnedFd> {
    let fd = sys::udp_socket(&addr)?;
    if reuse_port {
        sys::set_int_opt(fd.as_fd(), libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    }
    sys::bind(fd.as_fd(), &addr)?;
    Ok(fd)
}

impl UdpSocket {
    /// Binds a socket on this core (no `SO_REUSEPORT`: binding fails if
    /// the port is taken).
    ///
    /// # Errors
    ///
    /// Socket or bind errors, e.g. `AddrInUse`, `AddrNotAvailable`.
    ///
    /// # Panics
    ///
    /// Outside a percore core.
    pub fn bind(addr: SocketAddr) -> io::Result<UdpSocket> {
        UdpSocket::from_fd(bind_udp(addr, false)?)
    }

    /// Binds a socket with `SO_REUSEPORT`: sockets of the same user bound
    /// so on one address share its datagrams, the kernel choosing one per
    /// sender (by a hash of the addresses), which is how a server gives
    /// each core its own socket.
    ///
    /// # Errors
    ///
    /// As [`bind`](Self::bind).
    pub fn bind_reuse_port(addr: SocketAddr) -> io::Result<UdpSocket> {
        UdpSocket::from_fd(bind_udp(addr, true)?)
    }

    /// Adopts a bound std socket on this core (made non-blocking).
    ///
    /// # Errors
    ///
    /// The socket's address cannot be read, or the socket cannot be
    /// registered with the core's driver.
    ///
    /// # Panics
    ///
    /// Outside a percore core.
    pub fn from_std(socket: std::net::UdpSocket) -> io::Result<UdpSocket> {
        socket.set_nonblocking(true)?;
        UdpSocket::from_fd(OwnedFd::from(socket))
    }

    /// Adopts a bound UDP socket on this core.
    pub(crate) fn from_fd(fd: OwnedFd) -> io::Result<UdpSocket> {
        let local_addr = sys::local_addr(fd.as_fd())?;
        let fd = SharedFd::new(fd);
        let io = op::register(&fd)?;
        Ok(UdpSocket {
            fd,
            io,
            spares: Spares::new(),
            local_addr,
            gso: Cell::new(None),
        })
    }

    /// The address the socket is bound to (with the port chosen, when 0
    /// was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The connected peer.
    ///
    /// # Errors
    ///
    /// `NotConnected` when the socket has no peer.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        sys::peer_addr(self.fd.as_fd())
    }

    /// Sets the peer: [`send`](Self::send) goes to it, only its datagrams
    /// are received, and its ICMP errors (port unreachable) are reported,
    /// as `ConnectionRefused`, by the next receive or send. Nothing goes
    /// over the network, so this does not wait.
    ///
    /// # Errors
    ///
    /// An address of the other family, or one that cannot be reached.
    pub fn connect(&self, addr: SocketAddr) -> io::Result<()> {
        let raw = RawAddr::from_std(addr);
        sys::connect_raw(self.fd.as_fd(), &raw)
    }

    /// Receives one datagram into `buf`, from its start, and says how
    /// long it was and who sent it. A datagram longer than the buffer's
    /// capacity is cut to it ([`RecvMeta::truncated`]); an empty one is
    /// received as one of length 0.
    ///
    /// A `Vec` gets the datagram's length as its own when that is longer
    /// than it was: pass it cleared, or read `meta.len` bytes.
    ///
    /// # Errors
    ///
    /// `ConnectionRefused` once after an ICMP port unreachable on a
    /// connected socket; the socket keeps working.
    pub async fn recv_from<B: IoBufMut>(&self, buf: B) -> BufResult<RecvMeta, B> {
        RecvMsg::new(&self.fd, &self.io, &self.spares, buf).await
    }

    /// [`recv_from`](Self::recv_from) on a connected socket: the kernel
    /// delivers only the peer's datagrams.
    pub async fn recv<B: IoBufMut>(&self, buf: B) -> BufResult<RecvMeta, B> {
        self.recv_from(buf).await
    }

    /// Sends `buf` as one datagram to `addr`; resolves to its length.
    ///
    /// # Errors
    ///
    /// `EMSGSIZE` (`InvalidInput` kind not guaranteed) for a buffer longer
    /// than a datagram can be (65,507 bytes over IPv4), `ENETUNREACH`,
    /// `ConnectionRefused` on a connected socket after an ICMP error.
    pub async fn send_to<B: IoBuf>(&self, buf: B, addr: SocketAddr) -> BufResult<usize, B> {
        let end = buf.bytes_init();
        let target = Target {
            addr: Some(RawAddr::from_std(addr)),
            segment: None,
            start: 0,
            end,
        };
        SendMsg::new(&self.fd, &self.io, &self.spares, buf, target).await
    }

    /// Sends `buf` as one datagram to the connected peer.
    ///
    /// # Errors
    ///
    /// As [`send_to`](Self::send_to); `DestinationAddrRequired` when the
    /// socket is not connected.
    pub async fn send<B: IoBuf>(&self, buf: B) -> BufResult<usize, B> {
        let end = buf.bytes_init();
        let target = Target {
            addr: None,
            segment: None,
            start: 0,
            end,
        };
        SendMsg::new(&self.fd, &self.io, &self.spares, buf, target).await
    }

    /// Receives into `batch` (emptied first) at least one datagram, and
    /// every one already queued behind it up to the batch's slots, in
    /// one system call where the kernel has them queued (`recvmmsg`).
    /// Resolves to the count received; read them with [`Batch::iter`].
    ///
    /// # Errors
    ///
    /// As [`recv_from`](Self::recv_from): an error that comes after some
    /// datagrams were taken is the next call's.
    pub async fn recv_batch(&self, batch: Batch) -> BufResult<usize, Batch> {
        crate::op::datagram::batch::recv(&self.fd, &self.io, batch).await
    }

    /// Sends every datagram queued in `batch` ([`Batch::push`]) that is
    /// not sent yet, as many per system call as the socket takes
    /// (`sendmmsg`), and resolves to the count sent by this call.
    ///
    /// # Errors
    ///
    /// The first datagram's error that stopped the batch:
    /// [`Batch::sent`] says how many went before it; send again to go on
    /// past it, or [`clear`](Batch::clear) the batch.
    pub async fn send_batch(&self, mut batch: Batch) -> BufResult<usize, Batch> {
        let mut sent = 0;
        while batch.sent() < batch.len() {
            let (res, back) = crate::op::datagram::batch::send(&self.fd, &self.io, batch).await;
            batch = back;
            match res {
                Ok(n) => sent += n,
                Err(e) => return (Err(e), batch),
            }
        }
        (Ok(sent), batch)
    }

    /// Sends `buf` as datagrams of `segment_size` bytes each (the last may
    /// be shorter) to `addr`, or to the connected peer when `None`.
    ///
    /// Where the kernel offers UDP GSO ([`gso_supported`](Self::gso_supported))
    /// this is one `sendmsg` with a `UDP_SEGMENT` control message, and
    /// the kernel cuts the datagrams; elsewhere it is one send per
    /// datagram. Resolves to the bytes sent, all of `buf` on success.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a segment size of 0 or above 65,507 bytes, or
    /// more than [`MAX_SEGMENTS`] datagrams; otherwise as
    /// [`send_to`](Self::send_to).
    pub async fn send_segments<B: IoBuf>(
        &self,
        buf: B,
        addr: Option<SocketAddr>,
        segment_size: usize,
    ) -> BufResult<usize, B> {
        let total = buf.bytes_init();
        let count = total.div_ceil(segment_size.max(1));
        if segment_size == 0 || segment_size > 65_507 || count > MAX_SEGMENTS {
            let e = io::Error::new(
                io::ErrorKind::InvalidInput,
                "a segmented send needs a segment size of 1 to 65,507 bytes and at most 64 segments",
            );
            return (Err(e), buf);
        }
        let addr = addr.map(RawAddr::from_std);
        if count > 1 && self.gso_supported() {
            let target = Target {
                addr,
                segment: Some(segment_size as u16),
                start: 0,
                end: total,
            };
            let (res, buf) = SendMsg::new(&self.fd, &self.io, &self.spares, buf, target).await;
            match res {
                // The device cannot checksum the segments: cut them here.
                Err(e) if e.raw_os_error() == Some(libc::EIO) => self.gso.set(Some(false)),
                res => return (res, buf),
            }
            return self.send_each(buf, addr, segment_size).await;
        }
        self.send_each(buf, addr, segment_size).await
    }

    /// One send per segment: GSO's fallback.
    async fn send_each<B: IoBuf>(
        &self,
        mut buf: B,
        addr: Option<RawAddr>,
        segment_size: usize,
    ) -> BufResult<usize, B> {
        let total = buf.bytes_init();
        let mut start = 0;
        loop {
            let end = (start + segment_size).min(total);
            let target = Target {
                addr,
                segment: None,
                start,
                end,
            };
            let (res, back) = SendMsg::new(&self.fd, &self.io, &self.spares, buf, target).await;
            buf = back;
            if let Err(e) = res {
                return (Err(e), buf);
            }
            start = end;
            if start >= total {
                return (Ok(total), buf);
            }
        }
    }

    /// Whether the kernel cuts segmented sends itself (UDP GSO, Linux
    /// 4.18+), probed once per socket.
    pub fn gso_supported(&self) -> bool {
        if let Some(known) = self.gso.get() {
            return known;
        }
        let known = sys::get_int_opt(self.fd.as_fd(), libc::SOL_UDP, libc::UDP_SEGMENT).is_ok();
        self.gso.set(Some(known));
        known
    }

    /// Makes segmented sends ([`send_segments`](Self::send_segments)) go
    /// out one datagram per send from now on, as where the kernel has no
    /// GSO: for a path whose device mishandles segmentation offload, or
    /// to compare the two.
    pub fn disable_gso(&self) {
        self.gso.set(Some(false));
    }

    /// Turns UDP GRO on or off: with it on, the kernel may join datagrams
    /// of one sender that arrive together into one receive, whose
    /// [`RecvMeta::segment_size`] says where to cut them (so the buffer
    /// should hold 64 KiB). Returns whether the kernel took it: `false`
    /// where it has no GRO for UDP (before Linux 5.0), and receives then
    /// bring one datagram each, as without it.
    ///
    /// # Errors
    ///
    /// Any other `setsockopt` failure.
    pub fn set_gro(&self, on: bool) -> io::Result<bool> {
        match sys::set_int_opt(self.fd.as_fd(), libc::SOL_UDP, libc::UDP_GRO, i32::from(on)) {
            Ok(()) => {
                self.spares.gro.set(on);
                Ok(true)
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Sets the kernel's receive buffer (`SO_RCVBUF`, which the kernel
    /// doubles and caps at `net.core.rmem_max`): the datagrams that may
    /// wait for a receive; those past it are dropped by the kernel.
    ///
    /// # Errors
    ///
    /// The `setsockopt` failure.
    pub fn set_recv_buffer_size(&self, bytes: usize) -> io::Result<()> {
        let bytes = i32::try_from(bytes).unwrap_or(i32::MAX);
        sys::set_int_opt(self.fd.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, bytes)
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        op::deregister(&self.fd, &self.io);
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdpSocket")
            .field("fd", &self.as_raw_fd())
            .field("local_addr", &self.local_addr)
            .finish()
    }
}
