//! A client connection from a chosen local address: the kernel's
//! `SO_REUSEPORT` hash of a connection depends on both ends, so a test
//! that needs connections the hash puts on one core reuses the local
//! ports it found there.

use std::io;
use std::mem;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Connects to `to` from `from` (IPv4), with `SO_REUSEADDR` so that a
/// port whose previous connection was reset can be bound again, and the
/// client timeouts of [`connect`](crate::connect).
///
/// # Errors
///
/// The bind's or the connect's, e.g. `AddrInUse` or `AddrNotAvailable`
/// while the 4-tuple is still in `TIME_WAIT`.
pub fn connect_from(from: SocketAddr, to: SocketAddr) -> io::Result<TcpStream> {
    let (SocketAddr::V4(from), SocketAddr::V4(to)) = (from, to) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "IPv4 only"));
    };
    // SAFETY: plain socket(2), no pointers; the result is checked below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by no one else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    // SAFETY: `fd` is open; the kernel reads `size_of::<c_int>()` bytes of
    // `one`, a live local.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let raw = |a: std::net::SocketAddrV4| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    let (local, remote) = (raw(from), raw(to));
    let len = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `fd` is open; the kernel reads `len` bytes of `local`, a
    // live sockaddr_in of that size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&local as *const libc::sockaddr_in).cast(),
            len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as for the bind, with `remote`; the socket is blocking, so
    // the call returns once connected or failed.
    let rc = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&remote as *const libc::sockaddr_in).cast(),
            len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let stream = TcpStream::from(fd);
    stream.set_read_timeout(Some(crate::IO_TIMEOUT))?;
    stream.set_write_timeout(Some(crate::IO_TIMEOUT))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}
