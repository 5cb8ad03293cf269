//! A connection's deadlines in 8 bytes each, where an `Instant` takes 16.
//!
//! [`State`](super::state::State) keeps four points in time for every
//! connection, idle ones too; as nanoseconds since an epoch of the process
//! they cost 32 bytes less per connection, and `Option<Moment>` is no
//! larger than a `Moment`.

use std::cell::Cell;
use std::num::NonZeroU64;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A point in time, as nanoseconds (plus one) since [`epoch`]: 584 years
/// of range. An `Instant` before the epoch is taken as the epoch itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Moment(NonZeroU64);

/// The longest a deadline reaches, as [`after`](crate::http::wire::after)
/// allows: "no deadline" is a century ahead.
const CENTURY: Duration = Duration::from_secs(100 * 365 * 86_400);

/// The first time a connection asked. A point taken at the start of that
/// core's turn may come just before it, and counts from it: a
/// microsecond at most, once per process.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

thread_local! {
    /// The core's turn clock and its moment, converted once per turn: the
    /// requests of a turn ask for it several times each.
    static TURN: Cell<(Option<Instant>, Moment)> = const { Cell::new((None, Moment(NonZeroU64::MIN))) };
}

impl Moment {
    #[inline]
    pub(super) fn from(at: Instant) -> Moment {
        let nanos = at.saturating_duration_since(epoch()).as_nanos();
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX - 1);
        Moment(NonZeroU64::MIN.saturating_add(nanos))
    }

    /// The core's turn clock ([`percore::time::now`]) as a moment.
    #[inline]
    pub(super) fn now() -> Moment {
        let now = percore::time::now();
        TURN.with(|turn| match turn.get() {
            (Some(at), moment) if at == now => moment,
            _ => {
                let moment = Moment::from(now);
                turn.set((Some(now), moment));
                moment
            }
        })
    }

    /// `timeout` after this moment, a century at most.
    #[inline]
    pub(super) fn after(self, timeout: Duration) -> Moment {
        let nanos = timeout.min(CENTURY).as_nanos() as u64;
        Moment(self.0.saturating_add(nanos))
    }

    /// The `Instant` this stands for. Deadlines reach a century ahead at
    /// most; two are well inside what an `Instant` holds (its seconds are
    /// an `i64`), so the add cannot fail, and would give the epoch rather
    /// than panic.
    #[inline]
    pub(super) fn instant(self) -> Instant {
        let since = Duration::from_nanos(self.0.get() - 1).min(2 * CENTURY);
        let epoch = epoch();
        epoch.checked_add(since).unwrap_or(epoch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A point in time after the epoch: one before it would be the epoch.
    fn after_epoch() -> Instant {
        epoch();
        Instant::now()
    }

    #[test]
    fn an_instant_comes_back_to_the_nanosecond() {
        let now = after_epoch();
        for later in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_secs(86_400 * 400),
        ] {
            assert_eq!(Moment::from(now + later).instant(), now + later);
        }
    }

    #[test]
    fn order_is_kept_and_the_past_is_the_epoch() {
        let now = after_epoch();
        let (a, b) = (
            Moment::from(now),
            Moment::from(now + Duration::from_micros(1)),
        );
        assert!(a < b);
        let long_ago = epoch().checked_sub(Duration::from_secs(1));
        if let Some(long_ago) = long_ago {
            assert_eq!(Moment::from(long_ago).instant(), epoch());
        }
        assert_eq!(std::mem::size_of::<Option<Moment>>(), 8);
    }

    #[test]
    fn a_century_ahead_is_kept() {
        let now = after_epoch();
        let far = crate::http::wire::after(now, Duration::MAX);
        assert_eq!(Moment::from(far).instant(), far);
        assert_eq!(Moment::from(now).after(Duration::MAX).instant(), far);
        let soon = now + Duration::from_millis(1500);
        assert_eq!(
            Moment::from(now)
                .after(Duration::from_millis(1500))
                .instant(),
            soon
        );
    }
}
