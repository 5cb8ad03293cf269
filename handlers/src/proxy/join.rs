//! Running a request's branches concurrently inside its own task, and
//! deciding the outcome under a [`Policy`].
//!
//! A hand-written join rather than a task per branch: the branches borrow
//! the request (its bytes, the service), which a spawned task could not;
//! there is nothing to clean up when the request ends (dropping a branch
//! cancels its I/O); and no task is allocated. The price is that a wake-up
//! of any branch polls every branch still running, which at the widths a
//! fan-out uses (≤ 64) is cheaper than a waker per branch.
//!
//! The branch futures live in a slice in a bump arena borrowed from the
//! request's scratch. The slice never moves, so they are pinned where they
//! lie; the arena does not run destructors, so [`Branches`] drops them in
//! place itself.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bumpalo::Bump;

use super::Policy;

/// One branch: running, finished, or dropped before it finished.
#[derive(Debug)]
pub(crate) enum Slot<F: Future> {
    Running(F),
    Done(F::Output),
    /// Cancelled (the policy was decided without it), or its output taken.
    Gone,
}

/// How the join ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Enough branches succeeded.
    Met,
    /// Too many branches failed for the policy to be met.
    Failed,
    /// The deadline passed first.
    Deadline,
}

/// The branches of one request.
pub(crate) struct Branches<'a, F: Future> {
    slots: &'a mut [Slot<F>],
}

impl<'a, T, E, F> Branches<'a, F>
where
    F: Future<Output = Result<T, E>>,
{
    /// `width` branches made by `make(i)`, in `arena`.
    ///
    /// # Safety
    ///
    /// The value must be dropped, not leaked with [`std::mem::forget`],
    /// before `arena` is reset or reused: the futures are pinned in the
    /// arena's memory, and `Pin` promises they are dropped before that
    /// memory is used again. (Forgetting the whole request future, arena
    /// lease included, is fine: the arena is then never reset.)
    pub(crate) unsafe fn new_in(
        arena: &'a Bump,
        width: usize,
        mut make: impl FnMut(usize) -> F,
    ) -> Self {
        Self {
            slots: arena.alloc_slice_fill_with(width, |i| Slot::Running(make(i))),
        }
    }

    /// The branches, in the order added.
    pub(crate) fn slots(&self) -> &[Slot<F>] {
        self.slots
    }

    /// Takes the output of branch `i` if it finished.
    pub(crate) fn take(&mut self, i: usize) -> Option<F::Output> {
        let slot = self.slots.get_mut(i)?;
        if !matches!(slot, Slot::Done(_)) {
            return None;
        }
        match std::mem::replace(slot, Slot::Gone) {
            Slot::Done(out) => Some(out),
            _ => None,
        }
    }

    /// Drops every branch still running (cancelling its I/O and closing
    /// its connection); returns how many there were.
    pub(crate) fn cancel_running(&mut self) -> usize {
        let mut n = 0;
        for slot in self.slots.iter_mut() {
            if matches!(slot, Slot::Running(_)) {
                // Assignment drops the future in place, as `Pin` requires.
                *slot = Slot::Gone;
                n += 1;
            }
        }
        n
    }

    /// Polls the branches until `policy` is met or cannot be, or until
    /// `deadline`. Branches still running afterwards are left for the
    /// caller to cancel (or to report as timed out).
    pub(crate) async fn join(&mut self, policy: Policy, deadline: Instant) -> Verdict {
        let needed = policy.needed(self.slots.len());
        let decided = poll_fn(|cx| self.poll_step(cx, needed));
        percore::time::timeout_at(deadline, decided)
            .await
            .unwrap_or(Verdict::Deadline)
    }

    fn poll_step(&mut self, cx: &mut Context<'_>, needed: usize) -> Poll<Verdict> {
        let (mut ok, mut failed) = (0, 0);
        for slot in self.slots.iter_mut() {
            if let Slot::Running(branch) = slot {
                // Pinning holds: the slice lives in the arena, is reached only
                // through `&mut self`, and slots are overwritten or dropped in
                // place; `new_in`'s contract keeps the memory from reuse.
                // SAFETY: the future never moves (see above).
                let branch = unsafe { Pin::new_unchecked(branch) };
                if let Poll::Ready(out) = branch.poll(cx) {
                    *slot = Slot::Done(out);
                }
            }
            match slot {
                Slot::Done(Ok(_)) => ok += 1,
                Slot::Done(Err(_)) => failed += 1,
                _ => {}
            }
        }
        let width = self.slots.len();
        if ok >= needed {
            Poll::Ready(Verdict::Met)
        } else if failed > width - needed {
            Poll::Ready(Verdict::Failed)
        } else {
            Poll::Pending
        }
    }
}

impl<F: Future> std::fmt::Debug for Branches<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Branches")
            .field("width", &self.slots.len())
            .finish()
    }
}

impl<F: Future> Drop for Branches<'_, F> {
    fn drop(&mut self) {
        // The arena never runs destructors: drop what is left in place
        // (cancelling branches still running).
        for slot in self.slots.iter_mut() {
            *slot = Slot::Gone;
        }
    }
}
