//! Writing Prometheus's text exposition format (version 0.0.4): a
//! family's `# HELP` and `# TYPE` lines, then its samples, label values
//! escaped.

use std::fmt::Display;
use std::io::Write;

use percore::runtime::HistogramSnapshot;

/// A family's kind, as its `# TYPE` line says it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Writes families and samples into a buffer (a `Vec`, which cannot fail).
pub(super) struct Text<'a>(pub(super) &'a mut Vec<u8>);

impl Text<'_> {
    /// Opens a family: its help and type.
    pub(super) fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One sample of the family just opened.
    pub(super) fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.0.extend_from_slice(name.as_bytes());
        if !labels.is_empty() {
            self.0.push(b'{');
            for (i, (key, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(b',');
                }
                let _ = write!(self.0, "{key}=\"");
                escape(self.0, value);
                self.0.push(b'"');
            }
            self.0.push(b'}');
        }
        let _ = writeln!(self.0, " {value}");
    }

    /// A histogram's samples: cumulative `_bucket`s (bounds in seconds),
    /// `_sum` (seconds) and `_count`.
    pub(super) fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &HistogramSnapshot) {
        let bucket = format!("{name}_bucket");
        for (le, count) in h.cumulative() {
            let le = match le {
                Some(bound) => bound.as_secs_f64().to_string(),
                None => "+Inf".to_owned(),
            };
            let mut with_le: Vec<(&str, &str)> = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, count);
        }
        self.sample(&format!("{name}_sum"), labels, h.sum().as_secs_f64());
        self.sample(&format!("{name}_count"), labels, h.count());
    }
}

/// A label value, with `\`, `"` and line feeds escaped.
fn escape(out: &mut Vec<u8>, value: &str) {
    for b in value.bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            _ => out.push(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_escape_their_labels() {
        let mut out = Vec::new();
        let mut text = Text(&mut out);
        text.family("x_total", Kind::Counter, "X.");
        text.sample("x_total", &[("a", "q\"\\\n"), ("b", "1")], 3);
        text.sample("x_total", &[], 4);
        let text = String::from_utf8(out).expect("utf-8");
        assert_eq!(
            text,
            "# HELP x_total X.\n# TYPE x_total counter\nx_total{a=\"q\\\"\\\\\\n\",b=\"1\"} 3\nx_total 4\n"
        );
    }
}
