//! One file per kernel operation, each implementing it for both backends:
//! an SQE plus a completion slot on io_uring, readiness plus a
//! non-blocking syscall on epoll. Each supplies only what is its own;
//! [`lifecycle`] owns the rest (the budget, the core's ownership, the
//! completion key, the drop in flight).

pub(crate) mod accept;
pub(crate) mod connect;
pub(crate) mod datagram;
pub(crate) mod detach;
pub(crate) mod file;
pub(crate) mod lifecycle;
pub(crate) mod msg_space;
pub(crate) mod recv;
pub(crate) mod send;
pub(crate) mod send_behind;
pub(crate) mod send_file;
pub(crate) mod send_msg;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::rc::Rc;

use crate::driver::epoll::SourceKey;
use crate::driver::uring::OpKey;

/// A socket's descriptor: shared (the `Rc`) with the operations that must
/// keep it open, and its number copied out, so that issuing an operation
/// reads the socket's own memory and not the `Rc`'s separate allocation,
/// which at a thousand connections per core is a cache miss per request.
#[derive(Debug)]
pub(crate) struct SharedFd {
    raw: RawFd,
    owned: Rc<OwnedFd>,
}

impl SharedFd {
    pub(crate) fn new(fd: OwnedFd) -> SharedFd {
        SharedFd {
            raw: fd.as_raw_fd(),
            owned: Rc::new(fd),
        }
    }

    /// A reference that keeps the descriptor open while the kernel uses it.
    pub(crate) fn retain(&self) -> Rc<OwnedFd> {
        self.owned.clone()
    }

    /// The descriptor, if nothing else holds it (else the shared one).
    pub(crate) fn into_owned(self) -> Result<OwnedFd, Rc<OwnedFd>> {
        Rc::try_unwrap(self.owned)
    }
}

impl AsRawFd for SharedFd {
    fn as_raw_fd(&self) -> RawFd {
        self.raw
    }
}

impl AsFd for SharedFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.owned.as_fd()
    }
}

/// A socket's per-backend I/O state, fixed when the socket is created.
///
/// `core` is the unique id of the core whose driver the socket's keys
/// (operation slots, epoll source) belong to. A socket can leave that core
/// on its thread (the output of one `block_on`, used in the next): another
/// core's driver must then refuse it, or its stale keys would name other
/// sockets' operations.
pub(crate) enum SocketIo {
    /// The socket's standing receive (or accept) operation, if armed.
    Uring {
        core: usize,
        standing: std::cell::Cell<Standing>,
        /// The next receive is a single-shot into a pool buffer rather than
        /// the multishot (see [`recv`] for when).
        pool_reads: std::cell::Cell<bool>,
        /// The slot of the socket's writes behind, or
        /// [`send_behind::NONE`] (see [`send_behind`]). A `u32`: the enum
        /// stays 32 bytes.
        behind: std::cell::Cell<u32>,
    },
    Epoll {
        core: usize,
        source: SourceKey,
    },
}

impl SocketIo {
    /// Whether `core` is the one this socket was registered with.
    pub(crate) fn belongs_to(&self, core: &crate::driver::current::Io) -> bool {
        let (SocketIo::Uring { core: id, .. } | SocketIo::Epoll { core: id, .. }) = self;
        *id == core.id
    }
}

/// The error of an operation on a socket outside the core that opened it.
pub(crate) fn foreign_core() -> std::io::Error {
    std::io::Error::other("socket used outside the core that opened it")
}

/// The operation a socket keeps armed between reads: it belongs to the
/// socket, not to the future that polls it, so dropping a read future
/// loses no data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    Idle,
    Multishot(OpKey),
    Single(OpKey),
}

/// Registers a new socket with the current core's driver.
pub(crate) fn register(fd: &SharedFd) -> std::io::Result<SocketIo> {
    crate::driver::current::with_io(|core| match &mut *core.driver.borrow_mut() {
        crate::driver::Driver::Uring(_) => Ok(SocketIo::Uring {
            core: core.id,
            standing: std::cell::Cell::new(Standing::Idle),
            pool_reads: std::cell::Cell::new(false),
            behind: std::cell::Cell::new(send_behind::NONE),
        }),
        crate::driver::Driver::Epoll(d) => Ok(SocketIo::Epoll {
            core: core.id,
            source: d.register(fd.as_fd())?,
        }),
    })
}

/// Cancels the standing operation (uring) or forgets the source (epoll)
/// when the socket is dropped. On io_uring the descriptor stays open until
/// the operations queued so far are submitted: a send queued by a future
/// that was leaked (`mem::forget`) must not reach another socket that
/// reuses the number.
pub(crate) fn deregister(fd: &SharedFd, io: &SocketIo) {
    let leftover = lifecycle::try_on_core(io, |side| match side {
        lifecycle::Side::Uring { d, standing, .. } => {
            let leftover = match standing.replace(Standing::Idle) {
                Standing::Idle => None,
                Standing::Multishot(key) | Standing::Single(key) => {
                    d.release(key, crate::driver::uring::Retained::None)
                }
            };
            // A write behind still out is cancelled: its writer let go of
            // the socket without waiting for it.
            let behind = match io {
                SocketIo::Uring { behind, .. } => {
                    send_behind::slot(behind.replace(send_behind::NONE))
                        .and_then(|key| d.release_behind(key, fd.as_raw_fd()))
                }
                SocketIo::Epoll { .. } => None,
            };
            d.keep_open_until_submitted(fd.retain());
            (leftover, behind)
        }
        lifecycle::Side::Epoll { d, source } => {
            d.deregister(source);
            (None, None)
        }
    });
    // Dropped outside the driver's borrow: a pool buffer's drop may reach
    // the core's I/O.
    drop(leftover);
}

/// Converts a negative completion result into an error.
pub(crate) fn cqe_result(res: i32) -> std::io::Result<u32> {
    if res < 0 {
        Err(std::io::Error::from_raw_os_error(-res))
    } else {
        Ok(res as u32)
    }
}
