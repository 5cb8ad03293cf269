//! Memory a core gives back after a burst: what it does, and when a
//! quiet core does it.
//!
//! A burst (a flood of clients, requests with large heads, a proxy's
//! upstream sending endless bodies) grows what a core keeps for reuse:
//! receive buffers in its pool and its buffer ring, spare completion
//! queues, the caches of the handlers (see
//! [`on_give_back`](crate::runtime::on_give_back)), and glibc's heap, which
//! keeps freed memory unless asked. Steady traffic reuses all of it, so it
//! is given back only when the burst is over: once many connections have
//! closed since the core's busiest moment (`server::give_back`), and once
//! the core has seen no I/O for [`QUIET`] after seeing some.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use super::Core;

/// How long a core sees no I/O (no completion, no readiness event) before
/// it gives memory back. Long enough that a core serving requests, even
/// a few a second, is never quiet, nor one whose clients pause for a
/// moment (a give-back empties the pools that make a steady request
/// allocate nothing); short enough that RSS falls soon after a burst.
pub(crate) const QUIET: Duration = Duration::from_secs(2);

/// Free receive buffers a pool keeps after giving back.
const POOL_KEEPS: usize = 16;

/// A cache's give-back, registered by `on_give_back`: `false` once its
/// owner is gone, and the entry can go.
pub(crate) type Hook = Box<dyn Fn() -> bool>;

/// When a core last saw I/O, and whether it owes a give-back.
#[derive(Default)]
pub(crate) struct Quiet {
    /// The last park brought completions or events.
    woke_to_io: Cell<bool>,
    /// The first turn after the latest I/O since the last give-back
    /// (`None`: nothing owed).
    since: Cell<Option<Instant>>,
}

impl Quiet {
    /// Records what a park brought.
    pub(crate) fn parked(&self, events: u32) {
        self.woke_to_io.set(events > 0);
    }

    /// At the start of a turn, at `now`: whether the core has been quiet
    /// for [`QUIET`] since its last I/O, and so owes a give-back now (it
    /// owes none from then on, until I/O comes again).
    pub(crate) fn due(&self, now: Instant) -> bool {
        if self.woke_to_io.replace(false) {
            self.since.set(Some(now));
            return false;
        }
        let due = self.since.get().is_some_and(|since| now >= since + QUIET);
        if due {
            self.since.set(None);
        }
        due
    }

    /// `timeout`, shortened so that a core that owes a give-back wakes
    /// for it.
    pub(crate) fn bound(&self, now: Instant, timeout: Option<Duration>) -> Option<Duration> {
        let Some(since) = self.since.get() else {
            return timeout;
        };
        let left = (since + QUIET).saturating_duration_since(now);
        Some(timeout.map_or(left, |t| t.min(left)))
    }
}

impl Core {
    /// Gives back what the core keeps for reuse beyond a few of each, and
    /// glibc's free heap pages; `why` goes into the log line.
    pub(crate) fn give_back(&self, why: &'static str) {
        // The closing connection's task may be dropped while the driver
        // is in use (a cancellation at the core's end): skip it then.
        let buffers = self
            .io
            .driver
            .try_borrow_mut()
            .map_or(0, |mut driver| driver.give_back());
        let pooled = self.io.pool.shrink_to(POOL_KEEPS);
        let caches = self.run_give_back_hooks();
        let trimmed = crate::sys::release_free_heap();
        tracing::debug!(
            why,
            ring_bytes = buffers,
            pooled_freed = pooled,
            caches,
            trimmed,
            "memory given back"
        );
    }

    /// Registers a cache's give-back.
    pub(crate) fn on_give_back(&self, hook: Hook) {
        self.give_back_hooks.borrow_mut().push(hook);
    }

    /// Runs the caches' give-backs, dropping those whose owner is gone;
    /// returns how many ran. Outside the borrow: a hook may register
    /// another. A hook is user code: its panic is caught and recorded.
    fn run_give_back_hooks(&self) -> usize {
        let mut hooks = std::mem::take(&mut *self.give_back_hooks.borrow_mut());
        hooks.retain(|hook| {
            let mut alive = false;
            crate::unwind::catching(|| alive = hook());
            alive
        });
        let ran = hooks.len();
        let mut kept = self.give_back_hooks.borrow_mut();
        hooks.append(&mut kept);
        *kept = hooks;
        ran
    }
}

/// The hooks of a core's caches (see [`Core::on_give_back`]).
pub(crate) type Hooks = RefCell<Vec<Hook>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_owes_a_give_back_once_quiet_after_io() {
        let quiet = Quiet::default();
        let t0 = Instant::now();
        assert!(!quiet.due(t0), "nothing seen, nothing owed");
        assert_eq!(quiet.bound(t0, None), None, "an idle core sleeps on");

        quiet.parked(3);
        assert!(!quiet.due(t0));
        assert_eq!(quiet.bound(t0, None), Some(QUIET));
        let half = t0 + QUIET / 2;
        quiet.parked(0);
        assert!(!quiet.due(half), "not quiet for long enough");
        assert_eq!(quiet.bound(half, Some(QUIET * 5)), Some(QUIET / 2));
        assert_eq!(quiet.bound(half, Some(QUIET / 4)), Some(QUIET / 4));

        // More I/O starts the wait again.
        quiet.parked(1);
        assert!(!quiet.due(half));
        quiet.parked(0);
        assert!(!quiet.due(t0 + QUIET));
        assert!(quiet.due(half + QUIET));
        assert!(!quiet.due(half + QUIET * 2), "owed once");
        assert_eq!(quiet.bound(half + QUIET * 2, None), None);
    }
}
