//! The io_uring driver of one core.
//!
//! Owns the ring, the operation table and the provided-buffer ring. Futures
//! push SQEs through [`Driver::push`]; the core's loop calls
//! [`Driver::park`] once per turn, which makes at most one
//! `io_uring_enter` (submit + wait with the timer's deadline) and then
//! dispatches every ready completion to its slot.

mod behind;
pub(crate) mod buf_ring;
mod complete;
pub(crate) mod cqe_queue;
mod enter;
pub(crate) mod fault;
mod fixed;
pub(crate) mod ops;
mod recv_limit;
mod ring_depth;
mod setup;
mod sqe_fields;
mod teardown;
#[cfg(test)]
mod tests;

use std::os::fd::{AsRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use io_uring::{opcode, squeue, types, IoUring};

use crate::stats::CoreStats;
use buf_ring::BufRing;
use cqe_queue::CqeQueue;
pub(crate) use fixed::FixedPool;
pub(crate) use ops::{Cqe, OpKey, OpKind, Retained, BEHIND_DONE};
use ops::{Op, OpState};
pub(crate) use setup::RingConfig;

/// `user_data` of the read on the core's wake-up eventfd.
const WAKE_TOKEN: u64 = u64::MAX - 1;
/// `user_data` of cancellation requests, whose completions say nothing.
const CANCEL_TOKEN: u64 = u64::MAX;
/// `user_data` of the start-up probe of fixed-buffer sends.
const PROBE_TOKEN: u64 = u64::MAX - 2;
/// `user_data` of the start-up probe of multishot receive limits.
const LIMIT_PROBE_TOKEN: u64 = u64::MAX - 3;
/// `IORING_RECVSEND_FIXED_BUF`: the send reads from a registered buffer.
pub(crate) const RECVSEND_FIXED_BUF: u16 = 4;

/// Buffer-ring sizing of one core.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BufConfig {
    pub(crate) count: u16,
    pub(crate) size: usize,
    /// Completions a multishot may queue before it is paused.
    pub(crate) stream_cap: usize,
}

/// Completions copied off the CQ at a time (see `Driver::reap`).
const REAP_BATCH: usize = 64;

/// Completions one wake-up must bring for the core to count as busy. With
/// wait batching on, a busy core's next wait holds out briefly for a batch
/// (see `Enter::enter`), which costs connections little latency when many
/// are in flight and saves most enters. A core serving a few connections
/// never reaches it and keeps waking on the first.
const BATCH_ENGAGE: u32 = 32;
/// Completions a busy core's wake-up must bring for it to stay busy: lower
/// than [`BATCH_ENGAGE`] so that a loaded core does not flap between modes.
const BATCH_STAY: u32 = 16;

pub(crate) struct Driver {
    ring: IoUring,
    enter: enter::Enter,
    /// Whether the last wake-up brought many completions (see
    /// [`BATCH_ENGAGE`]): the next wait asks for a batch.
    busy: bool,
    ops: crate::slab::Slab<Op>,
    /// Completions taken off the CQ and not yet dispatched, oldest first.
    /// `pending[pending_at..pending_len]` are still to go, in order.
    pending: [(u64, Cqe); REAP_BATCH],
    pending_at: usize,
    pending_len: usize,
    /// Operations whose cancellation could not be queued yet (the SQ was
    /// full and the kernel refused to take it): queued again at each park
    /// until it is, since an orphan that is never cancelled holds its fd
    /// (and its peer's connection) for ever.
    cancels: Vec<usize>,
    buf_ring: Option<Rc<BufRing>>,
    wake_fd: Arc<OwnedFd>,
    wake_buf: Box<u64>,
    /// The eventfd read's state (see `sync::WakeRead`, model-checked).
    wake_read: crate::sync::WakeRead,
    multishot: bool,
    /// Set up with `DEFER_TASKRUN`: the kernel runs this ring's work,
    /// receives into ring buffers included, only in its `io_uring_enter`.
    defer_taskrun: bool,
    /// Multishot receives carry a byte limit (until the kernel refuses one).
    recv_limit: bool,
    /// Sends may name a registered buffer (`IORING_RECVSEND_FIXED_BUF`).
    fixed_send: bool,
    /// The core's write pool, registered with the ring if `fixed_send`:
    /// held here, and never replaced, so that its memory outlives the
    /// ring, which is dropped first (fields drop in declaration order).
    fixed_pool: Option<Rc<FixedPool>>,
    stream_cap: usize,
    /// Resources of finished orphaned operations, dropped by the core's
    /// loop outside the driver borrow (their destructors may be user code).
    graveyard: Vec<Retained>,
    /// Descriptors of dropped sockets that SQEs still in the SQ may name:
    /// closed once the SQ has been submitted, not with the graveyard, which
    /// the core's loop also empties before it submits.
    open_until_submitted: Vec<Rc<OwnedFd>>,
    /// Completion queues of finished multishots, reused by the next ones.
    spare_queues: Vec<CqeQueue>,
    /// Emptied buffers of writes behind that succeeded, for the next ones:
    /// a connection that waits for its next request holds none.
    spare_writes: Vec<Vec<u8>>,
    /// Multishots that received into a ring buffer in this turn while
    /// nothing was queued for them: about the connections that receive.
    receivers: u32,
    stats: Arc<CoreStats>,
    /// Injected refusals left (see `fault`).
    faults: fault::Counted,
    /// `drain` ran: the core stopped in order.
    drained: bool,
    /// The `user_data` of every completion dispatched, in order (tests).
    #[cfg(test)]
    dispatched: Vec<u64>,
}

/// Spare write-behind buffers kept per core, and the largest kept.
const SPARE_WRITES: usize = 1024;
const SPARE_WRITE_MAX: usize = 64 * 1024;
/// Spare write-behind buffers kept when a quiet core gives memory back.
const SPARE_WRITES_KEPT: usize = 64;

/// Spare multishot completion queues kept per core.
const SPARE_QUEUES: usize = 4096;
/// Spare-queue slots reserved when a core starts (2 KiB).
const SPARE_QUEUES_RESERVED: usize = 256;
/// Spare queues made when a core starts, each with room for
/// [`CQE_QUEUE_ROOM`] completions (64 B apiece, 4 KiB in all).
const SPARE_QUEUES_MADE: usize = 64;
/// Completions a spare queue made at start holds before it grows.
const CQE_QUEUE_ROOM: usize = 4;

/// Keeps an emptied multishot queue's room for the next one, if it has
/// any and the spares are not full; frees it otherwise.
fn spare(spares: &mut Vec<CqeQueue>, mut queue: CqeQueue) {
    if queue.has_room() && spares.len() < SPARE_QUEUES {
        queue.clear();
        spares.push(queue);
    }
}

/// Logs the same fallback only once per process.
fn warn_once(flag: &std::sync::atomic::AtomicBool, f: impl FnOnce()) {
    if !flag.swap(true, std::sync::atomic::Ordering::Relaxed) {
        f();
    }
}

impl Driver {
    /// Whether the eventfd read is in flight.
    fn wake_armed(&self) -> bool {
        !self.wake_read.needs_arm()
    }

    /// Whether sends may use registered buffers.
    pub(crate) fn fixed_send(&self) -> bool {
        self.fixed_send
    }

    /// Whether multishot accept/receive with the buffer ring are in use.
    pub(crate) fn multishot(&self) -> bool {
        self.multishot
    }

    pub(crate) fn buf_ring(&self) -> Option<&Rc<BufRing>> {
        self.buf_ring.as_ref()
    }

    /// Gives a multishot receive a byte limit of one ring buffer, if the
    /// kernel takes one (probed at start-up): after that many bytes it ends
    /// by itself and is armed again (see `op::recv`).
    pub(crate) fn limit_multishot(&self, sqe: &mut squeue::Entry) {
        let Some(ring) = &self.buf_ring else {
            return;
        };
        if self.recv_limit {
            let bytes = u32::try_from(ring.buf_size()).unwrap_or(u32::MAX);
            sqe_fields::limit_multishot(sqe, bytes);
        }
    }

    /// The kernel refused a multishot receive's byte limit (before Linux
    /// 6.17 the field must be zero): multishots go without one.
    fn refuse_recv_limit(&mut self) {
        static REFUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        self.recv_limit = false;
        warn_once(&REFUSED, || {
            tracing::info!(
                "multishot receives without a byte limit (IORING_RECV_MSHOT_LIM needs Linux 6.17+): bulk streams read further ahead"
            )
        });
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.ops.len()
    }

    /// Puts `sqe` on the SQ, submitting (and reaping, should the kernel
    /// refuse more work until completions are read) when it is full.
    /// Returns the errno when the SQE could not be queued at all.
    ///
    /// # Safety
    ///
    /// Whatever `sqe` points to stays valid for what the kernel does with
    /// it until the SQE's last completion, and the fd it names stays open
    /// until it is submitted (the kernel then holds the file).
    unsafe fn push_sqe(&mut self, sqe: &squeue::Entry) -> Result<(), i32> {
        const ATTEMPTS: usize = 8;
        let mut last_error = libc::EBUSY;
        for attempt in 0..ATTEMPTS {
            let pushed = if attempt == 0 && fault::sq_full() {
                Err(())
            } else {
                // SAFETY: what the ring's `push` requires of `sqe` is this
                // function's contract.
                unsafe { self.ring.submission().push(sqe) }.map_err(drop)
            };
            if pushed.is_ok() {
                self.stats.submissions.add(1);
                return Ok(());
            }
            // The SQ is full: submit now (an extra enter, counted), then
            // reap, so a kernel that wants its completions read first
            // (EBUSY) gets them read.
            self.stats.enters.add(1);
            if let Err(e) = self.enter.enter(&mut self.ring, false, false, None) {
                tracing::error!(error = %e, "io_uring_enter failed while the SQ was full");
                self.stats.errors_driver.add(1);
                last_error = e.raw_os_error().unwrap_or(libc::EIO);
            }
            let _ = self.reap();
        }
        Err(last_error)
    }

    /// Queues an operation; it is submitted at the next `park` (or sooner if
    /// the SQ fills up).
    ///
    /// # Safety
    ///
    /// Each pointer in `sqe` stays valid for what the kernel does with it
    /// until the operation's last completion: it points into `retained`,
    /// into memory the driver owns, or into memory the caller keeps until
    /// the completion and hands to the slot with
    /// [`release`](Self::release) if it lets go earlier. The fd it names
    /// stays open until the SQE is submitted.
    pub(crate) unsafe fn push(
        &mut self,
        sqe: squeue::Entry,
        kind: OpKind,
        multishot: bool,
        retained: Retained,
    ) -> OpKey {
        let state = if multishot {
            OpState::Stream {
                first: None,
                // Empty until a second completion waits: then it takes a
                // spare.
                queue: CqeQueue::default(),
                waker: None,
                ended: false,
                cancelling: false,
            }
        } else {
            OpState::Waiting(None)
        };
        let key = OpKey(self.ops.insert(Op {
            kind,
            state,
            retained,
        }));
        // SAFETY: this function's contract.
        if let Err(errno) = unsafe { self.push_sqe(&sqe.user_data(key.0 as u64)) } {
            // The kernel never saw it: complete it with the error, so its
            // future ends instead of waiting for a completion that cannot
            // come.
            let failed = Cqe {
                res: -errno,
                flags: 0,
            };
            // SAFETY: a negative result with no flags carries nothing.
            unsafe { self.dispatch(key.0 as u64, failed) };
        }
        key
    }

    /// Collects a single-shot operation's completion and its resources.
    pub(crate) fn poll_op(&mut self, key: OpKey, cx: &mut Context<'_>) -> Poll<(Cqe, Retained)> {
        let Some(op) = self.ops.get_mut(key.0) else {
            unreachable!("operation slot vanished while its future was alive")
        };
        match &mut op.state {
            OpState::Waiting(waker) => {
                match waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            OpState::Done(cqe) => {
                let cqe = *cqe;
                let op = self.remove_op(key.0);
                Poll::Ready((cqe, op.unwrap_or(Retained::None)))
            }
            _ => unreachable!("poll_op on a multishot or orphaned slot"),
        }
    }

    /// Next completion of a multishot operation; `Ready(None)` once it has
    /// ended and every completion was taken (the caller then releases it).
    pub(crate) fn poll_stream(&mut self, key: OpKey, cx: &mut Context<'_>) -> Poll<Option<Cqe>> {
        let Some(Op {
            state:
                OpState::Stream {
                    first,
                    queue,
                    waker,
                    ended,
                    ..
                },
            ..
        }) = self.ops.get_mut(key.0)
        else {
            unreachable!("poll_stream on a missing or single-shot slot")
        };
        if let Some(cqe) = first.take() {
            return Poll::Ready(Some(cqe));
        }
        if let Some(cqe) = queue.pop_front() {
            // Emptied: its room goes back to the core's spares (or is
            // freed when they are full), so that a connection waiting for
            // its next bytes holds no queue. The next completion takes a
            // spare; the spares outnumber the streams that hold completions
            // at once, so after warm-up that allocates nothing.
            if queue.is_empty() {
                spare(&mut self.spare_queues, std::mem::take(queue));
            }
            return Poll::Ready(Some(cqe));
        }
        if *ended {
            return Poll::Ready(None);
        }
        match waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => *waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    fn arm_wake(&mut self) {
        if !self.wake_read.needs_arm() {
            return;
        }
        let sqe = opcode::Read::new(
            types::Fd(self.wake_fd.as_raw_fd()),
            (&mut *self.wake_buf as *mut u64).cast(),
            8,
        )
        .build()
        .user_data(WAKE_TOKEN);
        if fault::Counted::take(&mut self.faults.wake_refused) {
            return;
        }
        // SAFETY: the read fills `wake_buf` and reads `wake_fd`, both the
        // driver's until it completes (a teardown that cannot wait for it
        // leaks `wake_buf`).
        let queued = unsafe { self.push_sqe(&sqe) }.is_ok();
        self.wake_read.submitted(queued);
    }

    /// Whether the kernel holds deferred completions it has not run yet
    /// (`IORING_SQ_TASKRUN`, with `DEFER_TASKRUN` or `COOP_TASKRUN`).
    pub(crate) fn more_due(&mut self) -> bool {
        self.ring.submission().taskrun()
    }

    /// One loop turn's trip to the kernel: submit, and wait for a completion
    /// unless `timeout` is zero; then dispatch every ready completion.
    /// Returns how many there were.
    pub(crate) fn park(&mut self, timeout: Option<Duration>) -> u32 {
        self.retry_cancels();
        self.arm_wake();
        if let Some(ring) = &self.buf_ring {
            ring.top_up();
        }
        // Without its wake-up read the core would sleep through remote
        // wakes and the stop, so an unarmed read bounds the wait (see
        // `WakeRead::bound`); without a cancellation an orphan would hold
        // its socket, so an owed one means no wait at all. Either is tried
        // again at the next park (this enter submits what filled the SQ).
        let timeout = if self.cancels.is_empty() {
            self.wake_read.bound(timeout)
        } else {
            Some(Duration::ZERO)
        };
        let wait = timeout != Some(Duration::ZERO);
        match self.enter.enter(&mut self.ring, wait, self.busy, timeout) {
            Ok(true) => {
                self.stats.enters.add(1);
                if wait && self.busy && self.enter.batches() {
                    self.stats.batched_waits.add(1);
                }
            }
            Ok(false) => {}
            Err(e) => {
                self.stats.enters.add(1);
                self.stats.errors_driver.add(1);
                tracing::error!(error = %e, "io_uring_enter failed");
                // Avoid a hot loop on a persistent error.
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // What was queued is in the kernel now, which holds the files it
        // names: the sockets kept open for it may close.
        if self.ring.submission().is_empty() {
            self.open_until_submitted.clear();
        }
        let reaped = self.reap();
        if let Some(ring) = &self.buf_ring {
            ring.end_turn(std::mem::take(&mut self.receivers));
        }
        // A zero-timeout poll says nothing about load: keep the last verdict.
        if wait {
            let threshold = if self.busy { BATCH_STAY } else { BATCH_ENGAGE };
            self.busy = reaped >= threshold;
        }
        reaped
    }

    /// Keeps `fd` open until the SQEs queued so far have been submitted
    /// (by the next `park` that leaves the SQ empty).
    pub(crate) fn keep_open_until_submitted(&mut self, fd: Rc<OwnedFd>) {
        if !self.ring.submission().is_empty() {
            self.open_until_submitted.push(fd);
        }
    }

    /// Frees the spare multishot queues beyond the start-up reserve:
    /// made during a spike, they would pin the pages they are spread on.
    /// And gives the pages of the ring buffers that hold no data back to
    /// the kernel; returns their bytes.
    ///
    /// The ring's own buffers count only on a `DEFER_TASKRUN` ring: it
    /// takes buffers only inside this thread's `io_uring_enter`, so the
    /// head read here stays put until the pages are gone. Any other ring
    /// may take one at any moment, and the kernel would then have written
    /// a request into a page just discarded: only the reserve is given
    /// back there.
    pub(crate) fn give_back(&mut self) -> usize {
        self.spare_queues.truncate(SPARE_QUEUES_RESERVED);
        self.spare_writes.truncate(SPARE_WRITES_KEPT);
        let Some(ring) = &self.buf_ring else {
            return 0;
        };
        let head = if self.defer_taskrun {
            ring.kernel_head(&self.ring)
                .inspect_err(|e| tracing::debug!(error = %e, "the buffer ring's head is unknown"))
                .ok()
        } else {
            None
        };
        // SAFETY: a head comes only from a `DEFER_TASKRUN` ring, read just
        // now on the ring's only thread, which enters it next after this.
        unsafe { ring.release_free(head) }
    }

    /// Hands the resources of finished orphans to the caller to drop.
    pub(crate) fn has_graveyard(&self) -> bool {
        !self.graveyard.is_empty()
    }

    pub(crate) fn take_graveyard(&mut self, out: &mut Vec<Retained>) {
        out.append(&mut self.graveyard);
    }
}

impl Drop for Driver {
    /// Runs before the fields are dropped: once the registered ring fd is
    /// given up, closing the ring's own fd frees the ring.
    ///
    /// The core's stop drains the driver first. A driver dropped with
    /// operations in flight and no drain (a path that skipped the stop) is
    /// a bug, asserted in debug builds; in release builds it is drained
    /// here, and what the kernel still holds after that is leaked, never
    /// freed.
    fn drop(&mut self) {
        let undrained = if self.drained { 0 } else { self.ops.len() };
        if undrained > 0 || self.wake_armed() {
            // The wake-up read alone is the driver's own, drained here at
            // every drop: it writes `wake_buf`.
            self.drain(std::time::Instant::now() + Duration::from_secs(2));
        }
        self.enter.unregister(&self.ring);
        // After the drain: the assertion's unwinding frees nothing that the
        // kernel may still touch.
        debug_assert!(
            undrained == 0,
            "io_uring driver dropped with {undrained} operations in flight and no drain"
        );
    }
}
