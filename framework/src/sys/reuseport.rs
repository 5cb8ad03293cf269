//! Attaching a classic BPF program to a `SO_REUSEPORT` group, and taking
//! it off: the kernel then runs the program on each new connection's
//! first packet to choose the group's listening socket (its return value
//! is the socket's index in the group; an index past the group's end
//! falls back to the address hash).
//!
//! The program is given as plain instructions; building one is the
//! caller's business (`server::steer::program`).

use std::io;
use std::mem;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `SO_ATTACH_REUSEPORT_CBPF` (Linux 4.5); sparc numbers its socket
/// options its own way.
#[cfg(not(target_arch = "sparc64"))]
const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 51;
/// `SO_DETACH_REUSEPORT_BPF` (Linux 5.14).
#[cfg(not(target_arch = "sparc64"))]
const SO_DETACH_REUSEPORT_BPF: libc::c_int = 68;
#[cfg(target_arch = "sparc64")]
const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 0x0035;
#[cfg(target_arch = "sparc64")]
const SO_DETACH_REUSEPORT_BPF: libc::c_int = 0x0047;

/// One classic BPF instruction (`struct sock_filter`).
pub(crate) type Insn = libc::sock_filter;

/// Attaches `program` to the `SO_REUSEPORT` group `fd` listens in,
/// replacing any program the group had. The kernel copies and checks the
/// program during the call.
///
/// # Errors
///
/// `EINVAL` for a program the kernel's checker refuses or a socket in no
/// group, `ENOMEM` for one over `optmem_max`, `EPERM` where a seccomp
/// filter forbids it.
pub(crate) fn attach_cbpf(fd: BorrowedFd<'_>, program: &[Insn]) -> io::Result<()> {
    let len = u16::try_from(program.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "BPF program too long"))?;
    let fprog = libc::sock_fprog {
        len,
        // The kernel only reads through it, during the call.
        filter: program.as_ptr().cast_mut(),
    };
    let optlen = mem::size_of::<libc::sock_fprog>() as libc::socklen_t;
    let optval = (&fprog as *const libc::sock_fprog).cast();
    // SAFETY: `fd` is open (borrowed); the kernel copies `fprog` (a live
    // local) and the `len` instructions of `program` before returning.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_ATTACH_REUSEPORT_CBPF,
            optval,
            optlen,
        )
    };
    super::cvt(rc)?;
    Ok(())
}

/// Takes the group's program off: the kernel goes back to choosing by
/// the address hash.
///
/// # Errors
///
/// `ENOENT` when the group had none (a caller may ignore it), `ENOPROTOOPT`
/// before Linux 5.14.
pub(crate) fn detach(fd: BorrowedFd<'_>) -> io::Result<()> {
    super::set_int_opt(fd, libc::SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, 0)
}
