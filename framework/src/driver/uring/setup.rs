//! Creating a core's ring: the set-up ladder and what was granted.
//!
//! Flags are tried from the fastest to the most widely supported:
//! `SINGLE_ISSUER | DEFER_TASKRUN` (completions are posted only when this
//! core enters the kernel, so no IPIs and no task-work interruptions), then
//! `COOP_TASKRUN | TASKRUN_FLAG`, then none. SQPOLL is used only when asked
//! for: it burns a core, which a 2-core machine cannot spare. The real ring
//! size is used at every step, so the ring we probe is the ring we run.

use std::fmt;
use std::io;

use io_uring::IoUring;

/// Which set-up flags a ring got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ladder {
    DeferTaskrun,
    CoopTaskrun,
    Plain,
    Sqpoll,
}

impl fmt::Display for Ladder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ladder::DeferTaskrun => "SINGLE_ISSUER|DEFER_TASKRUN|TASKRUN_FLAG",
            Ladder::CoopTaskrun => "COOP_TASKRUN|TASKRUN_FLAG",
            Ladder::Plain => "none",
            Ladder::Sqpoll => "SQPOLL",
        })
    }
}

/// Ring sizing and the optional SQPOLL thread.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RingConfig {
    pub(crate) entries: u32,
    pub(crate) cq_entries: u32,
    pub(crate) sqpoll_idle_ms: Option<u32>,
    /// Wait batching bound in µs, `None` for off (see
    /// `ServerBuilder::wait_batching`).
    pub(crate) batch_wait_usec: Option<u32>,
}

/// Builds the ring, walking down the ladder on `EINVAL` (flag unknown to
/// this kernel). Any other error means io_uring itself is unavailable
/// (`EPERM` from seccomp or `kernel.io_uring_disabled`, `ENOSYS`, `ENOMEM`)
/// and is returned as is: the caller decides on fallback by cause.
pub(crate) fn build_ring(config: RingConfig) -> io::Result<(IoUring, Ladder)> {
    if let Some(fault) = super::fault::setup_error() {
        return Err(fault);
    }
    let cq = config.cq_entries.max(config.entries * 2);
    if let Some(idle) = config.sqpoll_idle_ms {
        let ring = IoUring::builder()
            .setup_cqsize(cq)
            .setup_submit_all()
            .setup_sqpoll(idle)
            .build(config.entries)?;
        return Ok((ring, Ladder::Sqpoll));
    }
    let attempts = [Ladder::DeferTaskrun, Ladder::CoopTaskrun, Ladder::Plain];
    let mut last = None;
    for ladder in attempts {
        if ladder == Ladder::DeferTaskrun && super::fault::no_defer_taskrun() {
            continue;
        }
        let mut builder = IoUring::builder();
        builder.setup_cqsize(cq).setup_submit_all();
        match ladder {
            Ladder::DeferTaskrun => {
                builder
                    .setup_single_issuer()
                    .setup_defer_taskrun()
                    .setup_taskrun_flag();
            }
            Ladder::CoopTaskrun => {
                builder.setup_coop_taskrun().setup_taskrun_flag();
            }
            Ladder::Plain | Ladder::Sqpoll => {}
        }
        match builder.build(config.entries) {
            Ok(ring) => return Ok((ring, ladder)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EINVAL)))
}
