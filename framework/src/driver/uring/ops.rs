//! The table of in-flight operations, keyed by `user_data`.
//!
//! A slot is created when an SQE is pushed and removed only after the
//! kernel's final completion for it (a completion without
//! `IORING_CQE_F_MORE`). Everything the kernel may touch — the buffer, the
//! socket address, the fd — is owned by the slot (`Retained`) or by the
//! future that polls it; if that future is dropped first, the slot becomes
//! `Orphaned`, takes ownership of the future's resources, and is cleaned up
//! when the completion arrives. That is what makes dropping a future with an
//! operation in flight safe. The driver's methods that release, orphan and
//! cancel operations live here too.

use std::any::Any;
use std::os::fd::{FromRawFd, OwnedFd};
use std::rc::Rc;
use std::task::Waker;

use io_uring::{cqueue, opcode};

use super::CANCEL_TOKEN;
use crate::sys::RawAddr;

/// The `user_data` of an operation: its slot in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpKey(pub(crate) usize);

/// One completion as the kernel reported it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cqe {
    pub(crate) res: i32,
    pub(crate) flags: u32,
}

/// What an operation does, so an orphaned completion can be cleaned up:
/// an accepted fd closed, a selected buffer given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpKind {
    Accept,
    Recv,
    Send,
    Connect,
    /// Opens a file: an orphaned completion carries an fd to close.
    Open,
    /// Any other file or path operation: nothing to clean up.
    File,
}

/// Resources the kernel may still use while the operation is in flight.
/// The fields are never read: holding them is the point.
#[allow(dead_code)]
pub(crate) enum Retained {
    None,
    /// Keeps the socket open until the kernel is done with it.
    Fd(Rc<OwnedFd>),
    /// The address a `connect` reads, and its socket.
    Connect(Rc<OwnedFd>, Box<RawAddr>),
    /// A buffer that belonged to a dropped future (any owned buffer type;
    /// for a gathered send, its buffers with their message header and
    /// iovecs); boxed only on that rare path.
    Buffer(Rc<OwnedFd>, Box<dyn Any>),
    /// A pool buffer that a single-shot receive writes into.
    PoolBuf(Rc<OwnedFd>, Box<[u8]>),
    /// What a dropped file operation's future owned (its buffer, its
    /// file, its paths), kept whole until the completion.
    Owned(Box<dyn Any>),
    /// What an operation retained from its start, and what its future
    /// handed over when it was dropped: both stay until the completion.
    Both(Box<(Retained, Retained)>),
    /// The bytes of a write behind (see `op::send_behind`), which the
    /// driver sends whole.
    Behind(Vec<u8>),
}

pub(crate) enum OpState {
    /// Single-shot: waiting for the completion.
    Waiting(Option<Waker>),
    /// Single-shot: completed, not yet collected.
    Done(Cqe),
    /// Multishot: completions queue up until collected. `ended` once a
    /// completion without `F_MORE` arrived.
    Stream {
        /// The oldest completion not yet collected, when it is the only
        /// one or older than all in `queue`: a receive that finds its
        /// reader waiting, the common case, takes no queue.
        first: Option<Cqe>,
        queue: super::cqe_queue::CqeQueue,
        waker: Option<Waker>,
        ended: bool,
        /// An `AsyncCancel` was submitted for back-pressure; its `ECANCELED`
        /// ending is not an error.
        cancelling: bool,
    },
    /// A write behind: a send of the whole of the slot's
    /// [`Retained::Behind`] that the driver carries on after a partial
    /// completion (from `sent` on, to `fd`), without waking anyone. `end`
    /// is 0 while it is under way, [`BEHIND_DONE`] once every byte went
    /// out (its buffer is then a spare, and the slot waits for its
    /// socket's next write behind), or the error that ended it (see
    /// [`BEHIND_ZERO`]). The waker, if its owner waits, is woken at the
    /// end. `fd` also tells the owner's slot apart from another
    /// operation's that took its key after it was removed: no other open
    /// socket has the same descriptor.
    Behind {
        waker: Option<Waker>,
        fd: std::os::fd::RawFd,
        sent: u32,
        end: i32,
    },
    /// The owner is gone; clean up each completion until the final one.
    Orphaned,
}

/// The `end` of a write behind that the kernel took no byte of (a
/// zero-length send of a non-empty rest); errors are negative.
pub(crate) const BEHIND_ZERO: i32 = 1;
/// The `end` of a write behind that went out whole.
pub(crate) const BEHIND_DONE: i32 = 2;

pub(crate) struct Op {
    pub(crate) kind: OpKind,
    pub(crate) state: OpState,
    pub(crate) retained: Retained,
}

impl super::Driver {
    /// The owner of `key` is done with it. A finished operation is removed
    /// and its resources returned; one still in flight is cancelled and
    /// orphaned, keeping `extra` (the dropped future's buffer) alive with it.
    pub(crate) fn release(&mut self, key: OpKey, extra: Retained) -> Option<Retained> {
        let op = self.ops.get_mut(key.0)?;
        let kind = op.kind;
        match &mut op.state {
            OpState::Done(cqe) => {
                let cqe = *cqe;
                // SAFETY: the completion is still in the slot, so `poll_op`
                // never handed it out, and the slot is removed next.
                unsafe { self.cleanup(kind, cqe) };
                let retained = self.remove_op(key.0)?;
                self.bury(extra);
                Some(retained)
            }
            OpState::Stream {
                first,
                queue,
                ended,
                ..
            } => {
                let ended = *ended;
                let first = first.take();
                let mut queued = std::mem::take(queue);
                for cqe in first.into_iter().chain(queued.drain()) {
                    // SAFETY: queued completions were never handed out
                    // (`poll_stream` pops what it hands out), and these are
                    // drained out of the queue.
                    unsafe { self.cleanup(kind, cqe) };
                }
                if let Some(Op {
                    state: OpState::Stream { queue, .. },
                    ..
                }) = self.ops.get_mut(key.0)
                {
                    *queue = queued;
                }
                if ended {
                    let retained = self.remove_op(key.0)?;
                    self.bury(extra);
                    return Some(retained);
                }
                self.orphan(key, extra);
                None
            }
            OpState::Behind { end, .. } if *end != 0 => {
                let retained = self.remove_op(key.0)?;
                self.bury(extra);
                Some(retained)
            }
            OpState::Waiting(_) | OpState::Behind { .. } => {
                self.orphan(key, extra);
                None
            }
            OpState::Orphaned => None,
        }
    }

    /// Removes a finished operation, keeping its completion queue (if it
    /// was a multishot) for the next one: re-arming a receive must not
    /// allocate.
    pub(super) fn remove_op(&mut self, key: usize) -> Option<Retained> {
        let op = self.ops.remove(key)?;
        if !self.cancels.is_empty() {
            self.forget_cancel(key);
        }
        if let OpState::Stream { queue, .. } = op.state {
            super::spare(&mut self.spare_queues, queue);
        }
        Some(op.retained)
    }

    /// The owner of an operation in flight is gone: the slot keeps what
    /// the operation retained and `extra` (the owner's buffer), both until
    /// the final completion, and the operation is cancelled.
    fn orphan(&mut self, key: OpKey, extra: Retained) {
        if let Some(op) = self.ops.get_mut(key.0) {
            op.state = OpState::Orphaned;
            if !matches!(extra, Retained::None) {
                // What the slot held is still the kernel's: never dropped
                // here, whatever it is.
                let held = std::mem::replace(&mut op.retained, Retained::None);
                op.retained = match held {
                    Retained::None => extra,
                    held => Retained::Both(Box::new((held, extra))),
                };
            }
        }
        self.cancel(key);
    }

    /// Leaves `retained` for the core's loop to drop. Nothing is queued for
    /// `Retained::None`: a receive re-armed every 64 KiB releases its
    /// finished multishot with it, and a graveyard that grows to a new
    /// high-water mark allocates.
    fn bury(&mut self, retained: Retained) {
        if !matches!(retained, Retained::None) {
            self.graveyard.push(retained);
        }
    }

    /// Ends a multishot receive early because its socket carries a bulk
    /// stream (see `op::recv`).
    pub(crate) fn end_stream_for_bulk(&mut self, key: OpKey) {
        self.stats.bulk_reads.add(1);
        self.end_stream(key);
    }

    /// Ends a multishot early (a pause, or a bulk stream): cancels it
    /// unless it has ended or is being cancelled; returns whether it did.
    /// The completions it has queued stay queued, and
    /// [`poll_stream`](super::Driver::poll_stream) reports the end after
    /// them.
    pub(crate) fn end_stream(&mut self, key: OpKey) -> bool {
        let Some(Op {
            state: OpState::Stream {
                ended, cancelling, ..
            },
            ..
        }) = self.ops.get_mut(key.0)
        else {
            return false;
        };
        if *ended || *cancelling {
            return false;
        }
        *cancelling = true;
        self.cancel(key);
        true
    }

    /// Cancels a single-shot operation still waiting for its completion:
    /// a receive that would wait for bytes that may never come (a peer
    /// waiting for an answer). Its completion then comes with the bytes
    /// it had, or `ECANCELED` and none taken from the socket.
    pub(crate) fn cancel_waiting(&mut self, key: OpKey) {
        if let Some(Op {
            state: OpState::Waiting(_),
            ..
        }) = self.ops.get(key.0)
        {
            self.cancel(key);
        }
    }

    /// The slot `key` may be reused: a cancellation still owed to the
    /// finished operation must not reach the next one.
    #[cold]
    fn forget_cancel(&mut self, key: usize) {
        self.cancels.retain(|&k| k != key);
    }

    /// Cancels the operation `key`; if the cancellation cannot be queued
    /// now, it is queued again at each park until it is.
    pub(super) fn cancel(&mut self, key: OpKey) {
        if !self.try_cancel(key.0) {
            tracing::debug!(
                key = key.0,
                "could not queue a cancellation; retrying at the next park"
            );
            if !self.cancels.contains(&key.0) {
                self.cancels.push(key.0);
            }
        }
    }

    fn try_cancel(&mut self, key: usize) -> bool {
        if super::fault::Counted::take(&mut self.faults.cancel_refused) {
            return false;
        }
        let sqe = opcode::AsyncCancel::new(key as u64)
            .build()
            .user_data(CANCEL_TOKEN);
        // SAFETY: a cancellation points at no memory and names no fd.
        unsafe { self.push_sqe(&sqe) }.is_ok()
    }

    /// Queues the cancellations that could not be queued before, for the
    /// operations still in flight.
    pub(super) fn retry_cancels(&mut self) {
        if self.cancels.is_empty() {
            return;
        }
        let owed = std::mem::take(&mut self.cancels);
        for key in owed {
            if self.ops.get(key).is_some() && !self.try_cancel(key) {
                self.cancels.push(key);
            }
        }
    }

    /// Whether the multishot `key` has had its last completion (or is
    /// gone).
    pub(crate) fn stream_ended(&self, key: OpKey) -> bool {
        !matches!(
            self.ops.get(key.0),
            Some(Op {
                state: OpState::Stream { ended: false, .. },
                ..
            })
        )
    }

    /// Ends a multishot and waits, in the kernel, for its last completion,
    /// so that everything it completed is queued in its slot when this
    /// returns (at a stop, so that a multishot accept cancelled now takes
    /// no connection later, which only an orphan's cleanup would see and
    /// close). Returns whether it ended by `deadline`.
    pub(crate) fn finish_stream(&mut self, key: OpKey, deadline: std::time::Instant) -> bool {
        self.end_stream(key);
        loop {
            if self.stream_ended(key) {
                return true;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            self.retry_cancels();
            self.stats.enters.add(1);
            let wait = Some(deadline.saturating_duration_since(now));
            if let Err(e) = self.enter.enter(&mut self.ring, true, false, wait) {
                tracing::error!(error = %e, "io_uring_enter failed while ending a multishot");
                return false;
            }
            self.reap();
        }
    }

    /// Gives back what an orphaned completion carried: a buffer from the
    /// ring, or the fd of a connection accepted for nobody.
    ///
    /// # Safety
    ///
    /// `cqe` is a completion of an operation of `kind` that the kernel
    /// posted and that no owner has taken or will take: the buffer it names
    /// and the fd it carries belong to nobody else.
    pub(super) unsafe fn cleanup(&mut self, kind: OpKind, cqe: Cqe) {
        if let Some(bid) = cqueue::buffer_select(cqe.flags) {
            if let Some(ring) = &self.buf_ring {
                // SAFETY: per the contract, the completion's buffer is held
                // by nobody else.
                unsafe { ring.recycle(bid) };
            }
        }
        if matches!(kind, OpKind::Accept | OpKind::Open) && cqe.res >= 0 {
            // SAFETY: per the contract, the kernel created this fd for this
            // completion, and nothing else owns it.
            drop(unsafe { OwnedFd::from_raw_fd(cqe.res) });
        }
    }
}
