//! Creating a core's ring and its driver: the set-up ladder, what was
//! granted, and the start-up probes.
//!
//! Flags are tried from the fastest to the most widely supported:
//! `SINGLE_ISSUER | DEFER_TASKRUN` (completions are posted only when this
//! core enters the kernel, so no IPIs and no task-work interruptions), then
//! `COOP_TASKRUN | TASKRUN_FLAG`, then none. SQPOLL is used only when asked
//! for: it burns a core, which a 2-core machine cannot spare. The real ring
//! size is used at every step, so the ring we probe is the ring we run.

use std::fmt;
use std::io;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::Arc;

use io_uring::IoUring;

use super::buf_ring::BufRing;
use super::{
    enter, fault, warn_once, BufConfig, Cqe, CqeQueue, Driver, FixedPool, CQE_QUEUE_ROOM,
    REAP_BATCH, SPARE_QUEUES_MADE, SPARE_QUEUES_RESERVED,
};
use crate::stats::CoreStats;

/// Which set-up flags a ring got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ladder {
    DeferTaskrun,
    CoopTaskrun,
    Plain,
    Sqpoll,
}

impl Ladder {
    /// The flags, as `--stats` and the start-up log name them.
    pub(crate) fn flags(self) -> &'static str {
        match self {
            Ladder::DeferTaskrun => "SINGLE_ISSUER|DEFER_TASKRUN|TASKRUN_FLAG",
            Ladder::CoopTaskrun => "COOP_TASKRUN|TASKRUN_FLAG",
            Ladder::Plain => "none",
            Ladder::Sqpoll => "SQPOLL",
        }
    }
}

impl fmt::Display for Ladder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.flags())
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

impl Driver {
    pub(crate) fn new(
        ring_config: RingConfig,
        buf_config: BufConfig,
        fixed: Option<Rc<FixedPool>>,
        wake_fd: Arc<OwnedFd>,
        stats: Arc<CoreStats>,
    ) -> io::Result<Driver> {
        Self::with_faults(
            ring_config,
            buf_config,
            fixed,
            wake_fd,
            stats,
            fault::counted(),
        )
    }

    /// [`new`](Self::new), with the counted faults given (tests).
    // Long on purpose: the ring's set-up in order, each step's result
    // feeding the next and the one log line that says what was granted.
    pub(super) fn with_faults(
        ring_config: RingConfig,
        buf_config: BufConfig,
        fixed: Option<Rc<FixedPool>>,
        wake_fd: Arc<OwnedFd>,
        stats: Arc<CoreStats>,
        faults: fault::Counted,
    ) -> io::Result<Driver> {
        let (ring, ladder) = build_ring(ring_config)?;
        stats.set_ring_flags(ladder.flags());
        let params = ring.params();
        let no_iowait = params.is_feature_no_iowait();
        let batch_usec = match ring_config.batch_wait_usec {
            Some(usec) if params.is_feature_min_timeout() => usec,
            Some(_) => {
                tracing::warn!("wait batching needs IORING_FEAT_MIN_TIMEOUT (Linux 6.12+); off");
                0
            }
            None => 0,
        };
        let enter = enter::Enter::new(&ring, no_iowait, ladder == Ladder::Sqpoll, batch_usec);
        // io-wq should stay idle for sockets; cap it so a burst of punted
        // work cannot spawn a thread herd on a 2-core machine.
        let mut workers = [2u32, 2u32];
        let iowq_capped = ring
            .submitter()
            .register_iowq_max_workers(&mut workers)
            .is_ok();
        // Multishot accept and receive arrived in 5.19/6.0; bundles (6.10)
        // prove a kernel new enough for both without a version parse.
        let multishot = params.is_feature_recvsend_bundle() && !fault::no_multishot();
        let buf_ring = register_buf_ring(&ring, buf_config);
        tracing::info!(
            setup = %ladder,
            registered_ring_fd = enter.is_registered(),
            ext_arg = params.is_feature_ext_arg(),
            nodrop = params.is_feature_nodrop(),
            no_iowait,
            batch_usec,
            iowq_capped,
            multishot,
            buf_ring = buf_ring.is_some(),
            sq_entries = ring_config.entries,
            "io_uring ready"
        );
        let mut driver = Driver {
            ring,
            enter,
            busy: false,
            ops: crate::slab::Slab::with_capacity(1024),
            pending: [(0, Cqe { res: 0, flags: 0 }); REAP_BATCH],
            pending_at: 0,
            pending_len: 0,
            cancels: Vec::new(),
            buf_ring,
            wake_fd,
            wake_buf: Box::new(0),
            wake_read: crate::sync::WakeRead::new(),
            multishot,
            defer_taskrun: ladder == Ladder::DeferTaskrun,
            recv_limit: false,
            fixed_send: false,
            fixed_pool: fixed,
            stream_cap: buf_config.stream_cap,
            graveyard: Vec::new(),
            open_until_submitted: Vec::new(),
            // Room from the start: a receive re-armed at its byte limit
            // returns its queue here and takes it back at once, and that
            // must not be the first push into an empty `Vec` (an
            // allocation in steady state). Queues too: how many hold
            // completions at once depends on how the kernel batches them,
            // which a loaded machine changes at any moment, so the first
            // few dozen are made here rather than mid-request.
            spare_queues: {
                let mut spares = Vec::with_capacity(SPARE_QUEUES_RESERVED);
                spares.resize_with(SPARE_QUEUES_MADE, || CqeQueue::with_room(CQE_QUEUE_ROOM));
                spares
            },
            spare_writes: Vec::with_capacity(super::SPARE_WRITES),
            receivers: 0,
            stats,
            faults,
            drained: false,
            #[cfg(test)]
            dispatched: Vec::new(),
        };
        if driver.buf_ring.is_none() {
            driver.multishot = false;
        }
        driver.fixed_send = driver.register_fixed();
        tracing::debug!(fixed_send = driver.fixed_send, "fixed write buffers");
        if driver.multishot {
            driver.recv_limit = driver.probe_recv_limit();
        }
        driver.arm_wake();
        Ok(driver)
    }
}

/// The core's provided-buffer ring, or `None` (logged once per process)
/// when the kernel refuses it: receives then read into pool buffers.
fn register_buf_ring(ring: &IoUring, config: BufConfig) -> Option<Rc<BufRing>> {
    static NO_BUF_RING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    // SAFETY: `ring` is the driver's first field, dropped before `buf_ring`;
    // a teardown that cannot wait for its receives leaks the buffer ring.
    let registered = unsafe { BufRing::register(ring, config.count, config.size) };
    match registered {
        Ok(ring) => Some(Rc::new(ring)),
        Err(e) => {
            warn_once(&NO_BUF_RING, || {
                tracing::warn!(
                    error = %e,
                    "provided-buffer ring unavailable: receives use single-shot reads into pool buffers"
                )
            });
            None
        }
    }
}
