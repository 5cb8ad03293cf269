//! How many buffers the provided-buffer ring is kept at: the policy of
//! [`BufRing`](super::buf_ring::BufRing)'s shallow ring, kept apart from
//! the ring so that it can be tested alone.
//!
//! The depth follows the number of connections that receive in one turn
//! ([`HEADROOM`] times its recent peak, which decays slowly; at least
//! [`MIN_DEPTH`]), not the number of buffers they take. Many connections
//! each taking a buffer need a deep ring, or they find it dry and fall back
//! to single-shot receives. One connection taking many (a bulk transfer) is
//! better served by a shallow one: its receive falling back to a pool
//! buffer (hot, LIFO) when the ring runs dry costs less than cold buffers
//! do. So a dry ring doubles the depth only when a [`CROWD`] of connections
//! received in that turn.

use std::cell::Cell;

/// The fewest buffers kept in the ring.
const MIN_DEPTH: u32 = 16;

/// The depth over the peak of connections receiving per turn: a burst well
/// above the recent peak must not find the ring dry.
const HEADROOM: u32 = 16;

/// Connections receiving in one turn that make a dry ring a sign of too
/// shallow a ring rather than of a few connections taking all of it.
const CROWD: u32 = 4;

/// Turns per step of the peak's decay: slow, so a ring that had to grow
/// for a crowd stays grown while the crowd comes and goes.
const DECAY_TURNS: u32 = 256;

/// The ring's target depth, updated once per driver turn.
#[derive(Debug)]
pub(crate) struct RingDepth {
    /// Buffers there are: the depth never exceeds it.
    limit: u32,
    depth: Cell<u32>,
    /// The decaying peak of connections that received in one turn.
    peak: Cell<u32>,
    turns: Cell<u32>,
    /// A receive found the ring dry in this turn.
    starved: Cell<bool>,
}

impl RingDepth {
    pub(crate) fn new(limit: u32) -> RingDepth {
        RingDepth {
            limit,
            depth: Cell::new(MIN_DEPTH.min(limit)),
            peak: Cell::new(0),
            turns: Cell::new(0),
            starved: Cell::new(false),
        }
    }

    /// Buffers the ring should hold now.
    pub(crate) fn get(&self) -> u32 {
        self.depth.get()
    }

    /// Records that a receive found the ring dry (`ENOBUFS`).
    pub(crate) fn starved(&self) {
        self.starved.set(true);
    }

    /// Ends a turn in which `receivers` connections took buffers.
    pub(crate) fn end_turn(&self, receivers: u32) {
        let turns = self.turns.get().wrapping_add(1);
        self.turns.set(turns);
        let mut peak = self.peak.get();
        if turns % DECAY_TURNS == 0 {
            peak = peak.saturating_sub(1);
        }
        peak = peak.max(receivers);
        let mut depth = peak.saturating_mul(HEADROOM).max(MIN_DEPTH);
        if self.starved.replace(false) && receivers >= CROWD {
            depth = depth.max(self.depth.get().saturating_mul(2));
            // Raised with it, so the doubled depth decays like any other.
            peak = peak.max(depth.div_ceil(HEADROOM));
        }
        self.peak.set(peak);
        self.depth.set(depth.min(self.limit));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turns(d: &RingDepth, n: u32, receivers: u32) {
        for _ in 0..n {
            d.end_turn(receivers);
        }
    }

    #[test]
    fn starts_shallow_and_never_exceeds_the_buffers() {
        assert_eq!(RingDepth::new(256).get(), MIN_DEPTH);
        assert_eq!(RingDepth::new(4).get(), 4);
        let d = RingDepth::new(64);
        d.end_turn(1000);
        assert_eq!(d.get(), 64);
    }

    #[test]
    fn follows_the_connections_that_receive_and_decays_slowly() {
        let d = RingDepth::new(1024);
        d.end_turn(40);
        assert_eq!(d.get(), 40 * HEADROOM);
        turns(&d, DECAY_TURNS - 2, 1);
        assert_eq!(d.get(), 40 * HEADROOM, "not before the decay step");
        d.end_turn(1);
        assert_eq!(d.get(), 39 * HEADROOM);
        turns(&d, DECAY_TURNS * 100, 1);
        assert_eq!(d.get(), MIN_DEPTH);
    }

    #[test]
    fn a_bulk_transfer_running_the_ring_dry_keeps_it_shallow() {
        let d = RingDepth::new(256);
        for _ in 0..1000 {
            d.starved();
            d.end_turn(1);
        }
        assert_eq!(d.get(), MIN_DEPTH);
    }

    #[test]
    fn a_crowd_running_the_ring_dry_doubles_it_for_a_while() {
        let d = RingDepth::new(1024);
        d.end_turn(CROWD);
        assert_eq!(d.get(), CROWD * HEADROOM);
        d.starved();
        d.end_turn(CROWD);
        assert_eq!(d.get(), 2 * CROWD * HEADROOM);
        d.starved();
        d.end_turn(CROWD);
        assert_eq!(d.get(), 4 * CROWD * HEADROOM);
        turns(&d, DECAY_TURNS - 4, 0);
        assert_eq!(d.get(), 4 * CROWD * HEADROOM, "kept until the decay");
        d.end_turn(0);
        assert_eq!(d.get(), 4 * CROWD * HEADROOM - HEADROOM);
    }
}
