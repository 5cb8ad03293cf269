//! Validators and their preconditions: the `ETag` and `Last-Modified` of
//! a file, `If-None-Match` / `If-Modified-Since` (RFC 9110 §13.1.2-3),
//! `If-Range`, and the one `Range: bytes=` form the service honours.

use std::time::{Duration, UNIX_EPOCH};

use percore::fs::Metadata;

use crate::http::proto::DateCache;

/// A file's validators, computed from one `statx`.
#[derive(Debug)]
pub(crate) struct Validators {
    /// A strong entity tag, quoted: inode, size and modification time in
    /// nanoseconds. Any write that changes a byte changes the size or the
    /// time, and a file replaced by rename changes the inode.
    pub(crate) etag: String,
    /// The modification time as an IMF-fixdate (whole seconds).
    pub(crate) last_modified: [u8; 29],
    /// The same time in whole seconds since the epoch.
    secs: u64,
}

impl Validators {
    pub(crate) fn of(meta: &Metadata) -> Validators {
        let since = meta
            .modified()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        let etag = format!(
            "\"{:x}-{:x}-{:x}\"",
            meta.ino(),
            meta.len(),
            since.as_nanos()
        );
        let mut last_modified = [0; 29];
        last_modified.copy_from_slice(DateCache::new(meta.modified()).as_bytes());
        Validators {
            etag,
            last_modified,
            secs: since.as_secs(),
        }
    }

    /// Whether a `GET`/`HEAD` with these precondition fields gets 304.
    /// `If-None-Match`, when present, decides alone (RFC 9110 §13.2.2):
    /// a client that has a tag knows better than a date.
    pub(crate) fn not_modified(&self, if_none_match: Option<&[u8]>, ims: Option<&[u8]>) -> bool {
        if let Some(list) = if_none_match {
            return self.matches_any(list);
        }
        match ims.and_then(parse_date) {
            Some(since) => self.secs <= since,
            None => false,
        }
    }

    /// Weak comparison against a list of tags (or `*`), as `If-None-Match`
    /// asks: `W/` prefixes are ignored.
    fn matches_any(&self, list: &[u8]) -> bool {
        list.split(|&b| b == b',').any(|tag| {
            let tag = tag.trim_ascii();
            let tag = tag.strip_prefix(b"W/").unwrap_or(tag);
            tag == b"*" || tag == self.etag.as_bytes()
        })
    }

    /// Whether a `Range` may be honoured under `If-Range` (RFC 9110
    /// §13.1.5): the strong tag itself, or exactly the `Last-Modified`
    /// date; anything else means the client's copy is stale, so it gets
    /// the whole file.
    pub(crate) fn range_allowed(&self, if_range: Option<&[u8]>) -> bool {
        match if_range.map(<[u8]>::trim_ascii) {
            None => true,
            Some(v) if v.starts_with(b"\"") => v == self.etag.as_bytes(),
            Some(v) => v == self.last_modified,
        }
    }
}

/// What a `Range` field asks of a file of some length.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Range {
    /// No usable range: send the whole file, 200. Also for several ranges
    /// (RFC 9110 §14.2 lets a server ignore `Range`; multipart answers are
    /// left out) and for a malformed field, which must be ignored.
    Whole,
    /// Bytes `start..end` (end exclusive, `start < end`), 206.
    Part { start: u64, end: u64 },
    /// No byte of the file is in the range: 416.
    Unsatisfiable,
}

/// Reads a `Range` field for a representation of `len` bytes.
pub(crate) fn range(field: Option<&[u8]>, len: u64) -> Range {
    let Some(field) = field else {
        return Range::Whole;
    };
    let field = field.trim_ascii();
    let Some((unit, spec)) = field.split_first_chunk::<6>() else {
        return Range::Whole;
    };
    if !unit.eq_ignore_ascii_case(b"bytes=") || spec.contains(&b',') {
        return Range::Whole;
    }
    let Some(dash) = spec.iter().position(|&b| b == b'-') else {
        return Range::Whole;
    };
    let (first, last) = (spec[..dash].trim_ascii(), spec[dash + 1..].trim_ascii());
    match (number(first), number(last)) {
        // `-n`: the last n bytes.
        (None, Some(n)) if first.is_empty() => {
            if n == 0 || len == 0 {
                Range::Unsatisfiable
            } else {
                Range::Part {
                    start: len.saturating_sub(n),
                    end: len,
                }
            }
        }
        // `a-` or `a-b`; a last position past the end means the end.
        (Some(a), b) if last.is_empty() || b.is_some() => {
            if b.is_some_and(|b| b < a) {
                Range::Whole
            } else if a >= len {
                Range::Unsatisfiable
            } else {
                let end = b.map_or(len, |b| b.saturating_add(1).min(len));
                Range::Part { start: a, end }
            }
        }
        _ => Range::Whole,
    }
}

/// A run of ASCII digits, or `None` (empty, other bytes, or too large).
fn number(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Seconds since the epoch of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37
/// GMT`). The obsolete RFC 850 and asctime forms are not read: a date
/// that does not parse is ignored, which only costs a full answer.
fn parse_date(v: &[u8]) -> Option<u64> {
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let v = v.trim_ascii();
    if v.len() != 29 || &v[3..5] != b", " || &v[25..] != b" GMT" {
        return None;
    }
    let num = |r: std::ops::Range<usize>| number(&v[r]);
    let day = num(5..7)?;
    let month = MONTHS.iter().position(|m| &v[8..11] == *m)? as u64 + 1;
    let year = num(12..16)?;
    let (h, m, s) = (num(17..19)?, num(20..22)?, num(23..25)?);
    if year < 1970 || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s)
}

/// Days since 1970-01-01 of a Gregorian date (Howard Hinnant's
/// `days_from_civil`, for years from 1970 on).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y % 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The time of a parsed date, for tests.
#[cfg(test)]
fn time(v: &[u8]) -> Option<std::time::SystemTime> {
    parse_date(v).map(|s| UNIX_EPOCH + Duration::from_secs(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_with_the_formatter() {
        for secs in [0, 784_111_777, 951_782_400, 1_700_000_000, 4_102_444_800] {
            let t = UNIX_EPOCH + Duration::from_secs(secs);
            assert_eq!(time(DateCache::new(t).as_bytes()), Some(t));
        }
        assert_eq!(
            parse_date(b"Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(parse_date(b"Sunday, 06-Nov-94 08:49:37 GMT"), None);
        assert_eq!(parse_date(b"Sun, 06 Nov 1994 08:49:37 UTC"), None);
    }

    #[test]
    fn ranges() {
        let r = |f: &str| range(Some(f.as_bytes()), 100);
        assert_eq!(r("bytes=0-9"), Range::Part { start: 0, end: 10 });
        assert_eq!(
            r("bytes=90-"),
            Range::Part {
                start: 90,
                end: 100
            }
        );
        assert_eq!(
            r("bytes=90-500"),
            Range::Part {
                start: 90,
                end: 100
            }
        );
        assert_eq!(
            r("bytes=-10"),
            Range::Part {
                start: 90,
                end: 100
            }
        );
        assert_eq!(r("bytes=-500"), Range::Part { start: 0, end: 100 });
        assert_eq!(r("bytes=100-"), Range::Unsatisfiable);
        assert_eq!(r("bytes=-0"), Range::Unsatisfiable);
        assert_eq!(r("bytes=0-1,5-6"), Range::Whole);
        assert_eq!(r("bytes=9-1"), Range::Whole);
        assert_eq!(r("items=0-1"), Range::Whole);
        assert_eq!(r("bytes=x-1"), Range::Whole);
        assert_eq!(r("bytes=-"), Range::Whole);
        assert_eq!(range(None, 100), Range::Whole);
        assert_eq!(range(Some(b"bytes=0-"), 0), Range::Unsatisfiable);
    }
}
