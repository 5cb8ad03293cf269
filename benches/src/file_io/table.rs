//! The results of a run: medians per cell, ratios to `std` and to
//! `tokio::fs`, as a text table (stdout) and as Markdown (`file_io.md`).

use super::meter::Sample;
use super::{Impl, Workload};
use crate::stats::median;

/// The results of one cell over the rounds.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// The row group.
    pub workload: Workload,
    /// The column.
    pub imp: Impl,
    /// What came of it.
    pub result: CellResult,
}

/// What came of a cell.
#[derive(Clone, Debug, PartialEq)]
pub enum CellResult {
    /// One sample per round.
    Ran(Vec<Sample>),
    /// Not run, for this reason.
    Skipped(String),
    /// A round failed with this error (its other rounds are dropped).
    Failed(String),
}

/// One line of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// `seq_write/64MiB/64KiB`, ...
    pub workload: String,
    /// The implementation's name.
    pub imp: &'static str,
    /// Median rate: MB/s or operations per second (`unit`).
    pub rate: Option<f64>,
    /// `MB/s` or `op/s`.
    pub unit: &'static str,
    /// Median process CPU µs per operation.
    pub cpu_us: Option<f64>,
    /// (max − min) ÷ median of the rates, in percent.
    pub spread: Option<f64>,
    /// Rate ÷ `std`'s rate.
    pub vs_std: Option<f64>,
    /// Rate ÷ `tokio::fs`'s rate.
    pub vs_tokio: Option<f64>,
    /// Why there is no number, or what to know about it.
    pub note: String,
}

/// The table's lines, in the order of `cells`.
pub fn rows(cells: &[Cell]) -> Vec<Row> {
    let rate_of = |w: &Workload, imp: Impl| -> Option<f64> {
        cells
            .iter()
            .find(|c| c.workload == *w && c.imp == imp)
            .and_then(|c| summary(c).map(|s| s.0))
    };
    cells
        .iter()
        .map(|c| {
            let w = &c.workload;
            let unit = if w.in_bytes() { "MB/s" } else { "op/s" };
            let mut row = Row {
                workload: w.to_string(),
                imp: c.imp.name(),
                rate: None,
                unit,
                cpu_us: None,
                spread: None,
                vs_std: None,
                vs_tokio: None,
                note: String::new(),
            };
            match &c.result {
                CellResult::Skipped(why) => row.note = format!("skipped: {why}"),
                CellResult::Failed(e) => row.note = format!("failed: {e}"),
                CellResult::Ran(samples) => {
                    if let Some((rate, cpu, spread)) = summary(c) {
                        row.rate = Some(rate);
                        row.cpu_us = Some(cpu);
                        row.spread = Some(spread);
                        row.vs_std = rate_of(w, Impl::Std).map(|b| rate / b);
                        row.vs_tokio = rate_of(w, Impl::Tokio).map(|b| rate / b);
                    }
                    row.note = note(c.workload, c.imp, samples);
                }
            }
            row
        })
        .collect()
}

/// Median rate, median CPU µs per operation, and the rates' spread.
fn summary(c: &Cell) -> Option<(f64, f64, f64)> {
    let CellResult::Ran(samples) = &c.result else {
        return None;
    };
    let rates: Vec<f64> = samples
        .iter()
        .map(|s| s.rate(c.workload.in_bytes()))
        .collect();
    let cpus: Vec<f64> = samples.iter().map(Sample::cpu_us_per_op).collect();
    let rate = median(&rates)?;
    let lo = rates.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = rates.iter().cloned().fold(0.0, f64::max);
    Some((rate, median(&cpus)?, (hi - lo) / rate * 100.0))
}

fn note(w: Workload, imp: Impl, samples: &[Sample]) -> String {
    let fallbacks: u64 = samples.iter().map(|s| s.fallbacks).sum();
    match (w, imp) {
        (Workload::RandRead { qd }, Impl::Std) if qd > 1 => {
            "one thread: a sequential loop (QD1)".into()
        }
        (_, Impl::UringNowait) => format!("{fallbacks} reads went to the ring"),
        (
            Workload::Writev { .. }
            | Workload::Readv { .. }
            | Workload::RandRead { .. }
            | Workload::WarmRead,
            Impl::Tokio,
        ) => "spawn_blocking per call".into(),
        _ => String::new(),
    }
}

fn num(x: Option<f64>) -> String {
    match x {
        None => "-".into(),
        Some(x) if x >= 1e6 => format!("{:.2}M", x / 1e6),
        Some(x) if x >= 1e4 => format!("{:.1}k", x / 1e3),
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.2}"),
    }
}

fn ratio(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{x:.2}"))
}

fn fields(r: &Row) -> [String; 9] {
    [
        r.workload.clone(),
        r.imp.to_string(),
        num(r.rate),
        r.unit.to_string(),
        num(r.cpu_us),
        r.spread.map_or("-".into(), |s| format!("{s:.0}%")),
        ratio(r.vs_std),
        ratio(r.vs_tokio),
        r.note.clone(),
    ]
}

const HEADER: [&str; 9] = [
    "workload",
    "impl",
    "rate",
    "unit",
    "cpu µs/op",
    "spread",
    "÷ std",
    "÷ tokio",
    "note",
];

/// The table as aligned text, a blank line between workloads.
pub fn text(rows: &[Row]) -> String {
    let cells: Vec<[String; 9]> = rows.iter().map(fields).collect();
    let mut width = HEADER.map(|h| h.chars().count());
    for c in &cells {
        for (w, f) in width.iter_mut().zip(c) {
            *w = (*w).max(f.chars().count());
        }
    }
    let line = |f: &[String]| -> String {
        let mut s = String::new();
        for (i, (x, w)) in f.iter().zip(width).enumerate() {
            let pad = w.saturating_sub(x.chars().count());
            // Names and notes left, numbers right.
            if i < 2 || i == 8 {
                s.push_str(x);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(x);
            }
            s.push_str("  ");
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(&HEADER.map(String::from));
    for (i, c) in cells.iter().enumerate() {
        if i > 0 && rows[i - 1].workload != rows[i].workload {
            out.push('\n');
        }
        out.push_str(&line(c));
    }
    out
}

/// The table in Markdown.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = format!("| {} |\n", HEADER.join(" | "));
    out.push_str("|---|---|---:|---|---:|---:|---:|---:|---|\n");
    for r in rows {
        out.push_str(&format!("| {} |\n", fields(r).join(" | ")));
    }
    out
}

/// What the columns mean, under the table.
pub const LEGEND: &str = "\
rate: median of the rounds, MB/s (10^6 bytes) or operations per second
of wall-clock time in the timed part. cpu µs/op: median process CPU time
per operation, every thread counted (tokio's blocking pool, percore's
file pool, and io_uring's kernel workers, which are threads of the
process). spread: (max - min) / median of the rounds' rates. ÷ std,
÷ tokio: this rate over std's and tokio::fs's; above 1 is faster.
Writes go to the page cache: the flush and the removal of each file come
after the clock stops. Reads at QD32 are 32 tasks on one thread.
";

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sample(secs: f64, ops: u64) -> Sample {
        Sample {
            wall: Duration::from_secs_f64(secs),
            cpu: Duration::from_secs_f64(secs / 2.0),
            ops,
            bytes: ops * 4096,
            fallbacks: 0,
        }
    }

    #[test]
    fn ratios_to_std_and_tokio() {
        let w = Workload::RandRead { qd: 1 };
        let cell = |imp, secs| Cell {
            workload: w,
            imp,
            result: CellResult::Ran(vec![sample(secs, 1000)]),
        };
        let cells = vec![
            cell(Impl::Std, 1.0),
            cell(Impl::Tokio, 4.0),
            cell(Impl::Uring, 2.0),
            Cell {
                workload: w,
                imp: Impl::Epoll,
                result: CellResult::Skipped("no".into()),
            },
        ];
        let rows = rows(&cells);
        assert_eq!(rows[2].vs_std, Some(0.5));
        assert_eq!(rows[2].vs_tokio, Some(2.0));
        assert_eq!(rows[2].cpu_us, Some(1000.0));
        assert_eq!(rows[3].note, "skipped: no");
        let t = text(&rows);
        assert!(t.contains("skipped: no"));
        assert_eq!(markdown(&rows).lines().count(), 6);
    }
}
