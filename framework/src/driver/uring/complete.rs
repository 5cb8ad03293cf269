//! The completion side of the driver: taking completions off the CQ in
//! the kernel's order and handing each to its operation's slot.

use io_uring::cqueue;

use super::ops::OpState;
use super::{
    Cqe, Driver, OpKey, CANCEL_TOKEN, LIMIT_PROBE_TOKEN, PROBE_TOKEN, REAP_BATCH, WAKE_TOKEN,
};

impl Driver {
    /// Dispatches every ready completion, in the order the kernel posted
    /// them; returns how many there were.
    ///
    /// Completions are copied off the CQ in batches into `pending`, and
    /// each is taken out of it just before it is dispatched. Dispatching
    /// may come back here (a back-pressure cancel that finds the SQ full
    /// submits and reaps), and that inner reap must first finish the batch
    /// the outer one copied: a stream's later completion dispatched before
    /// an earlier one would reorder its data, or end it ahead of data it
    /// then drops.
    #[inline]
    pub(super) fn reap(&mut self) -> u32 {
        let mut total = self.dispatch_pending();
        loop {
            let mut n = 0;
            {
                let mut cq = self.ring.completion();
                for cqe in &mut cq {
                    self.pending[n] = (
                        cqe.user_data(),
                        Cqe {
                            res: cqe.result(),
                            flags: cqe.flags(),
                        },
                    );
                    n += 1;
                    if n == REAP_BATCH {
                        break;
                    }
                }
            }
            self.pending_at = 0;
            self.pending_len = n;
            total += self.dispatch_pending();
            // A short batch emptied the CQ: no need to look again.
            if n < REAP_BATCH {
                return total;
            }
        }
    }

    /// Dispatches what `reap` copied and has not dispatched yet.
    ///
    /// A dispatch wakes its waker last, after the completion is recorded,
    /// so a user waker that panics loses nothing: its panic is kept for the
    /// core to record, and the completions after it are dispatched still.
    /// Caught here, once per batch rather than per wake: it must not unwind
    /// through the reap, nor into the poll of whichever task made the
    /// driver reap (a full SQ), which would end that task for it.
    #[inline]
    fn dispatch_pending(&mut self) -> u32 {
        let mut n = 0;
        while self.pending_at < self.pending_len {
            let dispatched = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                while self.pending_at < self.pending_len {
                    let (user_data, cqe) = self.pending[self.pending_at];
                    self.pending_at += 1;
                    n += 1;
                    // SAFETY: straight from the CQ, and each entry is taken
                    // out of `pending` once.
                    unsafe { self.dispatch(user_data, cqe) };
                }
            }));
            if let Err(payload) = dispatched {
                crate::unwind::keep(payload);
            }
        }
        n
    }

    /// Hands a completion to its operation's slot.
    ///
    /// # Safety
    ///
    /// `cqe` is a completion the kernel posted for `user_data`, dispatched
    /// once, or one that carries nothing (a negative result, no flags): the
    /// buffer it names and the fd it carries go only where this puts them.
    // Long on purpose: one match over the states of a slot, kept whole so
    // that the per-completion path is one function.
    pub(super) unsafe fn dispatch(&mut self, user_data: u64, cqe: Cqe) {
        #[cfg(test)]
        self.dispatched.push(user_data);
        match user_data {
            // A probe's late completion carries nothing to anyone (the
            // receive probe's buffers are given back by the probe).
            CANCEL_TOKEN | PROBE_TOKEN | LIMIT_PROBE_TOKEN => return,
            WAKE_TOKEN => {
                self.wake_read.completed();
                return;
            }
            _ => {}
        }
        let key = user_data as usize;
        let more = cqueue::more(cqe.flags);
        let buffered = cqueue::buffer_select(cqe.flags).is_some();
        if buffered {
            if let Some(ring) = &self.buf_ring {
                ring.taken();
            }
        }
        if cqe.res == -libc::ENOBUFS {
            self.stats.buffer_exhausted.add(1);
            if let Some(ring) = &self.buf_ring {
                ring.starved();
            }
        }
        let stream_cap = self.stream_cap;
        let Some(op) = self.ops.get_mut(key) else {
            tracing::warn!(user_data, "completion for an unknown operation");
            return;
        };
        let kind = op.kind;
        match &mut op.state {
            OpState::Waiting(waker) => {
                let waker = waker.take();
                op.state = OpState::Done(cqe);
                if let Some(w) = waker {
                    // Last: a user waker that panics finds this completion
                    // recorded (see `dispatch_pending`).
                    w.wake();
                }
            }
            OpState::Stream {
                first,
                queue,
                waker,
                ended,
                cancelling,
            } => {
                let idle = first.is_none() && queue.is_empty();
                if buffered && idle {
                    self.receivers += 1;
                }
                if !more {
                    *ended = true;
                    self.stats.multishot_ended.add(1);
                }
                if *cancelling && cqe.res == -libc::ECANCELED {
                    // The pause's own ending: nothing to deliver.
                } else if idle {
                    *first = Some(cqe);
                } else {
                    // A queue is lent only while it holds completions (see
                    // `poll_stream`): an idle connection holds none.
                    if !queue.has_room() {
                        if let Some(spare) = self.spare_queues.pop() {
                            *queue = spare;
                        }
                    }
                    queue.push_back(cqe);
                }
                let behind = queue.len() + usize::from(first.is_some()) >= stream_cap;
                let waker = waker.take();
                if behind && self.end_stream(OpKey(key)) {
                    self.stats.backpressure_pauses.add(1);
                }
                if let Some(w) = waker {
                    w.wake();
                }
            }
            OpState::Behind { .. } => self.behind_done(key, cqe),
            OpState::Orphaned => {
                // SAFETY: a completion the kernel posted, seen once (this
                // function's contract); the slot's owner is gone, so it goes
                // to nobody else.
                unsafe { self.cleanup(kind, cqe) };
                if !more {
                    if let Some(retained) = self.remove_op(key) {
                        self.graveyard.push(retained);
                    }
                }
            }
            OpState::Done(_) => {
                tracing::warn!(user_data, "second completion for a single-shot operation");
            }
        }
    }
}
