//! Output of a run: the aligned stdout table, `results.csv` and `report.md`
//! (the charts are in `chart`).
//!
//! What it measures: nothing; it formats [`Row`]s. What it does not: judge
//! results beyond the verdict column computed in `stats`. The charts are
//! drawn by `chart`.

use std::fmt::Write as _;

use crate::stats::{Better, Verdict};

/// One executor × cell result.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Category (`socket_latency`, `http_server`, …).
    pub category: String,
    /// Workload within the category (`pingpong/64B`, …).
    pub workload: String,
    /// Executor name.
    pub executor: String,
    /// Median of the iterations.
    pub median: f64,
    /// Unit of `median`.
    pub unit: String,
    /// Coefficient of variation of the iterations.
    pub cv: f64,
    /// Number of iterations.
    pub n: usize,
    /// Direction of improvement.
    pub better: Better,
    /// Speed relative to the baseline, if it ran: above 1 is better for
    /// every unit (`median / baseline median` for rates, the inverse for
    /// latencies and other lower-is-better cells).
    pub speed: Option<f64>,
    /// Verdict against the baseline, if it ran.
    pub verdict: Option<Verdict>,
    /// Server CPU seconds over all measured iterations.
    pub server_cpu_s: Option<f64>,
    /// Operations per server CPU-second over all measured iterations.
    pub ops_per_cpu_s: Option<f64>,
    /// Process-wide allocations per operation.
    pub allocs_per_op: Option<f64>,
}

impl Row {
    /// `category/workload`.
    pub fn cell(&self) -> String {
        format!("{}/{}", self.category, self.workload)
    }
}

/// Formats a number with about four significant digits, no exponent.
pub fn fmt_num(x: f64) -> String {
    if !x.is_finite() {
        return "n/a".to_string();
    }
    let a = x.abs();
    if a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn opt(x: Option<f64>, f: impl Fn(f64) -> String) -> String {
    x.map_or_else(|| "-".to_string(), f)
}

fn table_cells(r: &Row) -> [String; 9] {
    [
        r.cell(),
        r.executor.clone(),
        format!("{} {}", fmt_num(r.median), r.unit),
        format!("{:.1}%", r.cv * 100.0),
        opt(r.speed, |x| format!("{x:.3}")),
        r.verdict.map_or("-", Verdict::label).to_string(),
        opt(r.server_cpu_s, |x| format!("{x:.2}")),
        opt(r.ops_per_cpu_s, fmt_num),
        opt(r.allocs_per_op, |x| format!("{x:.2}")),
    ]
}

const HEADERS: [&str; 9] = [
    "cell",
    "executor",
    "median",
    "cv",
    "÷ tokio-ct",
    "verdict",
    "srv cpu s",
    "ops/cpu-s",
    "allocs/op",
];

/// An aligned plain-text table: `headers`, a rule, then `body`, where
/// `None` is a blank line. Columns in `left` are left-aligned (text), the
/// others right-aligned (numbers).
pub fn align(headers: &[String], body: &[Option<Vec<String>>], left: &[usize]) -> String {
    let mut w: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for c in body.iter().flatten() {
        for (i, s) in c.iter().enumerate() {
            w[i] = w[i].max(s.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, c: &[String]| {
        let mut l = String::new();
        for (i, s) in c.iter().enumerate() {
            let pad = " ".repeat(w[i] - s.chars().count());
            if left.contains(&i) {
                l.push_str(s);
                l.push_str(&pad);
            } else {
                l.push_str(&pad);
                l.push_str(s);
            }
            l.push_str("  ");
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&mut out, headers);
    let total: usize = w.iter().sum::<usize>() + 2 * (w.len() - 1);
    out.push_str(&"-".repeat(total));
    out.push('\n');
    for c in body {
        match c {
            Some(c) => line(&mut out, c),
            None => out.push('\n'),
        }
    }
    out
}

/// The aligned plain-text table, a blank line between cells.
pub fn format_table(rows: &[Row]) -> String {
    let mut body: Vec<Option<Vec<String>>> = Vec::new();
    let mut prev: Option<String> = None;
    for r in rows {
        let cell = r.cell();
        if prev.as_ref().is_some_and(|p| *p != cell) {
            body.push(None);
        }
        body.push(Some(table_cells(r).to_vec()));
        prev = Some(cell);
    }
    align(&HEADERS.map(String::from), &body, &[0, 1, 5])
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A number for the CSV: six significant digits, trailing zeros trimmed.
fn csv_float(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    if v == 0.0 {
        return "0".to_string();
    }
    let digits = (5 - v.abs().log10().floor() as i32).clamp(0, 12) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn csv_num(x: Option<f64>) -> String {
    x.map_or_else(String::new, csv_float)
}

/// `results.csv`: header plus one row per executor × cell.
pub fn to_csv(rows: &[Row]) -> String {
    let mut out = String::from(
        "category,workload,executor,median,unit,cv,speed_vs_tokio_ct,verdict,server_cpu_s,ops_per_cpu_s,allocs_per_op\n",
    );
    for r in rows {
        let fields = [
            csv_field(&r.category),
            csv_field(&r.workload),
            csv_field(&r.executor),
            csv_float(r.median),
            csv_field(&r.unit),
            csv_float(r.cv),
            csv_num(r.speed),
            r.verdict.map_or("", Verdict::label).to_string(),
            csv_num(r.server_cpu_s),
            csv_num(r.ops_per_cpu_s),
            csv_num(r.allocs_per_op),
        ];
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The results table in GitHub markdown.
pub fn markdown_table(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str("| cell | executor | median | cv | ÷ tokio-ct (>1 better) | verdict | server CPU s | ops per CPU-s | allocs/op |\n");
    out.push_str("|---|---|--:|--:|--:|---|--:|--:|--:|\n");
    for r in rows {
        let c = table_cells(r);
        let c: Vec<String> = c.iter().map(|s| md_escape(s)).collect();
        let _ = writeln!(out, "| {} |", c.join(" | "));
    }
    out
}

/// Everything `report.md` says besides the table.
#[derive(Clone, Debug, Default)]
pub struct ReportMeta {
    /// CPU model, nproc, kernel, formatted.
    pub machine: String,
    /// Date of the run.
    pub date: String,
    /// The command line.
    pub command: String,
    /// Quick or full, iterations, window lengths.
    pub mode: String,
    /// Where servers and clients ran.
    pub placement: String,
    /// Lines printed during the run: `note: …` (information), and
    /// `skipped: …`, `failed: …` and `warning: …`.
    pub notes: Vec<String>,
    /// Chart file names.
    pub charts: Vec<String>,
}

/// Whether a line of the run's notes reports something that went wrong
/// (as opposed to information about the run).
fn is_problem(line: &str) -> bool {
    ["skipped:", "failed:", "warning:"]
        .iter()
        .any(|p| line.starts_with(p))
}

/// `report.md`.
pub fn to_markdown(rows: &[Row], meta: &ReportMeta) -> String {
    let mut out = String::from("# percore benchmark report\n\n");
    let _ = writeln!(out, "- date: {}", meta.date);
    let _ = writeln!(out, "- machine: {}", meta.machine);
    let _ = writeln!(out, "- command: `{}`", meta.command);
    let _ = writeln!(out, "- mode: {}", meta.mode);
    let _ = writeln!(out, "- placement: {}", meta.placement);
    let pivot = crate::summary::pivot(rows);
    if !pivot.lines.is_empty() {
        out.push_str(
            "\n## By cell\n\n\
             Medians of each executor side by side; each of percore's executors ÷ tokio-ct, \
             oriented so that above 1 is better for every unit (for µs cells tokio-ct's median \
             ÷ the executor's), with the verdict of the table below; operations per server \
             CPU-second of each executor.\n\n",
        );
        out.push_str(&pivot.markdown());
        let tally = crate::summary::Pivot::tally(rows);
        if !tally.is_empty() {
            let _ = write!(out, "\n{tally}");
        }
        out.push_str("\n## Every executor and cell\n");
    }
    out.push_str(
        "\nEach cell is the median of its iterations; executors alternate round-robin \
         within one run. cv = coefficient of variation; ÷ tokio-ct = speed relative to \
         tokio-ct, above 1 is better for every unit (median ÷ tokio-ct's median for rates, \
         tokio-ct's ÷ the cell's for µs cells); verdict: within noise when \
         |relative difference| < 2·sqrt(cv² + cv_tokio-ct²). Server CPU is the time on a CPU of \
         the server's threads over all measured iterations (each thread's CPU-time \
         clock, in nanoseconds; in 10 ms clock ticks where the kernel refuses it, as the \
         warnings then say); ops per CPU-s is the cell's \
         operations (round trips, chunks, requests or connections) per second of it; \
         allocs/op counts the whole process, clients included.\n\n",
    );
    out.push_str(&markdown_table(rows));
    out.push_str(&crate::pair::markdown(&crate::pair::uring_against_epoll(
        rows,
    )));
    let (problems, notes): (Vec<&String>, Vec<&String>) =
        meta.notes.iter().partition(|n| is_problem(n));
    if !notes.is_empty() {
        out.push_str("\n## Notes\n\n");
        for n in notes {
            let _ = writeln!(out, "- {}", n.strip_prefix("note: ").unwrap_or(n));
        }
    }
    if !problems.is_empty() {
        out.push_str("\n## Skipped and warnings\n\n");
        for n in problems {
            let _ = writeln!(out, "- {n}");
        }
    }
    if !meta.charts.is_empty() {
        out.push_str("\n## Charts\n\n");
        for c in &meta.charts {
            let _ = writeln!(out, "![{c}]({c})");
        }
    }
    out
}

/// A row of the `socket_latency` category for tests: cv 0.05, 5 runs.
#[cfg(test)]
pub(crate) fn test_row(workload: &str, executor: &str, median: f64, better: Better) -> Row {
    Row {
        category: "socket_latency".into(),
        workload: workload.into(),
        executor: executor.into(),
        median,
        unit: "us".into(),
        cv: 0.05,
        n: 5,
        better,
        speed: Some(20.0 / median),
        verdict: Some(Verdict::WithinNoise),
        server_cpu_s: Some(0.5),
        ops_per_cpu_s: Some(123_456.0),
        allocs_per_op: None,
    }
}

#[cfg(test)]
mod tests {
    use super::test_row as row;
    use super::*;

    #[test]
    fn csv_has_header_and_escapes() {
        let mut r = row("pingpong/64B", "tokio-ct", 20.0, Better::Lower);
        r.unit = "a,b".into();
        let csv = to_csv(&[r]);
        let mut lines = csv.lines();
        assert_eq!(
            lines.next().unwrap(),
            "category,workload,executor,median,unit,cv,speed_vs_tokio_ct,verdict,server_cpu_s,ops_per_cpu_s,allocs_per_op"
        );
        assert_eq!(
            lines.next().unwrap(),
            "socket_latency,pingpong/64B,tokio-ct,20,\"a,b\",0.05,1,within noise,0.5,123456,"
        );
        assert!(lines.next().is_none());
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_float(0.24999999999999997), "0.25");
        assert_eq!(csv_float(83244.00000000001), "83244");
        assert_eq!(csv_float(24.510796323529412), "24.5108");
        assert_eq!(csv_float(0.0012996325177018911), "0.00129963");
    }

    #[test]
    fn table_is_aligned_and_grouped() {
        let rows = [
            row("pingpong/64B", "uring", 19.0, Better::Lower),
            row("pingpong/64B", "tokio-ct", 20.0, Better::Lower),
            row("pingpong/1B", "uring", 18.0, Better::Lower),
        ];
        let t = format_table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("cell"));
        assert!(lines[1].chars().all(|c| c == '-'));
        // A blank line separates cells.
        assert_eq!(lines[4], "");
        // The median column ends at the same position on every data row.
        let end = |l: &str| l.find(" us").unwrap();
        assert_eq!(end(lines[2]), end(lines[3]));
        assert_eq!(end(lines[2]), end(lines[5]));
    }

    #[test]
    fn markdown_contains_meta_and_rows() {
        let rows = [row("pingpong/64B", "tokio-ct", 20.0, Better::Lower)];
        let meta = ReportMeta {
            machine: "AMD EPYC, 2 CPUs, Linux 6.18".into(),
            date: "2026-12-01 10:00 UTC".into(),
            command: "cargo bench -p percore-benches -- --quick".into(),
            mode: "quick".into(),
            placement: "servers pinned to CPU 0".into(),
            notes: vec![
                "skipped: uring: x".into(),
                "note: fan-out upstreams: 4".into(),
            ],
            charts: vec!["socket_latency.svg".into()],
        };
        let md = to_markdown(&rows, &meta);
        assert!(md.contains("AMD EPYC, 2 CPUs"));
        assert!(md.contains("`cargo bench -p percore-benches -- --quick`"));
        assert!(md.contains("| socket_latency/pingpong/64B | tokio-ct | 20.00 us | 5.0% |"));
        let notes = md.find("## Notes\n\n- fan-out upstreams: 4\n").unwrap();
        let problems = md
            .find("## Skipped and warnings\n\n- skipped: uring: x\n")
            .unwrap();
        assert!(notes < problems, "{md}");
        assert!(md.contains("![socket_latency.svg](socket_latency.svg)"));
    }

    #[test]
    fn numbers_format() {
        assert_eq!(fmt_num(123_456.7), "123457");
        assert_eq!(fmt_num(123.45), "123.5");
        assert_eq!(fmt_num(12.345), "12.35");
        assert_eq!(fmt_num(1.2346), "1.235");
        assert_eq!(fmt_num(f64::NAN), "n/a");
    }
}
