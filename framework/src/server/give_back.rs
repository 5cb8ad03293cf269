//! Memory given back after a spike of connections.
//!
//! A spike (a flood of slow clients, a burst of new ones) grows the
//! core's heap and its pool of receive buffers, and their closing frees
//! that memory to the allocator, which keeps it: the process's RSS would
//! stay at the spike's height. So once a core has closed many connections
//! since its busiest moment, it drops the receive buffers its pool keeps
//! beyond a few, and asks glibc's allocator to return its free pages to
//! the kernel (`malloc_trim`), which it otherwise does only at the top of
//! a heap. Steady traffic, whose open count stays level, never triggers
//! it.

use std::cell::Cell;
use std::time::Duration;

use crate::core::context;

/// How often a core looks at its counts.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Connections closed since the core's busiest moment that make it give
/// memory back. At a few KiB each, less is not worth a trim.
const CLOSED_SINCE_PEAK: usize = 256;

/// Connections whose closing, when it leaves the core with none, makes
/// it give memory back: the last of a spike closes in small numbers.
const EMPTIED_AFTER: usize = 64;

/// Free receive buffers a pool keeps after giving back.
const POOL_KEEPS: usize = 16;

/// A core's open connections and the most it had since it last gave back.
#[derive(Default)]
pub(crate) struct Level {
    pub(crate) active: Cell<usize>,
    peak: Cell<usize>,
}

impl Level {
    pub(crate) fn opened(&self) {
        let active = self.active.get() + 1;
        self.active.set(active);
        self.peak.set(self.peak.get().max(active));
    }

    pub(crate) fn closed(&self) {
        self.active.set(self.active.get() - 1);
    }

    /// Whether enough have closed since the peak to give memory back
    /// (many, or all of a few dozen); if so, the peak starts again from
    /// now.
    fn fell(&self) -> bool {
        let (active, peak) = (self.active.get(), self.peak.get());
        let fell = peak >= active + CLOSED_SINCE_PEAK || (active == 0 && peak >= EMPTIED_AFTER);
        if fell {
            self.peak.set(active);
        }
        fell
    }
}

/// Runs for as long as the core accepts: gives memory back each time its
/// open connections have fallen far from their peak.
pub(crate) async fn after_spikes(level: &Level) {
    loop {
        crate::time::sleep(CHECK_EVERY).await;
        if level.fell() {
            let pooled = context::with_core(|core| {
                core.io.driver.borrow_mut().give_back();
                core.io.pool.shrink_to(POOL_KEEPS)
            });
            let trimmed = crate::sys::release_free_heap();
            tracing::debug!(
                open = level.active.get(),
                pooled_freed = pooled,
                trimmed,
                "connections fell from their peak: memory given back"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_falls_only_after_many_closes() {
        let level = Level::default();
        for _ in 0..400 {
            level.opened();
        }
        for _ in 0..CLOSED_SINCE_PEAK - 1 {
            level.closed();
        }
        assert!(!level.fell(), "one short of the threshold");
        level.closed();
        assert!(level.fell());
        assert!(!level.fell(), "the peak starts again after a fall");
        // The last few of a spike, once all closed.
        for _ in 0..level.active.get() - 1 {
            level.closed();
        }
        assert!(!level.fell(), "one still open");
        level.closed();
        assert!(level.fell(), "all {EMPTIED_AFTER}+ closed");
        // Churn at a level never falls.
        for _ in 0..10_000 {
            level.opened();
            level.closed();
        }
        assert!(!level.fell());
    }
}
