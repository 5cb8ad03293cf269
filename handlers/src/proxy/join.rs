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
///
/// A branch's future and its output live in two slices: the future is
/// large (every state of an exchange), and taking an output out of a slot
/// that also held the future would copy the whole slot.
pub(crate) struct Branches<'a, F: Future> {
    /// `None` once finished or cancelled.
    running: &'a mut [Option<F>],
    /// `Some` from when a branch finishes until its output is taken.
    outputs: &'a mut [Option<F::Output>],
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
            running: arena.alloc_slice_fill_with(width, |i| Some(make(i))),
            outputs: arena.alloc_slice_fill_with(width, |_| None),
        }
    }

    /// The output of branch `i`, if it finished and it was not taken.
    pub(crate) fn output(&self, i: usize) -> Option<&F::Output> {
        self.outputs.get(i)?.as_ref()
    }

    /// Whether branch `i` is still running.
    pub(crate) fn is_running(&self, i: usize) -> bool {
        self.running.get(i).is_some_and(Option::is_some)
    }

    /// Takes the output of branch `i` if it finished.
    pub(crate) fn take(&mut self, i: usize) -> Option<F::Output> {
        self.outputs.get_mut(i)?.take()
    }

    /// Drops every branch still running (cancelling its I/O and closing
    /// its connection); returns how many there were.
    pub(crate) fn cancel_running(&mut self) -> usize {
        let mut n = 0;
        for branch in self.running.iter_mut() {
            if branch.is_some() {
                // Assignment drops the future in place, as `Pin` requires.
                *branch = None;
                n += 1;
            }
        }
        n
    }

    /// Polls the branches until `policy` is met or cannot be, or until
    /// `deadline`. Branches still running afterwards are left for the
    /// caller to cancel (or to report as timed out).
    pub(crate) async fn join(&mut self, policy: Policy, deadline: Instant) -> Verdict {
        let needed = policy.needed(self.running.len());
        let decided = poll_fn(|cx| self.poll_step(cx, needed));
        percore::time::timeout_at(deadline, decided)
            .await
            .unwrap_or(Verdict::Deadline)
    }

    fn poll_step(&mut self, cx: &mut Context<'_>, needed: usize) -> Poll<Verdict> {
        let (mut ok, mut failed) = (0, 0);
        for (branch, output) in self.running.iter_mut().zip(self.outputs.iter_mut()) {
            if let Some(future) = branch {
                // Pinning holds: the slice lives in the arena, is reached only
                // through `&mut self`, and futures are dropped in place;
                // `new_in`'s contract keeps the memory from reuse.
                // SAFETY: the future never moves (see above).
                let future = unsafe { Pin::new_unchecked(future) };
                if let Poll::Ready(out) = future.poll(cx) {
                    *branch = None;
                    *output = Some(out);
                }
            }
            match output {
                Some(Ok(_)) => ok += 1,
                Some(Err(_)) => failed += 1,
                None => {}
            }
        }
        let width = self.running.len();
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
            .field("width", &self.running.len())
            .finish()
    }
}

impl<F: Future> Drop for Branches<'_, F> {
    fn drop(&mut self) {
        // The arena never runs destructors: drop what is left in place
        // (cancelling branches still running, freeing outputs not taken).
        // Every one, even after a destructor panicked: a pinned branch must
        // be dropped before the arena reuses its memory (its I/O may still
        // name it), so the first panic goes on only once all are done.
        let mut panic = None;
        clear_all(self.running, &mut panic);
        clear_all(self.outputs, &mut panic);
        if let Some(payload) = panic {
            std::panic::resume_unwind(payload);
        }
    }
}

/// Empties every slot in place, each even if an earlier one's destructor
/// panicked; keeps the first panic.
fn clear_all<T>(slots: &mut [Option<T>], panic: &mut Option<Box<dyn std::any::Any + Send>>) {
    for slot in slots {
        let cleared = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| *slot = None));
        if let Err(payload) = cleared {
            panic.get_or_insert(payload);
        }
    }
}
