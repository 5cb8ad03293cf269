//! The run pivoted to one line per cell: every executor's median side by
//! side, percore's executors relative to tokio-ct with their verdicts, and
//! operations per server CPU-second; plus a tally of the verdicts.
//!
//! Why: the main table has one row per executor × cell, so answering "which
//! executor?" from it means reading four rows per cell and dividing by hand.
//!
//! What it measures: nothing; it rearranges [`Row`]s, whose verdicts come
//! from `stats` (the harness's noise rule). Ratios are oriented so that
//! above 1 is better whatever the unit, as in the charts.

use std::fmt::Write as _;

use crate::report::{align, fmt_num, Row};
use crate::server::Executor;
use crate::stats::Verdict;

/// The executors whose ratio to the baseline gets a column of its own:
/// percore's, the ones a reader chooses between.
const COMPARED: [Executor; 2] = [Executor::Uring, Executor::Epoll];

/// One cell of the run.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// `category/workload`.
    pub cell: String,
    /// Unit of the medians.
    pub unit: String,
    /// Median per executor of `executors`, `None` where it did not run.
    pub medians: Vec<Option<f64>>,
    /// Per one of percore's executors that ran: its speed relative to the
    /// baseline (above 1 is better) and the verdict, if the baseline ran.
    pub against_baseline: Vec<Option<(f64, Verdict)>>,
    /// Operations per server CPU-second per executor of `executors`.
    pub ops_per_cpu_s: Vec<Option<f64>>,
}

/// The pivot of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Pivot {
    /// Executors with at least one row, in table order.
    pub executors: Vec<Executor>,
    /// percore's executors among them, which get ratio columns.
    pub compared: Vec<Executor>,
    /// One line per cell, in table order.
    pub lines: Vec<Line>,
}

/// Pivots `rows` (one per executor × cell) to one line per cell.
pub fn pivot(rows: &[Row]) -> Pivot {
    let executors: Vec<Executor> = Executor::ALL
        .into_iter()
        .filter(|e| rows.iter().any(|r| r.executor == e.name()))
        .collect();
    let compared: Vec<Executor> = COMPARED
        .into_iter()
        .filter(|e| executors.contains(e))
        .collect();
    let mut cells: Vec<String> = Vec::new();
    for r in rows {
        let c = r.cell();
        if !cells.contains(&c) {
            cells.push(c);
        }
    }
    let lines = cells
        .into_iter()
        .map(|cell| {
            let of = |e: Executor| {
                rows.iter()
                    .find(|r| r.cell() == cell && r.executor == e.name())
            };
            let unit = rows
                .iter()
                .find(|r| r.cell() == cell)
                .map_or_else(String::new, |r| r.unit.clone());
            Line {
                medians: executors.iter().map(|&e| of(e).map(|r| r.median)).collect(),
                against_baseline: compared
                    .iter()
                    .map(|&e| {
                        let r = of(e)?;
                        Some((r.speed?, r.verdict?))
                    })
                    .collect(),
                ops_per_cpu_s: executors
                    .iter()
                    .map(|&e| of(e).and_then(|r| r.ops_per_cpu_s))
                    .collect(),
                cell,
                unit,
            }
        })
        .collect();
    Pivot {
        executors,
        compared,
        lines,
    }
}

fn dash_or(x: Option<f64>, f: impl Fn(f64) -> String) -> String {
    x.map_or_else(|| "-".to_string(), f)
}

impl Pivot {
    /// The column names; `direction` adds "(>1 better)" to each ratio's
    /// (the console says it once in its legend, to keep the table narrow).
    fn headers(&self, direction: bool) -> Vec<String> {
        let base = Executor::BASELINE.name();
        let mut h = vec!["cell".to_string(), "unit".to_string()];
        h.extend(self.executors.iter().map(|e| e.name().to_string()));
        for e in &self.compared {
            h.push(if direction {
                format!("{} ÷ {base} (>1 better)", e.name())
            } else {
                format!("{} ÷ {base}", e.name())
            });
            h.push("verdict".to_string());
        }
        h.push(format!(
            "ops/cpu-s ({})",
            self.executors
                .iter()
                .map(|e| e.name())
                .collect::<Vec<_>>()
                .join(" / ")
        ));
        h
    }

    fn cells(&self, line: &Line) -> Vec<String> {
        let mut c = vec![line.cell.clone(), line.unit.clone()];
        c.extend(line.medians.iter().map(|m| dash_or(*m, fmt_num)));
        for a in &line.against_baseline {
            c.push(dash_or(a.map(|(s, _)| s), |s| format!("{s:.3}")));
            c.push(a.map_or("-", |(_, v)| v.label()).to_string());
        }
        c.push(
            line.ops_per_cpu_s
                .iter()
                .map(|x| dash_or(*x, |x| format!("{x:.0}")))
                .collect::<Vec<_>>()
                .join(" / "),
        );
        c
    }

    /// Columns whose text is left-aligned: cell, unit and the verdicts.
    fn left_aligned(&self) -> Vec<usize> {
        let first_verdict = 2 + self.executors.len() + 1;
        let mut left = vec![0, 1];
        left.extend((0..self.compared.len()).map(|i| first_verdict + 2 * i));
        left
    }

    /// The aligned plain-text table.
    pub fn text(&self) -> String {
        if self.lines.is_empty() {
            return String::new();
        }
        let body: Vec<Option<Vec<String>>> =
            self.lines.iter().map(|l| Some(self.cells(l))).collect();
        align(&self.headers(false), &body, &self.left_aligned())
    }

    /// The table in GitHub markdown.
    pub fn markdown(&self) -> String {
        if self.lines.is_empty() {
            return String::new();
        }
        let h = self.headers(true);
        let left = self.left_aligned();
        let mut out = format!("| {} |\n|", h.join(" | "));
        for i in 0..h.len() {
            out.push_str(if left.contains(&i) { "---|" } else { "--:|" });
        }
        out.push('\n');
        for l in &self.lines {
            let cells: Vec<String> = self
                .cells(l)
                .iter()
                .map(|c| c.replace('|', "\\|"))
                .collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        out
    }

    /// Per executor other than the baseline: cells won, lost and within
    /// noise against it, on one line; empty when the baseline did not run.
    pub fn tally(rows: &[Row]) -> String {
        let base = Executor::BASELINE.name();
        let mut parts = Vec::new();
        for e in Executor::ALL
            .into_iter()
            .filter(|e| *e != Executor::BASELINE)
        {
            let verdicts: Vec<Verdict> = rows
                .iter()
                .filter(|r| r.executor == e.name())
                .filter_map(|r| r.verdict)
                .collect();
            if verdicts.is_empty() {
                continue;
            }
            let n = |v: Verdict| verdicts.iter().filter(|x| **x == v).count();
            parts.push(format!(
                "{} {} won / {} lost / {} within noise",
                e.name(),
                n(Verdict::Faster),
                n(Verdict::Slower),
                n(Verdict::WithinNoise)
            ));
        }
        if parts.is_empty() {
            return String::new();
        }
        format!("cells against {base}: {}\n", parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Better;

    fn row(workload: &str, executor: &str, median: f64, verdict: Verdict) -> Row {
        let mut r = crate::report::test_row(workload, executor, median, Better::Lower);
        r.verdict = Some(verdict);
        r.speed = Some(20.0 / median);
        r.ops_per_cpu_s = Some(20_000.0 / median);
        r
    }

    fn rows() -> Vec<Row> {
        vec![
            row("a", "uring", 10.0, Verdict::Faster),
            row("a", "epoll", 40.0, Verdict::Slower),
            row("a", "tokio-ct", 20.0, Verdict::Baseline),
            row("a", "tokio-mt", 25.0, Verdict::WithinNoise),
            row("b", "uring", 20.0, Verdict::WithinNoise),
            row("b", "tokio-ct", 20.0, Verdict::Baseline),
        ]
    }

    #[test]
    fn one_line_per_cell_with_oriented_ratios() {
        let p = pivot(&rows());
        assert_eq!(p.executors, Executor::ALL.to_vec());
        assert_eq!(p.compared, COMPARED.to_vec());
        assert_eq!(p.lines.len(), 2);
        let b = &p.lines[1];
        assert_eq!(b.medians, [Some(20.0), None, Some(20.0), None]);
        assert_eq!(
            b.against_baseline,
            [Some((1.0, Verdict::WithinNoise)), None]
        );
        let t = p.text();
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].contains("uring ÷ tokio-ct  verdict"), "{t}");
        assert!(lines[0].contains("ops/cpu-s (uring / epoll / tokio-ct / tokio-mt)"));
        assert_eq!(lines.len(), 4, "{t}");
        assert!(lines[2].contains("2.000  faster"), "{t}");
        assert!(lines[2].contains("0.500  slower"), "{t}");
        assert!(lines[2].ends_with("2000 / 500 / 1000 / 800"), "{t}");
        let md = p.markdown();
        assert!(
            md.contains("| uring ÷ tokio-ct (>1 better) | verdict |"),
            "{md}"
        );
        assert!(
            md.contains("| socket_latency/b | us | 20.00 | - | 20.00 | - | 1.000 | within noise | - | - | 1000 / - / 1000 / - |"),
            "{md}"
        );
    }

    #[test]
    fn tally_counts_verdicts_per_executor() {
        assert_eq!(
            Pivot::tally(&rows()),
            "cells against tokio-ct: uring 1 won / 0 lost / 1 within noise; \
             epoll 0 won / 1 lost / 0 within noise; tokio-mt 0 won / 0 lost / 1 within noise\n"
        );
        assert_eq!(Pivot::tally(&[]), "");
        assert_eq!(pivot(&[]).text(), "");
    }
}
