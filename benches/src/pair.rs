//! percore's two executors side by side: for every cell both ran, io_uring
//! against epoll, by the same noise rule as the comparison with tokio-ct.
//!
//! Why: the main table compares each executor with tokio-ct, so a reader
//! choosing between percore's own backends would have to divide the two
//! medians by hand and guess whether the difference is noise.
//!
//! What it measures: nothing; it pairs [`Row`]s. Its verdict is as sure as
//! the cells' CVs allow, and in quick mode (few iterations) that is not
//! very sure.

use std::fmt::Write as _;

use crate::report::{fmt_num, Row};
use crate::stats::{speedup, verdict, Verdict};

/// One cell that both executors ran.
#[derive(Clone, Debug, PartialEq)]
pub struct Pair {
    /// `category/workload`.
    pub cell: String,
    /// io_uring's speed relative to epoll's, oriented so that above 1 is
    /// better for io_uring (the inverse ratio for latency cells).
    pub uring_speed: f64,
    /// Which is better beyond the noise bound, if either.
    pub winner: Option<&'static str>,
    /// io_uring's operations per server CPU-second ÷ epoll's.
    pub cpu_ratio: Option<f64>,
}

/// The cells both `uring` and `epoll` rows exist for, in table order.
pub fn uring_against_epoll(rows: &[Row]) -> Vec<Pair> {
    let of = |cell: &str, executor: &str| {
        rows.iter()
            .find(|r| r.executor == executor && r.cell() == cell)
    };
    let mut pairs = Vec::new();
    for uring in rows.iter().filter(|r| r.executor == "uring") {
        let cell = uring.cell();
        let Some(epoll) = of(&cell, "epoll") else {
            continue;
        };
        let winner = match verdict(uring.median, uring.cv, epoll.median, epoll.cv, uring.better) {
            Verdict::Faster => Some("uring"),
            Verdict::Slower => Some("epoll"),
            Verdict::WithinNoise | Verdict::Baseline => None,
        };
        let cpu_ratio = match (uring.ops_per_cpu_s, epoll.ops_per_cpu_s) {
            (Some(u), Some(e)) if e > 0.0 => Some(u / e),
            _ => None,
        };
        pairs.push(Pair {
            cell,
            uring_speed: speedup(uring.median, epoll.median, uring.better),
            winner,
            cpu_ratio,
        });
    }
    pairs
}

fn winner_text(p: &Pair) -> &'static str {
    match p.winner {
        Some("uring") => "uring better",
        Some(_) => "epoll better",
        None => "within noise",
    }
}

/// The comparison as a markdown section for `report.md` (empty when no
/// cell ran on both).
pub fn markdown(pairs: &[Pair]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\n## io_uring against epoll\n\n\
         uring's speed ÷ epoll's, oriented so that above 1 favours uring (for µs cells the \
         inverse of the medians' ratio); the verdict uses the same noise bound as the main \
         table, with epoll's CV in place of tokio-ct's; ops per CPU-s is uring's ÷ epoll's.\n\n\
         | cell | uring ÷ epoll (>1 better) | verdict | ops per CPU-s, uring ÷ epoll (>1 better) |\n\
         |---|--:|---|--:|\n",
    );
    for p in pairs {
        let cpu = p.cpu_ratio.map_or_else(|| "-".to_string(), fmt_num);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            p.cell.replace('|', "\\|"),
            fmt_num(p.uring_speed),
            winner_text(p),
            cpu
        );
    }
    out
}

/// A few lines for the console: how many cells each executor won.
pub fn summary(pairs: &[Pair]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let count = |w: Option<&str>| pairs.iter().filter(|p| p.winner == w).count();
    let mut out = format!(
        "uring against epoll, {} cells both ran: uring better in {}, epoll better in {}, \
         within noise in {} (report.md lists them).\n",
        pairs.len(),
        count(Some("uring")),
        count(Some("epoll")),
        count(None)
    );
    for p in pairs.iter().filter(|p| p.winner.is_some()) {
        let _ = writeln!(
            out,
            "  {}: {} (uring ÷ epoll {}, >1 better)",
            p.cell,
            winner_text(p),
            fmt_num(p.uring_speed)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Better;

    fn row(workload: &str, executor: &str, median: f64, cv: f64, better: Better) -> Row {
        Row {
            category: "c".into(),
            workload: workload.into(),
            executor: executor.into(),
            median,
            unit: if better == Better::Lower {
                "us"
            } else {
                "ops/s"
            }
            .into(),
            cv,
            n: 9,
            better,
            speed: None,
            verdict: None,
            server_cpu_s: Some(1.0),
            ops_per_cpu_s: Some(median),
            allocs_per_op: None,
        }
    }

    #[test]
    fn pairs_cells_both_ran_with_oriented_verdicts() {
        let rows = [
            row("rate", "uring", 120.0, 0.01, Better::Higher),
            row("rate", "epoll", 100.0, 0.01, Better::Higher),
            row("rate", "tokio-ct", 90.0, 0.01, Better::Higher),
            row("lat", "uring", 50.0, 0.01, Better::Lower),
            row("lat", "epoll", 40.0, 0.01, Better::Lower),
            row("noisy", "uring", 105.0, 0.2, Better::Higher),
            row("noisy", "epoll", 100.0, 0.2, Better::Higher),
            row("alone", "uring", 1.0, 0.0, Better::Higher),
        ];
        let pairs = uring_against_epoll(&rows);
        let cells: Vec<&str> = pairs.iter().map(|p| p.cell.as_str()).collect();
        assert_eq!(cells, ["c/rate", "c/lat", "c/noisy"]);
        assert_eq!(pairs[0].winner, Some("uring"));
        assert!((pairs[0].uring_speed - 1.2).abs() < 1e-9);
        assert_eq!(pairs[1].winner, Some("epoll"), "a higher latency loses");
        assert!((pairs[1].uring_speed - 0.8).abs() < 1e-9);
        assert_eq!(pairs[2].winner, None);
        let md = markdown(&pairs);
        assert!(
            md.contains("| c/rate | 1.200 | uring better | 1.200 |"),
            "{md}"
        );
        assert!(md.contains("| c/lat | 0.800 | epoll better |"), "{md}");
        let text = summary(&pairs);
        assert!(text.starts_with("uring against epoll, 3 cells both ran: uring better in 1, epoll better in 1, within noise in 1"), "{text}");
        assert!(!text.contains("c/noisy"), "{text}");
    }

    #[test]
    fn nothing_to_say_without_both() {
        let rows = [row("rate", "epoll", 1.0, 0.0, Better::Higher)];
        assert!(uring_against_epoll(&rows).is_empty());
        assert_eq!(markdown(&[]), "");
        assert_eq!(summary(&[]), "");
    }
}
