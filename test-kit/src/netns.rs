//! A private network namespace for the calling test's thread, where a test
//! may set the network's sysctls without touching the machine's.
//!
//! `unshare(CLONE_NEWNET)` moves only the calling thread; the threads it
//! starts afterwards (the servers' cores, the clients) are created in the
//! new namespace. Its loopback starts down and is brought up here. Needs
//! `CAP_SYS_ADMIN` (root), as the tests run in CI.

use std::io;

/// Moves this thread into a new network namespace with loopback up and
/// `net.ipv4.tcp_migrate_req` set to `migrate_req`.
pub fn private_network(migrate_req: bool) -> io::Result<()> {
    // SAFETY: unshare takes no pointers; it changes the namespace of the
    // calling thread only (the test's own), before any socket of the test.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("a private network namespace needs root (CAP_SYS_ADMIN): {e}"),
        ));
    }
    loopback_up()?;
    // /proc/sys/net resolves to the namespace of the thread that opens it.
    std::fs::write(
        "/proc/sys/net/ipv4/tcp_migrate_req",
        if migrate_req { "1" } else { "0" },
    )
}

fn loopback_up() -> io::Result<()> {
    let sock = std::net::UdpSocket::bind("0.0.0.0:0")?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&sock);
    // SAFETY: ifreq is plain old data, for which all zeroes is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(b"lo") {
        *dst = src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq naming "lo", alive for the call; the
    // ioctl writes the interface's flags into its union.
    if unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFFLAGS just set the union's flags member.
    unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    // SAFETY: as above; the kernel reads the name and the flags.
    if unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
