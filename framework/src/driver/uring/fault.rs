//! Fault injection for the io_uring set-up paths and kernel features, read
//! once from the environment, so tests can exercise fallbacks that this
//! machine would otherwise never take (as root, memlock limits do not
//! apply, the io_uring sysctl is global, and the kernel is recent).
//!
//! `PERCORE_FAULT` is a comma-separated list of:
//! - `uring_setup=EPERM|ENOSYS|EINVAL|ENOMEM`: ring creation fails so;
//! - `register_buffers=ENOMEM`: registering the fixed write pool fails;
//! - `no_multishot`: the kernel is treated as lacking multishot accept/recv;
//! - `no_buf_ring`: the provided-buffer ring cannot be registered;
//! - `recv_limit_refused`: a multishot receive with a byte limit is refused
//!   with `EINVAL`, as a kernel before 6.17 refuses it;
//! - `enter_error=ENOMEM|EAGAIN|...`: one `io_uring_enter` with submissions
//!   in eight fails so before the kernel sees them, as a failed submission
//!   would; the operations must stay alive and go in with the next enter;
//! - `sq_full`: every SQE push first finds the SQ full, so it submits and
//!   reaps before it queues (completions then get dispatched from inside
//!   other dispatches, which must keep them in order);
//! - `cancel_refused=N`: the first N cancellations cannot be queued, as if
//!   the SQ were full and the kernel took nothing;
//! - `wake_refused=N`: the first N arms of the wake-up read cannot be
//!   queued, likewise;
//! - `no_defer_taskrun`: the ring is set up without `DEFER_TASKRUN`, so the
//!   kernel completes operations while the core runs, not only when it
//!   enters.
//!
//! The counted faults are per driver (each core gets the full count), so
//! that tests in one process do not take each other's.

use std::io;
use std::sync::OnceLock;

#[derive(Debug, Default)]
struct Faults {
    setup: Option<i32>,
    register_buffers: Option<i32>,
    no_multishot: bool,
    no_buf_ring: bool,
    recv_limit_refused: bool,
    enter_error: Option<i32>,
    sq_full: bool,
    cancel_refused: u32,
    wake_refused: u32,
    no_defer_taskrun: bool,
}

/// The counted faults of one driver: how many refusals it has left.
#[derive(Debug, Default, Clone)]
pub(crate) struct Counted {
    pub(crate) cancel_refused: u32,
    pub(crate) wake_refused: u32,
}

impl Counted {
    /// Takes one refusal of `which`, if any is left.
    pub(crate) fn take(which: &mut u32) -> bool {
        if *which == 0 {
            return false;
        }
        *which -= 1;
        true
    }
}

fn errno(name: &str) -> Option<i32> {
    Some(match name {
        "EPERM" => libc::EPERM,
        "ENOSYS" => libc::ENOSYS,
        "EINVAL" => libc::EINVAL,
        "ENOMEM" => libc::ENOMEM,
        "EACCES" => libc::EACCES,
        "EAGAIN" => libc::EAGAIN,
        "EBUSY" => libc::EBUSY,
        _ => return None,
    })
}

fn faults() -> &'static Faults {
    static FAULTS: OnceLock<Faults> = OnceLock::new();
    FAULTS.get_or_init(|| {
        let mut faults = Faults::default();
        let Ok(spec) = std::env::var("PERCORE_FAULT") else {
            return faults;
        };
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match item.split_once('=') {
                Some(("uring_setup", e)) => faults.setup = errno(e),
                Some(("register_buffers", e)) => faults.register_buffers = errno(e),
                Some(("enter_error", e)) => faults.enter_error = errno(e),
                Some(("cancel_refused", n)) => faults.cancel_refused = n.parse().unwrap_or(1),
                Some(("wake_refused", n)) => faults.wake_refused = n.parse().unwrap_or(1),
                None if item == "sq_full" => faults.sq_full = true,
                None if item == "no_defer_taskrun" => faults.no_defer_taskrun = true,
                None if item == "no_multishot" => faults.no_multishot = true,
                None if item == "no_buf_ring" => faults.no_buf_ring = true,
                None if item == "recv_limit_refused" => faults.recv_limit_refused = true,
                _ => tracing::warn!(item, "PERCORE_FAULT: unknown fault ignored"),
            }
        }
        tracing::warn!(?faults, "PERCORE_FAULT set: injecting faults");
        faults
    })
}

pub(crate) fn setup_error() -> Option<io::Error> {
    faults().setup.map(io::Error::from_raw_os_error)
}

pub(crate) fn register_buffers_error() -> Option<io::Error> {
    faults().register_buffers.map(io::Error::from_raw_os_error)
}

pub(crate) fn no_multishot() -> bool {
    faults().no_multishot
}

pub(crate) fn no_buf_ring() -> bool {
    faults().no_buf_ring
}

pub(crate) fn recv_limit_refused() -> bool {
    faults().recv_limit_refused
}

pub(crate) fn enter_error() -> Option<i32> {
    faults().enter_error
}

pub(crate) fn sq_full() -> bool {
    faults().sq_full
}

pub(crate) fn no_defer_taskrun() -> bool {
    faults().no_defer_taskrun
}

/// The counted faults a new driver starts with.
pub(crate) fn counted() -> Counted {
    Counted {
        cancel_refused: faults().cancel_refused,
        wake_refused: faults().wake_refused,
    }
}
