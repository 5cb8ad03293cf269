//! The statsd line protocol, as `stats_collector` reads it, and a core's
//! aggregate of what it received; sans I/O, so every refusal is tested
//! here.
//!
//! A line is `name:value|type[|@rate]`: `c` a counter (the value, divided
//! by the sample rate, is added), `g` a gauge (set; a value with a sign,
//! `+3` or `-2`, adjusts it), `ms` a timing (count, sum, least and most).
//! A datagram may hold several lines, one per `\n`. A line that does not
//! parse is counted and skipped: nothing a sender writes makes a panic.

use std::collections::HashMap;
use std::fmt::Write as _;

/// The longest metric name taken (bytes).
pub const MAX_NAME: usize = 200;

/// What one line asks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sample<'a> {
    /// A counter's name and the value to add (already divided by the rate).
    Counter(&'a str, f64),
    /// A gauge set (`false`) or adjusted by a signed value (`true`).
    Gauge(&'a str, f64, bool),
    /// A timing's name and its milliseconds.
    Timing(&'a str, f64),
}

/// Why a line was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadLine {
    /// Not `name:value|type[|@rate]`, or not UTF-8.
    Shape,
    /// Empty, too long, or with spaces or control characters.
    Name,
    /// Not a finite number.
    Value,
    /// Not `c`, `g` or `ms`.
    Type,
    /// Not `@` and a number in (0, 1], or a rate on a gauge or timing.
    Rate,
}

/// Parses one line (without its `\n`).
///
/// # Errors
///
/// The part of the line that is wrong.
pub fn parse(line: &[u8]) -> Result<Sample<'_>, BadLine> {
    let line = std::str::from_utf8(line).map_err(|_| BadLine::Shape)?;
    let (name, rest) = line.split_once(':').ok_or(BadLine::Shape)?;
    if name.is_empty()
        || name.len() > MAX_NAME
        || name.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(BadLine::Name);
    }
    let mut fields = rest.split('|');
    let value = fields.next().ok_or(BadLine::Shape)?;
    let kind = fields.next().ok_or(BadLine::Shape)?;
    let rate = match fields.next() {
        None => 1.0,
        Some(rate) => {
            let rate: f64 = rate
                .strip_prefix('@')
                .and_then(|r| r.parse().ok())
                .ok_or(BadLine::Rate)?;
            if !(rate > 0.0 && rate <= 1.0) {
                return Err(BadLine::Rate);
            }
            rate
        }
    };
    if fields.next().is_some() {
        return Err(BadLine::Shape);
    }
    let number: f64 = value.parse().map_err(|_| BadLine::Value)?;
    if !number.is_finite() || value.is_empty() {
        return Err(BadLine::Value);
    }
    match kind {
        "c" => Ok(Sample::Counter(name, number / rate)),
        "g" if rate == 1.0 => Ok(Sample::Gauge(name, number, value.starts_with(['+', '-']))),
        "ms" if rate == 1.0 => Ok(Sample::Timing(name, number)),
        "g" | "ms" => Err(BadLine::Rate),
        _ => Err(BadLine::Type),
    }
}

/// A timing's summary.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Timings received.
    pub count: u64,
    /// Their sum (ms).
    pub sum: f64,
    /// The least (ms).
    pub min: f64,
    /// The most (ms).
    pub max: f64,
}

impl Timing {
    fn add(&mut self, other: &Timing) {
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }
}

/// One core's totals (or, merged, the server's).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Aggregate {
    /// Each counter's total.
    pub counters: HashMap<String, f64>,
    /// The value, and the order of its last change on this core's clock
    /// (nanoseconds since the process started), so that merged cores give
    /// the gauge's latest value.
    pub gauges: HashMap<String, (f64, u64)>,
    /// Each timing's summary.
    pub timings: HashMap<String, Timing>,
    /// Datagrams received (the truncated ones too).
    pub datagrams: u64,
    /// Non-empty lines in them.
    pub lines: u64,
    /// Lines refused by [`parse`].
    pub bad_lines: u64,
    /// Datagrams longer than the receive buffer, skipped whole.
    pub truncated: u64,
    /// Lines refused because the core already keeps `max_names` names.
    pub over_limit: u64,
}

impl Aggregate {
    /// Takes a datagram's lines; `now` orders gauge changes across cores.
    pub fn datagram(&mut self, bytes: &[u8], now: u64, max_names: usize) {
        self.datagrams += 1;
        for line in bytes.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            self.lines += 1;
            match parse(line) {
                Ok(sample) => self.take(sample, now, max_names),
                Err(_) => self.bad_lines += 1,
            }
        }
    }

    fn names(&self) -> usize {
        self.counters.len() + self.gauges.len() + self.timings.len()
    }

    fn take(&mut self, sample: Sample<'_>, now: u64, max_names: usize) {
        let full = self.names() >= max_names;
        match sample {
            Sample::Counter(name, v) => match self.counters.get_mut(name) {
                Some(total) => *total += v,
                None if full => self.over_limit += 1,
                None => drop(self.counters.insert(name.to_owned(), v)),
            },
            Sample::Gauge(name, v, delta) => match self.gauges.get_mut(name) {
                Some(gauge) if delta => *gauge = (gauge.0 + v, now),
                Some(gauge) => *gauge = (v, now),
                None if full => self.over_limit += 1,
                None => drop(self.gauges.insert(name.to_owned(), (v, now))),
            },
            Sample::Timing(name, v) => {
                let one = Timing {
                    count: 1,
                    sum: v,
                    min: v,
                    max: v,
                };
                match self.timings.get_mut(name) {
                    Some(t) => t.add(&one),
                    None if full => self.over_limit += 1,
                    None => drop(self.timings.insert(name.to_owned(), one)),
                }
            }
        }
    }

    /// Adds another core's totals to these.
    pub fn merge(&mut self, other: &Aggregate) {
        for (name, v) in &other.counters {
            *self.counters.entry(name.clone()).or_insert(0.0) += v;
        }
        for (name, &(v, at)) in &other.gauges {
            let gauge = self.gauges.entry(name.clone()).or_insert((v, at));
            if at > gauge.1 {
                *gauge = (v, at);
            }
        }
        for (name, t) in &other.timings {
            match self.timings.get_mut(name) {
                Some(mine) => mine.add(t),
                None => drop(self.timings.insert(name.clone(), *t)),
            }
        }
        self.datagrams += other.datagrams;
        self.lines += other.lines;
        self.bad_lines += other.bad_lines;
        self.truncated += other.truncated;
        self.over_limit += other.over_limit;
    }

    /// The totals in Prometheus's text format, names sorted.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let totals = [
            ("statsd_datagrams_received_total", self.datagrams),
            ("statsd_lines_total", self.lines),
            ("statsd_bad_lines_total", self.bad_lines),
            ("statsd_truncated_datagrams_total", self.truncated),
            ("statsd_names_over_limit_total", self.over_limit),
        ];
        for (metric, v) in totals {
            let _ = writeln!(out, "# TYPE {metric} counter\n{metric} {v}");
        }
        out.push_str("# TYPE statsd_counter_total counter\n");
        for name in sorted(&self.counters) {
            let v = self.counters[name];
            let _ = writeln!(out, "statsd_counter_total{{name=\"{}\"}} {v}", label(name));
        }
        out.push_str("# TYPE statsd_gauge gauge\n");
        for name in sorted(&self.gauges) {
            let v = self.gauges[name].0;
            let _ = writeln!(out, "statsd_gauge{{name=\"{}\"}} {v}", label(name));
        }
        out.push_str("# TYPE statsd_timing_ms summary\n");
        for name in sorted(&self.timings) {
            let t = self.timings[name];
            let name = label(name);
            let _ = writeln!(out, "statsd_timing_ms_count{{name=\"{name}\"}} {}", t.count);
            let _ = writeln!(out, "statsd_timing_ms_sum{{name=\"{name}\"}} {}", t.sum);
            let _ = writeln!(out, "statsd_timing_ms_min{{name=\"{name}\"}} {}", t.min);
            let _ = writeln!(out, "statsd_timing_ms_max{{name=\"{name}\"}} {}", t.max);
        }
        out
    }
}

/// The names of `map`, sorted.
fn sorted<V>(map: &HashMap<String, V>) -> Vec<&String> {
    let mut names: Vec<&String> = map.keys().collect();
    names.sort();
    names
}

/// A label value as Prometheus's text format escapes it.
fn label(name: &str) -> String {
    name.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_type_parses() {
        assert_eq!(parse(b"a.b:3|c"), Ok(Sample::Counter("a.b", 3.0)));
        assert_eq!(parse(b"a:3|c|@0.5"), Ok(Sample::Counter("a", 6.0)));
        assert_eq!(parse(b"g:-2|g"), Ok(Sample::Gauge("g", -2.0, true)));
        assert_eq!(parse(b"g:7|g"), Ok(Sample::Gauge("g", 7.0, false)));
        assert_eq!(parse(b"t:12.5|ms"), Ok(Sample::Timing("t", 12.5)));
    }

    #[test]
    fn bad_lines_are_refused_never_panic() {
        let cases: [(&[u8], BadLine); 12] = [
            (b"nocolon", BadLine::Shape),
            (b":1|c", BadLine::Name),
            (b"a b:1|c", BadLine::Name),
            (b"a:|c", BadLine::Value),
            (b"a:x|c", BadLine::Value),
            (b"a:inf|c", BadLine::Value),
            (b"a:1|q", BadLine::Type),
            (b"a:1", BadLine::Shape),
            (b"a:1|c|@0", BadLine::Rate),
            (b"a:1|c|@2", BadLine::Rate),
            (b"a:1|c|@0.5|x", BadLine::Shape),
            (b"a:\xff|c", BadLine::Shape),
        ];
        for (line, why) in cases {
            assert_eq!(parse(line), Err(why), "{:?}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn cores_merge_exactly() {
        let mut one = Aggregate::default();
        one.datagram(b"c:1|c\ng:5|g\nt:10|ms\nbad\n", 1, 100);
        let mut two = Aggregate::default();
        two.datagram(b"c:2|c|@0.5\ng:9|g\nt:30|ms", 2, 100);
        let mut all = Aggregate::default();
        all.merge(&one);
        all.merge(&two);
        assert_eq!(all.counters["c"], 5.0);
        assert_eq!(all.gauges["g"].0, 9.0, "the latest gauge wins");
        let t = all.timings["t"];
        assert_eq!((t.count, t.sum, t.min, t.max), (2, 40.0, 10.0, 30.0));
        assert_eq!((all.datagrams, all.lines, all.bad_lines), (2, 7, 1));
        let text = all.render();
        assert!(
            text.contains("statsd_counter_total{name=\"c\"} 5\n"),
            "{text}"
        );
        assert!(
            text.contains("statsd_timing_ms_max{name=\"t\"} 30\n"),
            "{text}"
        );
    }

    #[test]
    fn names_past_the_limit_are_counted_not_kept() {
        let mut agg = Aggregate::default();
        agg.datagram(b"a:1|c\nb:1|c\nc:1|c\na:1|c", 0, 2);
        assert_eq!(agg.counters.len(), 2);
        assert_eq!(agg.counters["a"], 2.0);
        assert_eq!(agg.over_limit, 1);
    }
}
