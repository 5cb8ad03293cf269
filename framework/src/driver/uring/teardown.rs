//! Ring teardown: cancel everything in flight and wait out its completions
//! before any buffer the kernel may still touch is freed.

use std::time::Instant;

use io_uring::opcode;

use super::{Driver, OpKey, OpState, Retained, CANCEL_TOKEN, WAKE_TOKEN};

impl Driver {
    /// Core shutdown: cancels every operation still in flight and waits for
    /// all their completions, so no buffer is freed while the kernel may
    /// still write to it. Returns the number of operations that did not
    /// complete by `deadline` (their resources are then leaked, not freed).
    pub(crate) fn drain(&mut self, deadline: Instant) -> usize {
        self.drained = true;
        // Completions already taken off the CQ go to their slots first.
        self.reap();
        let keys: Vec<usize> = self.ops.keys().collect();
        for key in keys {
            // An owner still alive here was leaked. Release its operation as
            // a dropped owner would: one whose last completion is in (a
            // single-shot `Done`, an ended multishot) is cleaned up and
            // removed now, since no completion will come for it; the others
            // are orphaned and cancelled.
            if matches!(self.ops.get(key), Some(op) if matches!(op.state, OpState::Orphaned)) {
                self.cancel(OpKey(key));
            } else if let Some(retained) = self.release(OpKey(key), Retained::None) {
                self.graveyard.push(retained);
            }
        }
        let mut wake_cancelled = false;
        while !self.ops.is_empty() || self.wake_armed() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            // Cancellations that could not be queued are queued again each
            // round, until they are.
            self.retry_cancels();
            if self.wake_armed() && !wake_cancelled {
                let sqe = opcode::AsyncCancel::new(WAKE_TOKEN)
                    .build()
                    .user_data(CANCEL_TOKEN);
                // SAFETY: a cancellation points at no memory and names no fd.
                wake_cancelled = unsafe { self.push_sqe(&sqe) }.is_ok();
            }
            self.stats.enters.add(1);
            if let Err(e) = self.enter.enter(
                &mut self.ring,
                true,
                false,
                // A cancellation still owed is tried again soon.
                Some(if self.cancels.is_empty() {
                    deadline.saturating_duration_since(now)
                } else {
                    std::time::Duration::from_millis(1).min(deadline.saturating_duration_since(now))
                }),
            ) {
                tracing::error!(error = %e, "io_uring_enter failed while draining");
                break;
            }
            let _ = self.reap();
        }
        let left = self.ops.len() + usize::from(self.wake_armed());
        if left > 0 {
            tracing::error!(
                left,
                "operations still in flight at ring teardown; leaking their buffers"
            );
            let keys: Vec<usize> = self.ops.keys().collect();
            for key in keys {
                if let Some(op) = self.ops.remove(key) {
                    std::mem::forget(op.retained);
                }
            }
            if self.wake_armed() {
                std::mem::forget(std::mem::replace(&mut self.wake_buf, Box::new(0)));
            }
            if let Some(ring) = self.buf_ring.take() {
                std::mem::forget(ring);
            }
        }
        left
    }
}
