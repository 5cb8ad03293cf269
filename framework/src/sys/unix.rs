//! Unix domain sockets: their addresses (filesystem paths and Linux's
//! abstract names) in the kernel's form, and their peers' credentials.

use std::io;
use std::mem;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use super::{cvt, RawAddr};

/// Room for a path in `sockaddr_un`, its terminating NUL included.
const PATH_ROOM: usize = 108;

/// A non-blocking, close-on-exec Unix stream socket.
pub(crate) fn unix_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers and only creates a descriptor.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: socket() just returned this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl RawAddr {
    /// A Unix address: `name` is a filesystem path, or (`abstract_name`)
    /// a name in the abstract namespace, which has no file.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a name that does not fit (107 bytes), an empty
    /// one, or a path with a NUL byte.
    pub(crate) fn unix(name: &[u8], abstract_name: bool) -> io::Result<RawAddr> {
        let invalid = |why: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, why.to_owned()));
        if name.is_empty() {
            return invalid("a Unix socket address cannot be empty");
        }
        if !abstract_name && name.contains(&0) {
            return invalid("a Unix socket path cannot contain a NUL byte");
        }
        // A path needs its NUL; an abstract name its leading NUL.
        if name.len() + 1 > PATH_ROOM {
            return invalid("a Unix socket address is at most 107 bytes");
        }
        // SAFETY: sockaddr_un is plain old data; all-zero is a valid value.
        let mut sun: libc::sockaddr_un = unsafe { mem::zeroed() };
        sun.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let start = usize::from(abstract_name);
        for (slot, &byte) in sun.sun_path[start..].iter_mut().zip(name) {
            *slot = byte as libc::c_char;
        }
        let header = mem::size_of::<libc::sa_family_t>();
        // A path's length counts its NUL; an abstract name's counts exactly
        // its bytes after the leading NUL (no terminator).
        let len = header + name.len() + 1;
        let mut raw = RawAddr::empty();
        // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_un.
        unsafe { (&mut raw.storage as *mut _ as *mut libc::sockaddr_un).write(sun) };
        raw.len = len as libc::socklen_t;
        Ok(raw)
    }
}

/// Binds `fd` to `addr`.
pub(crate) fn bind_raw(fd: BorrowedFd<'_>, addr: &RawAddr) -> io::Result<()> {
    // SAFETY: `fd` is borrowed; `addr` holds a valid address of `addr.len`
    // bytes, live for the call.
    cvt(unsafe { libc::bind(fd.as_raw_fd(), addr.as_ptr(), addr.len) })?;
    Ok(())
}

/// Connects `fd` to `addr` without waiting: a Unix connect completes at
/// once, or fails (`ECONNREFUSED`: no one listens; `EAGAIN`: the
/// listener's queue is full).
pub(crate) fn connect_raw(fd: BorrowedFd<'_>, addr: &RawAddr) -> io::Result<()> {
    // SAFETY: as for `bind_raw`; connect(2) copies the address.
    cvt(unsafe { libc::connect(fd.as_raw_fd(), addr.as_ptr(), addr.len) })?;
    Ok(())
}

/// `SO_PEERCRED`: who was at the other end when the socket connected.
pub(crate) fn peer_cred(fd: BorrowedFd<'_>) -> io::Result<libc::ucred> {
    if !is_unix(fd) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "peer credentials exist for Unix sockets only",
        ));
    }
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `fd` is borrowed; the kernel writes at most `len` bytes to
    // `cred`, a live local of that size, and the length to `len`.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    })?;
    Ok(cred)
}

/// Whether `fd` is a Unix domain socket.
pub(crate) fn is_unix(fd: BorrowedFd<'_>) -> bool {
    super::get_int_opt(fd, libc::SOL_SOCKET, libc::SO_DOMAIN).ok() == Some(libc::AF_UNIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_the_names_it_is_given() {
        assert!(RawAddr::unix(b"", false).is_err());
        assert!(RawAddr::unix(b"a\0b", false).is_err());
        assert!(RawAddr::unix(&[b'x'; 107], false).is_ok());
        assert!(RawAddr::unix(&[b'x'; 108], false).is_err());
        assert!(RawAddr::unix(&[b'x'; 107], true).is_ok());
        let header = mem::size_of::<libc::sa_family_t>();
        assert_eq!(
            RawAddr::unix(b"/a", false).unwrap().len as usize,
            header + 3
        );
        assert_eq!(RawAddr::unix(b"ab", true).unwrap().len as usize, header + 3);
    }
}
