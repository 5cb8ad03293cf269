//! One hand-written SVG bar chart per category of a run: each executor's
//! speed relative to the baseline (tokio-ct), oriented so that longer is
//! better, each bar with a whisker of the noise bound its verdict uses.
//!
//! What it does not: judge results (`stats` does), or draw anything but
//! horizontal grouped bars.

use std::fmt::Write as _;

use crate::report::Row;
use crate::stats::{noise_bound, speedup, Better};

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
/// (none on the baseline's own bar, see `whisker`): a bar whose whisker
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
    use crate::report::test_row as row;
    use crate::stats::{verdict, Verdict};

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
}
