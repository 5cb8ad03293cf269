//! The kernel interface of one core, behind one contract.
//!
//! Two drivers implement it: `uring` (io_uring: completions, multishot
//! accept and receive, a provided-buffer ring) and `epoll` (edge-triggered
//! readiness plus speculative non-blocking syscalls). Nothing above this
//! module names `io_uring` or `epoll_*`; the [`Backend`] is chosen once per
//! core at start-up and every operation in `op/` branches on it once.
//!
//! # Why an enum, not a generic executor
//!
//! A generic `Executor<B>` would monomorphise every handler per backend and
//! put a type parameter on every public I/O type. A two-variant enum whose
//! variant never changes for the life of a thread is a perfectly predicted
//! branch per operation, and keeps `Stream` and `Handler` free of type
//! parameters for the people who write handlers.
//!
//! # The contract
//!
//! - `park(timeout)`: the loop's single trip to the kernel per turn: submit
//!   what is queued, wait up to `timeout` (zero: do not wait) for I/O or a
//!   notification on the core's eventfd, and wake the tasks whose I/O is
//!   ready.
//! - Resources the kernel may touch while an operation is in flight are
//!   owned by the driver until the kernel is done (uring: the operation
//!   table; epoll: nothing is in flight between syscalls).
//! - `drain(deadline)` at shutdown: cancel and wait out everything in
//!   flight before the driver is dropped.

pub(crate) mod current;
pub(crate) mod epoll;
pub(crate) mod msg_space;
pub(crate) mod pool;
pub(crate) mod uring;

use std::time::{Duration, Instant};

pub(crate) use crate::backend::Backend;

/// One per core, in a `RefCell`: the size difference of the variants
/// costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Driver {
    Uring(uring::Driver),
    Epoll(epoll::Driver),
}

impl Driver {
    pub(crate) fn backend(&self) -> Backend {
        match self {
            Driver::Uring(_) => Backend::Uring,
            Driver::Epoll(_) => Backend::Epoll,
        }
    }

    /// One trip to the kernel (see each backend's); returns how many
    /// completions or readiness events it brought.
    pub(crate) fn park(&mut self, timeout: Option<Duration>) -> u32 {
        match self {
            Driver::Uring(d) => d.park(timeout),
            Driver::Epoll(d) => d.park(timeout),
        }
    }

    /// Whether the last park left completions or events due in the
    /// kernel for a later one: io_uring runs a batch of its deferred
    /// completions per enter (20 on Linux 6.11 and later) and flags the
    /// rest; epoll filled its events buffer. Work that waits there is
    /// work the core is behind on, as much as its own run queue's.
    pub(crate) fn more_due(&mut self) -> bool {
        match self {
            Driver::Uring(d) => d.more_due(),
            Driver::Epoll(d) => d.more_due(),
        }
    }

    pub(crate) fn in_flight(&self) -> usize {
        match self {
            Driver::Uring(d) => d.in_flight(),
            Driver::Epoll(d) => d.in_flight(),
        }
    }

    /// Whether finished orphans left resources to drop.
    pub(crate) fn has_graveyard(&self) -> bool {
        matches!(self, Driver::Uring(d) if d.has_graveyard())
    }

    pub(crate) fn take_graveyard(&mut self, out: &mut Vec<uring::Retained>) {
        if let Driver::Uring(d) = self {
            d.take_graveyard(out);
        }
    }

    /// Frees what the driver keeps for reuse beyond its start-up
    /// reserve, after a spike (see `server::give_back`).
    /// Returns the bytes of buffer memory given back to the kernel.
    pub(crate) fn give_back(&mut self) -> usize {
        match self {
            Driver::Uring(d) => d.give_back(),
            Driver::Epoll(_) => 0,
        }
    }

    pub(crate) fn drain(&mut self, deadline: Instant) -> usize {
        match self {
            Driver::Uring(d) => d.drain(deadline),
            Driver::Epoll(_) => 0,
        }
    }
}
