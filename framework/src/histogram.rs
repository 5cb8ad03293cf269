//! [`Histogram`]: a latency distribution with one writer (its core) and
//! readers on any thread, in log-linear buckets: two per power of two,
//! from 16 µs to 32 s. Recording is a bucket index from the value's bit
//! length and two relaxed load-and-stores: no allocation, no lock, no
//! read-modify-write, as cheap as a [`Counter`](crate::runtime::Counter).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Finite buckets: `le=16` µs, then `24·2^m` and `32·2^m` µs for
/// `m` in `0..=20` (to 33.5 s).
const FINITE: usize = 1 + 2 * 21;
/// The finite buckets and the one above the last (`+Inf`).
const SLOTS: usize = FINITE + 1;

/// The upper bound, in microseconds, of finite bucket `i`.
const fn bound(i: usize) -> u64 {
    if i == 0 {
        16
    } else {
        let m = (i - 1) / 2;
        if (i - 1) % 2 == 0 {
            24 << m
        } else {
            32 << m
        }
    }
}

/// The bucket of a value of `micros`: the first whose bound is at least it.
fn index(micros: u64) -> usize {
    let x = micros.saturating_sub(1);
    if x < 16 {
        return 0;
    }
    let octave = 63 - x.leading_zeros() as usize; // 4 and up
    let half = ((x >> (octave - 1)) & 1) as usize;
    (1 + (octave - 4) * 2 + half).min(FINITE)
}

/// A distribution of durations, per core: only its core records, any
/// thread reads (see [`Counter`](crate::runtime::Counter) for the one-writer
/// rule, which holds here too: two writers would lose counts).
#[derive(Debug)]
pub struct Histogram {
    buckets: [AtomicU64; SLOTS],
    sum_micros: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_micros: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    /// Records one duration; from the owning thread only.
    pub fn record(&self, value: Duration) {
        let micros = u64::try_from(value.as_micros()).unwrap_or(u64::MAX);
        let bucket = &self.buckets[index(micros)];
        bucket.store(bucket.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let sum = self.sum_micros.load(Ordering::Relaxed);
        self.sum_micros
            .store(sum.wrapping_add(micros), Ordering::Relaxed);
    }

    /// The distribution now, from any thread (each bucket exact; a
    /// record under way may show in its bucket and not yet in the sum).
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed)),
            sum_micros: self.sum_micros.load(Ordering::Relaxed),
        }
    }
}

/// A copy of a [`Histogram`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramSnapshot {
    buckets: [u64; SLOTS],
    sum_micros: u64,
}

impl Default for HistogramSnapshot {
    fn default() -> Self {
        Self {
            buckets: [0; SLOTS],
            sum_micros: 0,
        }
    }
}

impl HistogramSnapshot {
    /// The values recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Their sum.
    pub fn sum(&self) -> Duration {
        Duration::from_micros(self.sum_micros)
    }

    /// Each bucket's upper bound (`None` for the last, unbounded) and the
    /// values at or below it: cumulative, as Prometheus's `_bucket` lines.
    pub fn cumulative(&self) -> impl Iterator<Item = (Option<Duration>, u64)> + '_ {
        let mut total = 0;
        self.buckets.iter().enumerate().map(move |(i, &n)| {
            total += n;
            let le = (i < FINITE).then(|| Duration::from_micros(bound(i)));
            (le, total)
        })
    }

    /// Adds `other`'s counts to these (a server's total over its cores).
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += theirs;
        }
        self.sum_micros = self.sum_micros.wrapping_add(other.sum_micros);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_value_lands_in_the_first_bucket_that_holds_it() {
        for i in 0..FINITE {
            let b = bound(i);
            assert_eq!(index(b), i, "bound {b}");
            if i > 0 {
                assert_eq!(index(bound(i - 1) + 1), i, "above {}", bound(i - 1));
            }
        }
        assert_eq!(index(0), 0);
        assert_eq!(index(bound(FINITE - 1) + 1), FINITE);
        assert_eq!(index(u64::MAX), FINITE);
        assert!((1..FINITE).all(|i| bound(i) > bound(i - 1)));
    }

    #[test]
    fn cumulative_counts_and_sum() {
        let h = Histogram::default();
        h.record(Duration::from_micros(10));
        h.record(Duration::from_micros(100));
        h.record(Duration::from_secs(100));
        let s = h.snapshot();
        assert_eq!(s.count(), 3);
        assert_eq!(s.sum(), Duration::from_micros(100_000_110));
        let all: Vec<_> = s.cumulative().collect();
        assert_eq!(all[0], (Some(Duration::from_micros(16)), 1));
        assert_eq!(all.last(), Some(&(None, 3)));
        let at_128 = all
            .iter()
            .find(|(le, _)| *le == Some(Duration::from_micros(128)));
        assert_eq!(at_128.map(|b| b.1), Some(2));
    }
}
