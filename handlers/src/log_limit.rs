//! At most one log line a second per core for a failure that can repeat
//! on every request (a service that keeps failing, an upstream that is
//! down), the next line saying how many were left out: the log shows the
//! failure without being flooded by it.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Least time between two lines of one limit.
pub(crate) const INTERVAL: Duration = Duration::from_secs(1);

/// One core's limit for one kind of line. Plain `Cell`s: per core.
#[derive(Debug, Default)]
pub(crate) struct LogLimit {
    /// When the last line was written.
    last: Cell<Option<Instant>>,
    /// Lines left out since then.
    suppressed: Cell<u64>,
}

impl LogLimit {
    /// Whether a line may be written at `now`: if so, how many were left
    /// out since the last one (and the count starts again); if not,
    /// `None`, and this one is counted as left out.
    pub(crate) fn admit(&self, now: Instant) -> Option<u64> {
        let recent = self
            .last
            .get()
            .is_some_and(|last| now.saturating_duration_since(last) < INTERVAL);
        if recent {
            self.suppressed.set(self.suppressed.get() + 1);
            return None;
        }
        self.last.set(Some(now));
        Some(self.suppressed.replace(0))
    }
}

/// The end of a rate-limited line: nothing when none was left out, else
/// ` (N more WHAT not logged since the last line)`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeftOut {
    pub(crate) count: u64,
    /// What was left out, singular and plural: `("failure", "failures")`.
    pub(crate) what: (&'static str, &'static str),
}

impl std::fmt::Display for LeftOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.count {
            0 => Ok(()),
            1 => write!(
                f,
                " (1 more {} not logged since the last line)",
                self.what.0
            ),
            n => write!(
                f,
                " ({n} more {} not logged since the last line)",
                self.what.1
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At most one line per interval; the next line carries the count of
    /// lines left out since the last, which then starts again.
    #[test]
    fn one_line_per_interval_with_the_count_left_out() {
        let limit = LogLimit::default();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(INTERVAL, Duration::from_secs(1));
        assert_eq!(limit.admit(t0), Some(0), "the first line is written");
        assert_eq!(limit.admit(at(1)), None);
        assert_eq!(limit.admit(at(500)), None);
        assert_eq!(limit.admit(at(999)), None);
        assert_eq!(
            limit.admit(at(1000)),
            Some(3),
            "a second later, with 3 left out"
        );
        assert_eq!(limit.admit(at(1500)), None);
        assert_eq!(
            limit.admit(at(9000)),
            Some(1),
            "a quiet spell keeps the count"
        );
        assert_eq!(limit.admit(at(10_000)), Some(0), "and then starts it again");
        // An instant before the last line (another reading of the clock) is
        // within the interval, never an underflow.
        assert_eq!(limit.admit(at(9500)), None);
    }
}
