//! Output of a run: the aligned stdout table, `results.csv`, `report.md` and
//! one hand-written SVG bar chart per category.
//!
//! What it measures: nothing; it formats [`Row`]s. What it does not: judge
//! results beyond the verdict column computed in `stats` (the charts show
//! speed relative to tokio-ct oriented so that longer is better, each bar
//! with a whisker of the same noise bound the verdict uses).

use std::fmt::Write as _;

use crate::stats::{noise_bound, speedup, Better, Verdict};

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
    /// `median / baseline median` (raw, not oriented), if the baseline ran.
    pub ratio: Option<f64>,
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
        opt(r.ratio, |x| format!("{x:.3}")),
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
    "ratio",
    "verdict",
    "srv cpu s",
    "ops/cpu-s",
    "allocs/op",
];

/// The aligned plain-text table, a blank line between cells.
pub fn format_table(rows: &[Row]) -> String {
    let cells: Vec<[String; 9]> = rows.iter().map(table_cells).collect();
    let mut w = HEADERS.map(str::len);
    for c in &cells {
        for (i, s) in c.iter().enumerate() {
            w[i] = w[i].max(s.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, c: &[String]| {
        let mut l = String::new();
        for (i, s) in c.iter().enumerate() {
            let pad = w[i] - s.chars().count();
            // Text columns left-aligned, numbers right-aligned.
            if i < 2 || i == 5 {
                l.push_str(s);
                l.push_str(&" ".repeat(pad));
            } else {
                l.push_str(&" ".repeat(pad));
                l.push_str(s);
            }
            l.push_str("  ");
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&mut out, &HEADERS.map(String::from));
    let total: usize = w.iter().sum::<usize>() + 2 * (w.len() - 1);
    out.push_str(&"-".repeat(total));
    out.push('\n');
    let mut prev: Option<String> = None;
    for (r, c) in rows.iter().zip(&cells) {
        let cell = r.cell();
        if prev.as_ref().is_some_and(|p| *p != cell) {
            out.push('\n');
        }
        line(&mut out, c);
        prev = Some(cell);
    }
    out
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
        "category,workload,executor,median,unit,cv,ratio_to_tokio_ct,verdict,server_cpu_s,ops_per_cpu_s,allocs_per_op\n",
    );
    for r in rows {
        let fields = [
            csv_field(&r.category),
            csv_field(&r.workload),
            csv_field(&r.executor),
            csv_float(r.median),
            csv_field(&r.unit),
            csv_float(r.cv),
            csv_num(r.ratio),
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
    out.push_str("| cell | executor | median | cv | ratio to tokio-ct | verdict | server CPU s | ops per CPU-s | allocs/op |\n");
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
    /// `skipped: …` and warning lines printed during the run.
    pub notes: Vec<String>,
    /// Chart file names.
    pub charts: Vec<String>,
}

/// `report.md`.
pub fn to_markdown(rows: &[Row], meta: &ReportMeta) -> String {
    let mut out = String::from("# percore benchmark report\n\n");
    let _ = writeln!(out, "- date: {}", meta.date);
    let _ = writeln!(out, "- machine: {}", meta.machine);
    let _ = writeln!(out, "- command: `{}`", meta.command);
    let _ = writeln!(out, "- mode: {}", meta.mode);
    let _ = writeln!(out, "- placement: {}", meta.placement);
    out.push_str(
        "\nEach cell is the median of its iterations; executors alternate round-robin \
         within one run. cv = coefficient of variation; ratio = median / tokio-ct median \
         (for µs cells lower is better); verdict: within noise when \
         |relative difference| < 2·sqrt(cv² + cv_tokio-ct²). Server CPU is utime + stime of \
         the server's threads over all measured iterations; ops per CPU-s is the cell's \
         operations (round trips, chunks, requests or connections) per second of it; \
         allocs/op counts the whole process, clients included.\n\n",
    );
    out.push_str(&markdown_table(rows));
    out.push_str(&crate::pair::markdown(&crate::pair::uring_against_epoll(
        rows,
    )));
    if !meta.notes.is_empty() {
        out.push_str("\n## Skipped and warnings\n\n");
        for n in &meta.notes {
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

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const COLORS: [&str; 6] = [
    "#1f77b4", "#ff7f0e", "#7f7f7f", "#2ca02c", "#9467bd", "#8c564b",
];

/// One bar of a chart: an executor's speed relative to the baseline and
/// the whisker of that comparison's noise bound (none for the baseline
/// itself).
struct Bar {
    executor: usize,
    speed: f64,
    whisker: Option<(f64, f64)>,
}

/// The speeds around `speed` within `bound` of it as the verdict judges:
/// it compares medians relative to the baseline's, so a throughput speed
/// (candidate / baseline) is within noise of 1.0 when it is within
/// ± `bound` of it, and a latency speed (baseline / candidate) when
/// 1.0 / speed is. So 1.0 lies in the whisker exactly when the verdict
/// is within noise.
fn whisker(speed: f64, bound: f64, better: Better) -> (f64, f64) {
    match better {
        Better::Higher => (speed - bound, speed + bound),
        Better::Lower => (speed * (1.0 - bound), speed * (1.0 + bound)),
    }
}

/// A horizontal grouped bar chart of one category: per cell, one bar per
/// executor showing its speed relative to `baseline` (longer is better;
/// 1.0 marked), with a whisker of the verdict's noise bound around it
/// (none on the baseline's own bar, see [`whisker`]): a bar whose whisker
/// reaches 1.0 is within noise. Cells without a baseline result are left
/// out.
pub fn svg_chart(category: &str, rows: &[Row], executors: &[&str], baseline: &str) -> String {
    let mut groups: Vec<(String, Vec<Bar>)> = Vec::new();
    let mut cells: Vec<&str> = Vec::new();
    for r in rows.iter().filter(|r| r.category == category) {
        if !cells.contains(&r.workload.as_str()) {
            cells.push(&r.workload);
        }
    }
    for cell in cells {
        let in_cell: Vec<&Row> = rows
            .iter()
            .filter(|r| r.category == category && r.workload == cell)
            .collect();
        let Some(base) = in_cell.iter().find(|r| r.executor == baseline) else {
            continue;
        };
        let bars: Vec<Bar> = executors
            .iter()
            .enumerate()
            .filter_map(|(i, e)| {
                let r = in_cell.iter().find(|r| r.executor == *e)?;
                let speed = speedup(r.median, base.median, r.better);
                let whisker =
                    (*e != baseline).then(|| whisker(speed, noise_bound(r.cv, base.cv), r.better));
                speed.is_finite().then_some(Bar {
                    executor: i,
                    speed,
                    whisker,
                })
            })
            .collect();
        groups.push((cell.to_string(), bars));
    }
    let bar_h = 14.0;
    let gap = 12.0;
    // Room for the longest cell label (about 6.5 px a character at 11 px
    // sans-serif), so that none is cut at the left edge.
    let longest = groups
        .iter()
        .map(|(c, _)| c.chars().count())
        .max()
        .unwrap_or(0);
    let left = f64::max(190.0, 16.0 + 6.5 * longest as f64);
    let plot_w = 520.0;
    let top = 74.0;
    let max = groups
        .iter()
        .flat_map(|(_, b)| b.iter().map(|bar| bar.speed))
        .fold(1.5f64, f64::max)
        .min(10.0);
    let x_of = |s: f64| left + plot_w * (s.min(max) / max);
    let height: f64 = top
        + groups
            .iter()
            .map(|(_, b)| b.len().max(1) as f64 * bar_h + gap)
            .sum::<f64>()
        + 30.0;
    let width = left + plot_w + 70.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="18" font-size="14" font-weight="bold">{}: speed relative to {} (higher is better)</text>"#,
        xml_escape(category),
        xml_escape(baseline)
    );
    let _ = writeln!(
        s,
        r##"<text x="10" y="32" fill="#555">throughput cells: executor / {b}; latency cells: {b} / executor</text><text x="10" y="46" fill="#555">whiskers: the verdict's noise bound, 2·√(cv² + cv_{b}²): within noise where one reaches 1.0</text>"##,
        b = xml_escape(baseline)
    );
    for (i, e) in executors.iter().enumerate() {
        let x = left + i as f64 * 110.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="54" width="10" height="10" fill="{}"/><text x="{}" y="63">{}</text>"#,
            COLORS[i % COLORS.len()],
            x + 14.0,
            xml_escape(e)
        );
    }
    let mut y = top;
    for (cell, bars) in &groups {
        let gh = bars.len().max(1) as f64 * bar_h;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            left - 8.0,
            y + gh / 2.0 + 4.0,
            xml_escape(cell)
        );
        for (k, bar) in bars.iter().enumerate() {
            let (i, v) = (bar.executor, bar.speed);
            let by = y + k as f64 * bar_h;
            // The label goes right of the whisker, so that it covers neither.
            let label_x = x_of(bar.whisker.map_or(v, |(_, hi)| hi)).max(x_of(v)) + 4.0;
            let _ = writeln!(
                s,
                r#"<rect x="{left}" y="{by}" width="{:.1}" height="{}" fill="{}"/><text x="{label_x:.1}" y="{}">{:.2}</text>"#,
                (x_of(v) - left).max(0.5),
                bar_h - 2.0,
                COLORS[i % COLORS.len()],
                by + bar_h - 4.0,
                v
            );
            if let Some((lo, hi)) = bar.whisker.filter(|(lo, hi)| hi > lo) {
                let (lo, hi) = (x_of(lo).max(left), x_of(hi));
                let (mid, cap) = (by + (bar_h - 2.0) / 2.0, (bar_h - 2.0) / 4.0);
                let _ = writeln!(
                    s,
                    r#"<path class="noise" d="M{lo:.1} {mid:.1}H{hi:.1}M{lo:.1} {:.1}V{:.1}M{hi:.1} {:.1}V{:.1}" stroke="black" fill="none"/>"#,
                    mid - cap,
                    mid + cap,
                    mid - cap,
                    mid + cap
                );
            }
        }
        y += gh + gap;
    }
    let one = x_of(1.0);
    let _ = writeln!(
        s,
        r#"<line x1="{one:.1}" y1="{}" x2="{one:.1}" y2="{}" stroke="black" stroke-dasharray="4,3"/><text x="{one:.1}" y="{}" text-anchor="middle">1.0 = {}</text>"#,
        top - 4.0,
        y,
        y + 14.0,
        xml_escape(baseline)
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::verdict;

    fn row(workload: &str, executor: &str, median: f64, better: Better) -> Row {
        Row {
            category: "socket_latency".into(),
            workload: workload.into(),
            executor: executor.into(),
            median,
            unit: "us".into(),
            cv: 0.05,
            n: 5,
            better,
            ratio: Some(median / 20.0),
            verdict: Some(Verdict::WithinNoise),
            server_cpu_s: Some(0.5),
            ops_per_cpu_s: Some(123_456.0),
            allocs_per_op: None,
        }
    }

    #[test]
    fn csv_has_header_and_escapes() {
        let mut r = row("pingpong/64B", "tokio-ct", 20.0, Better::Lower);
        r.unit = "a,b".into();
        let csv = to_csv(&[r]);
        let mut lines = csv.lines();
        assert_eq!(
            lines.next().unwrap(),
            "category,workload,executor,median,unit,cv,ratio_to_tokio_ct,verdict,server_cpu_s,ops_per_cpu_s,allocs_per_op"
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
            notes: vec!["skipped: uring: x".into()],
            charts: vec!["socket_latency.svg".into()],
        };
        let md = to_markdown(&rows, &meta);
        assert!(md.contains("AMD EPYC, 2 CPUs"));
        assert!(md.contains("`cargo bench -p percore-benches -- --quick`"));
        assert!(md.contains("| socket_latency/pingpong/64B | tokio-ct | 20.00 us | 5.0% |"));
        assert!(md.contains("- skipped: uring: x"));
        assert!(md.contains("![socket_latency.svg](socket_latency.svg)"));
    }

    #[test]
    fn svg_bars_are_oriented() {
        let rows = [
            row("pingpong/64B", "uring", 10.0, Better::Lower),
            row("pingpong/64B", "tokio-ct", 20.0, Better::Lower),
            row("pingpong/1B", "uring", 10.0, Better::Lower), // no baseline: left out
        ];
        let svg = svg_chart("socket_latency", &rows, &["uring", "tokio-ct"], "tokio-ct");
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains(">2.00</text>")); // uring twice as fast
        assert!(svg.contains(">1.00</text>"));
        assert!(!svg.contains("pingpong/1B"));
        // One whisker, uring's: ± 2·√(0.05² + 0.05²) ≈ 14 % of its 2.00.
        assert_eq!(svg.matches(r#"class="noise""#).count(), 1);
    }

    /// The number after `key` on the first line of `svg` containing `mark`.
    fn number_after(svg: &str, mark: &str, key: &str) -> f64 {
        let line = svg.lines().find(|l| l.contains(mark)).expect(mark);
        let rest = line.split(key).nth(1).expect(key);
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        rest[..end].parse().expect("a number")
    }

    #[test]
    fn whiskers_span_the_noise_bound() {
        let mut even = row("pingpong/64B", "uring", 10.0, Better::Lower);
        even.cv = 0.0;
        let mut base = row("pingpong/64B", "tokio-ct", 10.0, Better::Lower);
        base.cv = 0.25; // bound 2·0.25 = 0.5: from 0.5 to 1.5 of uring's 1.00
        let svg = svg_chart(
            "socket_latency",
            &[even, base],
            &["uring", "tokio-ct"],
            "tokio-ct",
        );
        let zero = number_after(&svg, "<rect x=\"", "<rect x=\"");
        let one = number_after(&svg, "stroke-dasharray", "x1=\"");
        let lo = number_after(&svg, "class=\"noise\"", "d=\"M");
        let hi = number_after(&svg, "class=\"noise\"", "H");
        let unit = one - zero;
        assert!(
            (lo - (zero + unit / 2.0)).abs() < 0.2,
            "lo {lo}, zero {zero}, one {one}"
        );
        assert!(
            (hi - (zero + unit * 1.5)).abs() < 0.2,
            "hi {hi}, zero {zero}, one {one}"
        );
    }

    /// On either kind of cell, a whisker reaches 1.0 exactly when the
    /// verdict is within noise (bound 0.5 here).
    #[test]
    fn a_whisker_reaches_one_only_within_noise() {
        for better in [Better::Higher, Better::Lower] {
            for median in [4.0, 6.0, 8.0, 14.0, 18.0, 25.0] {
                let mut candidate = row("echo/64B", "uring", median, better);
                candidate.cv = 0.0;
                let mut base = row("echo/64B", "tokio-ct", 10.0, better);
                base.cv = 0.25;
                let within = verdict(median, 0.0, 10.0, 0.25, better) == Verdict::WithinNoise;
                let svg = svg_chart(
                    "socket_latency",
                    &[candidate, base],
                    &["uring", "tokio-ct"],
                    "tokio-ct",
                );
                let one = number_after(&svg, "stroke-dasharray", "x1=\"");
                let lo = number_after(&svg, "class=\"noise\"", "d=\"M");
                let hi = number_after(&svg, "class=\"noise\"", "H");
                assert_eq!(
                    lo <= one && one <= hi,
                    within,
                    "{better:?} median {median}: whisker {lo}..{hi}, 1.0 at {one}"
                );
            }
        }
    }

    #[test]
    fn long_cell_labels_fit() {
        let cell = "http/10k_rps/server_cpu_per_req_and_then_some";
        let rows = [
            row(cell, "uring", 10.0, Better::Lower),
            row(cell, "tokio-ct", 20.0, Better::Lower),
        ];
        let svg = svg_chart("socket_latency", &rows, &["uring", "tokio-ct"], "tokio-ct");
        let label = svg
            .lines()
            .find(|l| l.contains(&format!(">{cell}</text>")))
            .expect("the label");
        let x: f64 = label
            .split('"')
            .nth(1)
            .and_then(|v| v.parse().ok())
            .expect("its x");
        // Right-aligned at x: its width at 11 px must fit left of it.
        assert!(x >= 6.0 * cell.len() as f64, "{label}");
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
