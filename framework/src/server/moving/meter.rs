//! A connection's own count of request boundaries, [`MoveMeter`], so
//! that the move policy's budget sends the connections that fit it.

use crate::core::context;
use crate::core::moves::UNLIMITED;

/// A connection's meter for moves: how many request boundaries it
/// reached in the policy's last interval. A handler keeps one per
/// connection (a plain `Copy` value, no allocation) and asks
/// [`MoveMeter::move_wanted`] at each request boundary instead of
/// [`move_wanted`](crate::move_wanted).
///
/// A hot core's policy orders a budget of boundaries per interval, about
/// half the gap of load between it and the idlest core (see
/// [`MovePolicy`](crate::MovePolicy)); a connection takes an order only
/// when its own rate fits in what is left of it, and spends its rate. So
/// a heavy connection moves when it fits, several light ones when it
/// does not, and a hot core never sends more than half the gap, which
/// would make the other core the hot one. A connection whose meter has
/// not seen a whole interval yet takes only an operator's orders
/// ([`ServerHandle::move_connections`](crate::ServerHandle::move_connections)),
/// which have no budget.
///
/// A connection that moved starts a new meter on its new core.
///
/// ```
/// # #[allow(dead_code)]
/// # async fn serve(mut conn: percore::Connection) -> std::io::Result<()> {
/// use percore::{move_connection, MoveMeter, MoveOutcome};
///
/// let mut meter = MoveMeter::new();
/// while let Some(buf) = conn.read().await? {
///     if let Some(core) = meter.move_wanted() {
///         match move_connection(conn, core, buf.to_vec(), ()).await {
///             MoveOutcome::Moved => return Ok(()),
///             MoveOutcome::Stayed { conn: stayed, .. } => conn = stayed,
///             MoveOutcome::Closed(e) => return Err(e),
///         }
///         continue;
///     }
///     let (res, _) = conn.write_all(buf).await;
///     res?;
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoveMeter {
    /// The low byte of the policy's epoch at the last boundary, above
    /// the count of boundaries in that epoch (24 bits, saturating); 0
    /// before the first boundary. In two halves, and the rate below in a
    /// small float: the meter sits in every HTTP connection's future, in
    /// 6 bytes that its padding holds.
    now: [u16; 2],
    /// Boundaries in the whole epoch before it, as [`pack_rate`] keeps
    /// them ([`UNKNOWN`]: not seen).
    last: u16,
}

/// The count's bits in the meter's `now`.
const COUNT: u32 = (1 << 24) - 1;

/// A meter's `last` before it saw a whole interval.
const UNKNOWN: u16 = u16::MAX;

/// A rate of up to 24 bits in 16: 12 bits of mantissa and 4 of
/// exponent, rounded down (by less than 1 in 4,096). Never [`UNKNOWN`]:
/// the exponent stays below 13.
fn pack_rate(mut rate: u32) -> u16 {
    let mut exp = 0;
    while rate > 0x0fff {
        rate >>= 1;
        exp += 1;
    }
    ((exp << 12) | rate) as u16
}

fn unpack_rate(packed: u16) -> u32 {
    u32::from(packed & 0x0fff) << (packed >> 12)
}

impl Default for MoveMeter {
    fn default() -> MoveMeter {
        MoveMeter::new()
    }
}

impl MoveMeter {
    /// A meter for a new connection: it knows no rate yet.
    pub const fn new() -> MoveMeter {
        MoveMeter {
            now: [0, 0],
            last: UNKNOWN,
        }
    }

    /// Counts a request boundary and says whether this connection should
    /// move now, and to which core: `Some(core)` takes one of this core's
    /// orders (see [`move_wanted`](crate::move_wanted)), and the caller
    /// should then [`move_connection`](crate::move_connection). One
    /// relaxed load while no move is ordered; `None` once the server is
    /// stopping or outside a core.
    #[inline]
    pub fn move_wanted(&mut self) -> Option<usize> {
        context::try_with_core(|core| {
            core.count_boundary();
            if core.is_shutting_down() {
                return None;
            }
            let orders = core.shared.moves.peek();
            self.tick(orders.epoch);
            if orders.left == 0 {
                return None;
            }
            core.shared.moves.take(self.rate())
        })
        .flatten()
    }

    /// Boundaries per interval, as this connection's share of a budget:
    /// the last whole interval's, or this one's if it has more already;
    /// [`UNLIMITED`] while not known.
    fn rate(&self) -> u32 {
        if self.last == UNKNOWN {
            return UNLIMITED;
        }
        unpack_rate(self.last).max(self.now() & COUNT)
    }

    fn now(&self) -> u32 {
        (u32::from(self.now[0]) << 16) | u32::from(self.now[1])
    }

    fn set_now(&mut self, now: u32) {
        self.now = [(now >> 16) as u16, now as u16];
    }

    /// Counts a boundary in `epoch` (its low byte: an epoch is told from
    /// the one before, and a meter idle for 256 intervals miscounts one).
    fn tick(&mut self, epoch: u16) {
        let epoch = epoch as u8;
        let now = self.now();
        let (was, count) = ((now >> 24) as u8, now & COUNT);
        if count != 0 && was == epoch {
            self.set_now((now & !COUNT) | (count + 1).min(COUNT));
            return;
        }
        if count != 0 {
            // A gap of more than one epoch: none in the last.
            let whole = epoch == was.wrapping_add(1);
            self.last = pack_rate(if whole { count } else { 0 });
        }
        self.set_now((u32::from(epoch) << 24) | 1);
    }
}

#[cfg(test)]
mod tests {
    use super::{pack_rate, unpack_rate, MoveMeter, COUNT, UNKNOWN};
    use crate::core::moves::{Orders, UNLIMITED};

    #[test]
    fn a_new_meter_knows_no_rate() {
        let mut meter = MoveMeter::new();
        for _ in 0..50 {
            meter.tick(3);
        }
        assert_eq!(meter.rate(), UNLIMITED);
        // The first epoch was partial; the next turn tells the rate.
        meter.tick(4);
        assert_eq!(meter.rate(), 50);
    }

    #[test]
    fn the_rate_is_the_last_whole_interval() {
        let mut meter = MoveMeter::new();
        meter.tick(0);
        for epoch in 1..=2u16 {
            for _ in 0..10 {
                meter.tick(epoch);
            }
        }
        meter.tick(3);
        assert_eq!(meter.rate(), 10);
        // This interval outgrows the last: the higher counts.
        for _ in 0..19 {
            meter.tick(3);
        }
        assert_eq!(meter.rate(), 20);
    }

    #[test]
    fn a_skipped_interval_counts_as_none() {
        let mut meter = MoveMeter::new();
        meter.tick(0);
        for _ in 0..10 {
            meter.tick(1);
        }
        meter.tick(3);
        assert_eq!(meter.rate(), 1);
    }

    #[test]
    fn the_meter_stays_small() {
        assert_eq!(std::mem::size_of::<MoveMeter>(), 6);
        assert_eq!(MoveMeter::default(), MoveMeter::new());
    }

    #[test]
    fn the_count_saturates() {
        let mut meter = MoveMeter::new();
        meter.tick(0);
        meter.set_now(COUNT - 1);
        meter.tick(0);
        meter.tick(0);
        assert_eq!(meter.now() & COUNT, COUNT);
        meter.tick(1);
        // Rounded down to 12 significant bits.
        assert_eq!(meter.rate(), COUNT & !0xfff);
    }

    #[test]
    fn a_rate_packs_in_16_bits() {
        for rate in [0, 1, 4095, 4096, 4097, 12_345, 1 << 20, COUNT] {
            let back = unpack_rate(pack_rate(rate));
            assert!(
                back <= rate && rate - back <= rate >> 12,
                "{rate} came back {back}"
            );
            assert_ne!(pack_rate(rate), UNKNOWN);
        }
        assert_eq!(unpack_rate(pack_rate(4095)), 4095);
    }

    #[test]
    fn the_epoch_wraps() {
        let mut meter = MoveMeter::new();
        meter.tick(u16::MAX - 1);
        meter.tick(u16::MAX);
        meter.tick(u16::MAX);
        meter.tick(0);
        assert_eq!(meter.rate(), 2);
    }

    #[test]
    fn the_heaviest_that_fits_takes_the_order() {
        // A budget of 100 boundaries: a connection of 150 does not fit,
        // one of 80 does, and then one of 30 no longer does.
        let orders = Orders {
            epoch: 1,
            left: 4,
            budget: 100,
        };
        let rate = |n: u32| {
            let mut meter = MoveMeter::new();
            meter.tick(0);
            for _ in 0..n {
                meter.tick(1);
            }
            meter.tick(2);
            meter.rate()
        };
        assert_eq!(orders.take(rate(150)), None);
        let after = orders.take(rate(80)).unwrap();
        assert_eq!(after.budget, 20);
        assert_eq!(after.take(rate(30)), None);
        assert_eq!(after.take(rate(20)).unwrap().budget, 0);
    }
}
