//! A core's orders to move connections elsewhere: how many of its
//! connections should leave, for which core, and how much load they may
//! take with them. The policy (see `server::moving`) or an operator's
//! call sets them; a connection that reaches a request boundary takes
//! one and moves.
//!
//! The count, the budget and the policy's epoch share one word, so that
//! a boundary with no orders reads all of them in one relaxed load, and
//! a take updates them together.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// A budget no take spends: an operator's orders, which move any
/// connection.
pub(crate) const UNLIMITED: u32 = u32::MAX;

/// What the orders' word holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Orders {
    /// The policy's look this was published at (it wraps).
    pub(crate) epoch: u16,
    /// How many connections are still to go.
    pub(crate) left: u16,
    /// How many request boundaries per interval they may take with them
    /// ([`UNLIMITED`]: any).
    pub(crate) budget: u32,
}

impl Orders {
    fn pack(self) -> u64 {
        (u64::from(self.epoch) << 48) | (u64::from(self.left) << 32) | u64::from(self.budget)
    }

    fn unpack(word: u64) -> Orders {
        Orders {
            epoch: (word >> 48) as u16,
            left: (word >> 32) as u16,
            budget: word as u32,
        }
    }

    /// The orders after a connection of `rate` boundaries per interval
    /// took one: `None` when none is left or its rate does not fit in
    /// the budget. A rate of [`UNLIMITED`] (not known yet) fits only an
    /// unlimited budget, and 0 (a caller without a meter) fits any.
    pub(crate) fn take(self, rate: u32) -> Option<Orders> {
        let left = self.left.checked_sub(1)?;
        let budget = if self.budget == UNLIMITED {
            UNLIMITED
        } else {
            self.budget.checked_sub(rate)?
        };
        Some(Orders {
            left,
            budget,
            ..self
        })
    }
}

/// How many connections should leave this core, where to, and with how
/// much load. Read on every request boundary of a connection that can
/// move: one relaxed load while there are none.
#[derive(Debug, Default)]
pub(crate) struct MoveOrders {
    /// The core they go to.
    target: AtomicUsize,
    /// The [`Orders`], packed.
    word: AtomicU64,
}

impl MoveOrders {
    /// Orders `count` connections to core `target` (at most `u16::MAX`)
    /// with `budget` boundaries per interval among them, replacing the
    /// orders before (0 cancels them). `turn` starts the policy's next
    /// epoch: the meters of the core's connections count their
    /// boundaries from it.
    pub(crate) fn set(&self, target: usize, count: usize, budget: u32, turn: bool) {
        let mut orders = Orders::unpack(self.word.load(Ordering::Acquire));
        orders.epoch = orders.epoch.wrapping_add(u16::from(turn));
        // No connection takes an order for the old target meanwhile.
        orders.left = 0;
        self.word.store(orders.pack(), Ordering::Release);
        self.target.store(target, Ordering::Release);
        orders.left = count.min(usize::from(u16::MAX)) as u16;
        orders.budget = budget;
        self.word.store(orders.pack(), Ordering::Release);
    }

    /// The orders now: one relaxed load.
    #[inline]
    pub(crate) fn peek(&self) -> Orders {
        Orders::unpack(self.word.load(Ordering::Relaxed))
    }

    /// Takes one order for a connection of `rate` boundaries per
    /// interval (see [`Orders::take`]): the core it should move to.
    pub(crate) fn take(&self, rate: u32) -> Option<usize> {
        self.word
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
                Orders::unpack(word).take(rate).map(Orders::pack)
            })
            .ok()
            .map(|_| self.target.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::{MoveOrders, Orders, UNLIMITED};

    #[test]
    fn the_word_packs_and_unpacks() {
        let orders = Orders {
            epoch: 65_535,
            left: 3,
            budget: 123_456,
        };
        assert_eq!(Orders::unpack(orders.pack()), orders);
    }

    #[test]
    fn a_take_spends_the_rate_from_the_budget() {
        let orders = Orders {
            epoch: 7,
            left: 4,
            budget: 1000,
        };
        let after = orders.take(600).unwrap();
        assert_eq!((after.epoch, after.left, after.budget), (7, 3, 400));
        // The next heavy one does not fit; a light one does.
        assert_eq!(after.take(600), None);
        assert_eq!(after.take(400).unwrap().budget, 0);
        // A caller without a meter takes any order, and spends nothing.
        assert_eq!(after.take(0).unwrap().budget, 400);
        // A meter that does not know its rate yet takes none.
        assert_eq!(after.take(UNLIMITED), None);
    }

    #[test]
    fn the_count_caps_the_takes() {
        let orders = Orders {
            epoch: 0,
            left: 1,
            budget: 1000,
        };
        let after = orders.take(1).unwrap();
        assert_eq!(after.take(1), None);
    }

    #[test]
    fn an_unlimited_budget_takes_any_rate() {
        let orders = Orders {
            epoch: 0,
            left: 2,
            budget: UNLIMITED,
        };
        let after = orders.take(UNLIMITED).unwrap().take(5).unwrap();
        assert_eq!((after.left, after.budget), (0, UNLIMITED));
    }

    #[test]
    fn set_replaces_and_turns_the_epoch() {
        let moves = MoveOrders::default();
        moves.set(1, 2, 100, true);
        assert_eq!(moves.peek().epoch, 1);
        assert_eq!(moves.take(60), Some(1));
        assert_eq!(moves.take(60), None);
        assert_eq!(moves.take(40), Some(1));
        assert_eq!(moves.take(0), None);
        // An operator's orders keep the epoch.
        moves.set(0, 70_000, UNLIMITED, false);
        let orders = moves.peek();
        assert_eq!((orders.epoch, orders.left), (1, u16::MAX));
        moves.set(0, 0, 0, true);
        assert_eq!(moves.peek().epoch, 2);
        assert_eq!(moves.take(0), None);
    }
}
