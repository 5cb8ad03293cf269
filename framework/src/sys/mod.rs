//! Thin, checked wrappers over the libc calls percore makes directly.
//!
//! Each libc call is an `unsafe` block of its own, at its call site, with
//! the reason it is sound; [`cvt`] turns a `-1` return into
//! `io::Error::last_os_error()`. The wrappers take descriptors as
//! [`BorrowedFd`], so the descriptor is open for the whole call.

use std::io;
use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

pub(crate) mod reuseport;
pub(crate) mod stack_sample;
mod unix;
pub(crate) use unix::{bind_raw, connect_raw, is_unix, peer_cred, unix_socket};

/// A libc return type whose failure value is `-1`.
pub(crate) trait MinusOne: Copy + PartialEq {
    const MINUS_ONE: Self;
}

impl MinusOne for libc::c_int {
    const MINUS_ONE: Self = -1;
}

impl MinusOne for libc::ssize_t {
    const MINUS_ONE: Self = -1;
}

/// Maps libc's `-1` failure return to the thread's `errno`.
pub(crate) fn cvt<T: MinusOne>(res: T) -> io::Result<T> {
    if res == T::MINUS_ONE {
        Err(io::Error::last_os_error())
    } else {
        Ok(res)
    }
}

/// A socket address in the kernel's representation, with its length.
#[derive(Clone, Copy)]
pub(crate) struct RawAddr {
    pub(crate) storage: libc::sockaddr_storage,
    pub(crate) len: libc::socklen_t,
}

impl RawAddr {
    /// An all-zero address with room for any family, for the kernel to fill.
    pub(crate) fn empty() -> RawAddr {
        // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
        let storage = unsafe { mem::zeroed() };
        RawAddr {
            storage,
            len: mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t,
        }
    }

    pub(crate) fn from_std(addr: SocketAddr) -> RawAddr {
        let mut raw = RawAddr::empty();
        match addr {
            SocketAddr::V4(v4) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: v4.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(v4.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
                unsafe { (&mut raw.storage as *mut _ as *mut libc::sockaddr_in).write(sin) };
                raw.len = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            }
            SocketAddr::V6(v6) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: v6.port().to_be(),
                    sin6_flowinfo: v6.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: v6.ip().octets(),
                    },
                    sin6_scope_id: v6.scope_id(),
                };
                // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
                unsafe { (&mut raw.storage as *mut _ as *mut libc::sockaddr_in6).write(sin6) };
                raw.len = mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
            }
        }
        raw
    }

    pub(crate) fn to_std(self) -> io::Result<SocketAddr> {
        match self.storage.ss_family as libc::c_int {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a sockaddr_in.
                let sin = unsafe { *(&self.storage as *const _ as *const libc::sockaddr_in) };
                let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                Ok(SocketAddr::V4(SocketAddrV4::new(
                    ip,
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a sockaddr_in6.
                let sin6 = unsafe { *(&self.storage as *const _ as *const libc::sockaddr_in6) };
                let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                Ok(SocketAddr::V6(SocketAddrV6::new(
                    ip,
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            libc::AF_UNIX => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a Unix socket has no IP address",
            )),
            family => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unsupported address family {family}"),
            )),
        }
    }

    pub(crate) fn as_ptr(&self) -> *const libc::sockaddr {
        &self.storage as *const _ as *const libc::sockaddr
    }

    pub(crate) fn as_mut_ptr(&mut self) -> *mut libc::sockaddr {
        &mut self.storage as *mut _ as *mut libc::sockaddr
    }
}

fn family(addr: &SocketAddr) -> libc::c_int {
    match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    }
}

/// A non-blocking, close-on-exec TCP socket for `addr`'s family.
pub(crate) fn tcp_socket(addr: &SocketAddr) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers and only creates a descriptor.
    let fd = cvt(unsafe {
        libc::socket(
            family(addr),
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: socket() just returned this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A non-blocking, close-on-exec UDP socket for `addr`'s family.
pub(crate) fn udp_socket(addr: &SocketAddr) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers and only creates a descriptor.
    let fd = cvt(unsafe {
        libc::socket(
            family(addr),
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: socket() just returned this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn set_int_opt(fd: BorrowedFd<'_>, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: `fd` is borrowed, so open for the call; the kernel reads
    // `size_of::<i32>()` bytes of `value`, a live local.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            &value as *const i32 as *const libc::c_void,
            mem::size_of::<i32>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

pub(crate) fn get_int_opt(fd: BorrowedFd<'_>, level: i32, name: i32) -> io::Result<i32> {
    let mut value: i32 = 0;
    let mut len = mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: `fd` is borrowed; the kernel writes at most `len` (4) bytes to
    // `value` and the length to `len`, both live, writable locals.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            &mut value as *mut i32 as *mut libc::c_void,
            &mut len,
        )
    })?;
    Ok(value)
}

pub(crate) fn bind(fd: BorrowedFd<'_>, addr: &SocketAddr) -> io::Result<()> {
    let raw = RawAddr::from_std(*addr);
    // SAFETY: `fd` is borrowed; `raw` holds a valid address of `raw.len`
    // bytes, live for the call.
    cvt(unsafe { libc::bind(fd.as_raw_fd(), raw.as_ptr(), raw.len) })?;
    Ok(())
}

pub(crate) fn listen(fd: BorrowedFd<'_>, backlog: i32) -> io::Result<()> {
    // SAFETY: `fd` is borrowed, so open for the call; listen(2) takes no
    // pointers.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), backlog) })?;
    Ok(())
}

pub(crate) fn local_addr(fd: BorrowedFd<'_>) -> io::Result<SocketAddr> {
    let mut raw = RawAddr::empty();
    // SAFETY: `fd` is borrowed; the kernel writes at most `raw.len` bytes (a
    // whole sockaddr_storage) to `raw.storage`, and the length to `raw.len`.
    cvt(unsafe { libc::getsockname(fd.as_raw_fd(), raw.as_mut_ptr(), &mut raw.len) })?;
    raw.to_std()
}

pub(crate) fn peer_addr(fd: BorrowedFd<'_>) -> io::Result<SocketAddr> {
    let mut raw = RawAddr::empty();
    // SAFETY: as for getsockname in `local_addr`.
    cvt(unsafe { libc::getpeername(fd.as_raw_fd(), raw.as_mut_ptr(), &mut raw.len) })?;
    raw.to_std()
}

/// `accept4` for the epoll path and for draining a listener during fd
/// exhaustion; the accepted socket is non-blocking and close-on-exec.
pub(crate) fn accept(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: `fd` is borrowed; with null address pointers accept4(2)
    // writes no memory of ours.
    let fd = cvt(unsafe {
        libc::accept4(
            fd.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    })?;
    // SAFETY: accept4 just returned this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn shutdown(fd: BorrowedFd<'_>, how: libc::c_int) -> io::Result<()> {
    // SAFETY: `fd` is borrowed, so open for the call; shutdown(2) takes no
    // pointers.
    cvt(unsafe { libc::shutdown(fd.as_raw_fd(), how) })?;
    Ok(())
}

/// Sends all of `bytes` without waiting (`MSG_DONTWAIT`, no `SIGPIPE`).
///
/// # Errors
///
/// `WouldBlock` when the socket's buffer is full before the end.
pub(crate) fn send_now(fd: BorrowedFd<'_>, bytes: &[u8]) -> io::Result<()> {
    if send_what_fits(fd, bytes)? < bytes.len() {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    Ok(())
}

/// Sends as much of `bytes` as the socket takes without waiting
/// (`MSG_DONTWAIT`, no `SIGPIPE`); how much went out.
///
/// # Errors
///
/// A send error other than a full buffer (`EPIPE`, `ECONNRESET`, ...).
pub(crate) fn send_what_fits(fd: BorrowedFd<'_>, bytes: &[u8]) -> io::Result<usize> {
    let mut sent = 0;
    while sent < bytes.len() {
        let rest = &bytes[sent..];
        // SAFETY: `fd` is borrowed; the kernel reads at most `rest.len()`
        // bytes from `rest`, live for the call.
        let res = cvt(unsafe {
            libc::send(
                fd.as_raw_fd(),
                rest.as_ptr().cast(),
                rest.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        });
        match res {
            Ok(n) => sent += n as usize,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

/// A non-blocking, close-on-exec eventfd.
/// A connected pair of Unix stream sockets (close-on-exec), for probes.
pub(crate) fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    socket_pair_flags(0)
}

/// A connected pair of non-blocking Unix stream sockets (close-on-exec).
pub(crate) fn socket_pair_nonblocking() -> io::Result<(OwnedFd, OwnedFd)> {
    socket_pair_flags(libc::SOCK_NONBLOCK)
}

fn socket_pair_flags(flags: libc::c_int) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors socketpair writes.
    cvt(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | flags,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    // SAFETY: socketpair just created both fds (it returned 0), and nothing
    // else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd(2) takes no pointers and only creates a descriptor.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
    // SAFETY: eventfd just returned this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds one to an eventfd's counter, which makes it readable.
pub(crate) fn eventfd_signal(fd: BorrowedFd<'_>) -> io::Result<()> {
    let one: u64 = 1;
    let bytes = (&one as *const u64).cast::<libc::c_void>();
    // SAFETY: `fd` is borrowed; the kernel reads the 8 bytes of `one`, a
    // live local.
    let written = cvt(unsafe { libc::write(fd.as_raw_fd(), bytes, 8) });
    match written {
        Ok(_) => Ok(()),
        // The counter is saturated: the reader has not run yet and will
        // still see the fd readable, which is all a signal needs.
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Resets an eventfd's counter; returns whether it had been signalled.
pub(crate) fn eventfd_drain(fd: BorrowedFd<'_>) -> bool {
    let mut value: u64 = 0;
    // SAFETY: `fd` is borrowed; the kernel writes at most 8 bytes to
    // `value`, a live, writable local.
    cvt(unsafe {
        libc::read(
            fd.as_raw_fd(),
            &mut value as *mut u64 as *mut libc::c_void,
            8,
        )
    })
    .is_ok()
}

/// The calling thread's CPU time (user + system).
pub(crate) fn thread_cpu_time() -> std::time::Duration {
    // SAFETY: timespec is plain old data; all-zero is a valid value.
    let mut ts: libc::timespec = unsafe { mem::zeroed() };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The process's open-file limit: `(soft, hard)`.
pub(crate) fn nofile_limit() -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit for the call's duration.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    Ok((lim.rlim_cur, lim.rlim_max))
}

/// Sets the process's soft open-file limit (at most the hard one).
pub(crate) fn set_nofile_soft(soft: u64, hard: u64) -> io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: `lim` is a valid rlimit for the call's duration.
    cvt(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) })?;
    Ok(())
}

/// An anonymous private read-write mapping, unmapped when dropped: the
/// memory of buffer rings and of registered buffers, which must not move.
pub(crate) struct Mmap {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

impl Mmap {
    /// Maps `len` bytes (at least one page), zeroed.
    pub(crate) fn new(len: usize) -> io::Result<Mmap> {
        let len = len.max(1);
        // SAFETY: an anonymous private mapping with no address hint has no
        // preconditions; the result is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = std::ptr::NonNull::new(ptr.cast())
            .ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Mmap { ptr, len })
    }

    /// The start of the mapping.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Gives the kernel back the whole pages inside `range` (bytes from
    /// the start; the partial pages at its ends are kept), which read as
    /// zeros from then on and take memory again only when written. Returns
    /// the bytes given back.
    ///
    /// # Safety
    ///
    /// - Nothing holds a reference into `range`;
    /// - nobody will read what was written there: a buffer in it is
    ///   free, or whoever writes it next (the kernel) writes before any
    ///   read.
    pub(crate) unsafe fn discard(&self, range: std::ops::Range<usize>) -> usize {
        let page = page_size();
        let start = range.start.next_multiple_of(page);
        let end = range.end.min(self.len) / page * page;
        if start >= end {
            return 0;
        }
        // SAFETY: `start..end` lies inside this private anonymous mapping
        // (`end <= len`); MADV_DONTNEED only swaps its pages for zero-fill
        // ones, which the caller's contract says nobody minds.
        let res = unsafe {
            libc::madvise(
                self.ptr.as_ptr().add(start).cast(),
                end - start,
                libc::MADV_DONTNEED,
            )
        };
        if res == 0 {
            end - start
        } else {
            0
        }
    }
}

/// The size of a memory page.
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|&s| s > 0)
        .unwrap_or(4096)
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping this value created and
        // nothing else unmaps.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Asks glibc's allocator to return the free pages of its heaps to the
/// kernel; whether it returned any. Other allocators keep their own
/// counsel: nothing to do there.
pub(crate) fn release_free_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only walks and trims glibc's own heaps,
        // under their locks; it frees nothing that is in use.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
