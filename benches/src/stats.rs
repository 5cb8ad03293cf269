//! Statistics of one cell: median, coefficient of variation and the verdict
//! against the baseline executor.
//!
//! What it measures: the spread of per-iteration results of one
//! executor × workload cell, and whether two cells differ by more than their
//! combined noise. What it does not: confidence intervals or significance
//! tests; with 5–10 iterations on a noisy VM the 2·CV rule below is a
//! regression signal, not a proof.

use std::fmt;

/// Which direction of a metric is an improvement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    /// Throughput-like metrics (ops/s, MB/s).
    Higher,
    /// Latency-like metrics (µs, CPU per request).
    Lower,
}

/// Outcome of comparing one executor's cell with the baseline's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The cell is the baseline itself.
    Baseline,
    /// Better than the baseline by more than the noise bound.
    Faster,
    /// Worse than the baseline by more than the noise bound.
    Slower,
    /// |relative difference| < 2·sqrt(cv_a² + cv_b²).
    WithinNoise,
}

impl Verdict {
    /// Lower-case label used in the table, the CSV and the markdown report.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Baseline => "baseline",
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::WithinNoise => "within noise",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Median of `xs` (mean of the two middle values for an even count);
/// `None` for an empty slice or if any value is NaN.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        Some(v[mid])
    } else {
        Some((v[mid - 1] + v[mid]) / 2.0)
    }
}

/// Arithmetic mean; `None` for an empty slice.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        None
    } else {
        Some(xs.iter().sum::<f64>() / xs.len() as f64)
    }
}

/// Coefficient of variation: sample standard deviation (n − 1) divided by
/// the mean. `Some(0.0)` for a single value; `None` for an empty slice or a
/// zero mean.
pub fn cv(xs: &[f64]) -> Option<f64> {
    let m = mean(xs)?;
    if m == 0.0 {
        return None;
    }
    if xs.len() < 2 {
        return Some(0.0);
    }
    let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (xs.len() - 1) as f64;
    Some(var.sqrt() / m.abs())
}

/// Noise bound of a comparison: 2·sqrt(cv_a² + cv_b²).
pub fn noise_bound(cv_a: f64, cv_b: f64) -> f64 {
    2.0 * (cv_a * cv_a + cv_b * cv_b).sqrt()
}

/// Compares a candidate's median with the baseline's.
///
/// The relative difference is `(candidate − baseline) / baseline`; it is
/// within noise when its magnitude is below [`noise_bound`]. Otherwise the
/// direction given by `better` decides between faster and slower.
pub fn verdict(
    candidate_median: f64,
    candidate_cv: f64,
    baseline_median: f64,
    baseline_cv: f64,
    better: Better,
) -> Verdict {
    let diff = (candidate_median - baseline_median) / baseline_median;
    if !diff.is_finite() || diff == 0.0 || diff.abs() < noise_bound(candidate_cv, baseline_cv) {
        return Verdict::WithinNoise;
    }
    let improved = match better {
        Better::Higher => diff > 0.0,
        Better::Lower => diff < 0.0,
    };
    if improved {
        Verdict::Faster
    } else {
        Verdict::Slower
    }
}

/// "Speed" relative to the baseline, oriented so that > 1 is better:
/// `candidate / baseline` for higher-is-better metrics, the inverse for
/// lower-is-better ones. Used by the charts.
pub fn speedup(candidate_median: f64, baseline_median: f64, better: Better) -> f64 {
    match better {
        Better::Higher => candidate_median / baseline_median,
        Better::Lower => baseline_median / candidate_median,
    }
}

/// Median and CV of a set of per-iteration values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// Number of iterations.
    pub n: usize,
    /// Median of the iterations.
    pub median: f64,
    /// Coefficient of variation (0.0 when it is undefined).
    pub cv: f64,
}

impl Summary {
    /// Summarises `xs`; `None` when it is empty or holds a NaN.
    pub fn of(xs: &[f64]) -> Option<Summary> {
        Some(Summary {
            n: xs.len(),
            median: median(xs)?,
            cv: cv(xs).unwrap_or(0.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn cv_matches_sample_stddev() {
        // mean 5, sample variance ((−3)²+(−1)²+1²+3²)/3 = 20/3
        let xs = [2.0, 4.0, 6.0, 8.0];
        let expected = (20.0f64 / 3.0).sqrt() / 5.0;
        assert!((cv(&xs).unwrap() - expected).abs() < 1e-12);
        assert_eq!(cv(&[5.0]), Some(0.0));
        assert_eq!(cv(&[5.0, 5.0, 5.0]), Some(0.0));
        assert_eq!(cv(&[]), None);
        assert_eq!(cv(&[0.0, 0.0]), None);
    }

    #[test]
    fn verdict_uses_two_sigma_rule() {
        // noise bound = 2·sqrt(0.03² + 0.04²) = 0.10
        assert!((noise_bound(0.03, 0.04) - 0.10).abs() < 1e-12);
        // +9 % is within noise, +11 % is not.
        assert_eq!(
            verdict(109.0, 0.03, 100.0, 0.04, Better::Higher),
            Verdict::WithinNoise
        );
        assert_eq!(
            verdict(111.0, 0.03, 100.0, 0.04, Better::Higher),
            Verdict::Faster
        );
        assert_eq!(
            verdict(89.0, 0.03, 100.0, 0.04, Better::Higher),
            Verdict::Slower
        );
        // For latencies a smaller value is faster.
        assert_eq!(
            verdict(89.0, 0.03, 100.0, 0.04, Better::Lower),
            Verdict::Faster
        );
        assert_eq!(
            verdict(111.0, 0.03, 100.0, 0.04, Better::Lower),
            Verdict::Slower
        );
        // Zero noise: any difference counts, equality is within noise.
        assert_eq!(
            verdict(100.0, 0.0, 100.0, 0.0, Better::Higher),
            Verdict::WithinNoise
        );
        assert_eq!(
            verdict(100.1, 0.0, 100.0, 0.0, Better::Higher),
            Verdict::Faster
        );
        // A zero baseline gives no usable ratio.
        assert_eq!(
            verdict(1.0, 0.0, 0.0, 0.0, Better::Higher),
            Verdict::WithinNoise
        );
    }

    #[test]
    fn speedup_is_oriented() {
        assert_eq!(speedup(200.0, 100.0, Better::Higher), 2.0);
        assert_eq!(speedup(50.0, 100.0, Better::Lower), 2.0);
    }

    #[test]
    fn summary_of_values() {
        let s = Summary::of(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.n, 3);
        assert_eq!(s.median, 2.0);
        assert!((s.cv - 0.5).abs() < 1e-12);
        assert!(Summary::of(&[]).is_none());
    }
}
