//! Memory given back after a spike of connections.
//!
//! A spike (a flood of slow clients, a burst of new ones) grows the
//! core's heap and its pool of receive buffers, and their closing frees
//! that memory to the allocator, which keeps it: the process's RSS would
//! stay at the spike's height. So once a core has closed many connections
//! since its busiest moment, it gives back what it keeps for reuse
//! (`core::give_back` says what). Steady traffic, whose open count stays
//! level, never triggers it; a core that falls quiet gives back too,
//! whatever its connections did.

use std::cell::Cell;

use crate::core::context;

/// Connections closed since the core's busiest moment that make it give
/// memory back. At a few KiB each, less is not worth a trim.
const CLOSED_SINCE_PEAK: usize = 256;

/// Connections whose closing, when it leaves the core with none, makes
/// it give memory back: the last of a spike closes in small numbers.
const EMPTIED_AFTER: usize = 64;

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

    /// Counts a connection closed; whether that makes enough closed
    /// since the peak to give memory back (see [`now`]).
    pub(crate) fn closed_and_fell(&self) -> bool {
        self.active.set(self.active.get() - 1);
        self.fell()
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

/// Gives memory back, on the core whose connections fell: it runs as the
/// connection that made the fall closes, no timer needed.
pub(crate) fn now() {
    context::try_with_core(|core| core.give_back("connections fell from their peak"));
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
            assert!(!level.closed_and_fell(), "short of the threshold");
        }
        assert!(level.closed_and_fell());
        assert!(!level.fell(), "the peak starts again after a fall");
        // The last few of a spike, once all closed.
        for _ in 0..level.active.get() - 1 {
            assert!(!level.closed_and_fell(), "some still open");
        }
        assert!(level.closed_and_fell(), "all {EMPTIED_AFTER}+ closed");
        // Churn at a level never falls.
        for _ in 0..10_000 {
            level.opened();
            assert!(!level.closed_and_fell());
        }
    }
}
