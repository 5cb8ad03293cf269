//! The `Date` header value, formatted at most once per second per core.
//!
//! RFC 9110 §6.6.1: an origin server with a clock "MUST generate a Date
//! header field" in 2xx, 3xx and 4xx responses, in IMF-fixdate form:
//! `Sun, 06 Nov 1994 08:49:37 GMT`. Formatting a date per response is
//! measurable at high request rates, so each core keeps one cached value.

use std::time::{SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate.
const LEN: usize = 29;

/// A per-core cache of the current IMF-fixdate.
///
/// Not shared across threads: each core owns one and calls
/// [`update`](Self::update) with its own clock reading, typically once per
/// event-loop turn.
#[derive(Debug, Clone)]
pub struct DateCache {
    /// Whole seconds since the epoch of the cached value.
    secs: u64,
    /// The whole header line, `Date: ` + value + CRLF: one copy per
    /// response.
    line: [u8; LINE_LEN],
}

const PREFIX: &[u8] = b"Date: ";
const LINE_LEN: usize = PREFIX.len() + LEN + 2;

impl DateCache {
    /// A cache holding the date of `now`.
    pub fn new(now: SystemTime) -> Self {
        let secs = epoch_secs(now);
        Self {
            secs,
            line: line(secs),
        }
    }

    /// Refreshes the value if `now` is in a different second than the
    /// cached one. Returns whether it was reformatted.
    pub fn update(&mut self, now: SystemTime) -> bool {
        let secs = epoch_secs(now);
        if secs == self.secs {
            return false;
        }
        self.secs = secs;
        self.line = line(secs);
        true
    }

    /// The cached IMF-fixdate, always 29 ASCII bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.line[PREFIX.len()..PREFIX.len() + LEN]
    }

    /// The `Date` header line: `Date: ` + [`as_bytes`](Self::as_bytes) +
    /// CRLF.
    pub(crate) fn line(&self) -> &[u8; LINE_LEN] {
        &self.line
    }
}

fn line(secs: u64) -> [u8; LINE_LEN] {
    let mut line = [0; LINE_LEN];
    line[..PREFIX.len()].copy_from_slice(PREFIX);
    line[PREFIX.len()..PREFIX.len() + LEN].copy_from_slice(&format(secs));
    line[PREFIX.len() + LEN..].copy_from_slice(b"\r\n");
    line
}

/// Seconds since the epoch; a clock set before 1970 reads as the epoch.
fn epoch_secs(now: SystemTime) -> u64 {
    now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn format(secs: u64) -> [u8; LEN] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    // 1970-01-01 was a Thursday.
    out[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    two(&mut out[5..7], day);
    out[8..11].copy_from_slice(MONTHS[(month - 1) as usize]);
    // IMF-fixdate has a four-digit year; clamp rather than corrupt the
    // header for a clock past 9999.
    let year = year.min(9999);
    two(&mut out[12..14], year / 100);
    two(&mut out[14..16], year % 100);
    two(&mut out[17..19], rem / 3600);
    two(&mut out[20..22], rem / 60 % 60);
    two(&mut out[23..25], rem % 60);
    out
}

fn two(out: &mut [u8], n: u64) {
    out[0] = b'0' + (n / 10 % 10) as u8;
    out[1] = b'0' + (n % 10) as u8;
}

/// Proleptic Gregorian date of a day count since 1970-01-01, by Howard
/// Hinnant's `civil_from_days` (public domain), restricted to days >= 0.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn formats_known_dates() {
        // The RFC 9110 §5.6.7 example.
        assert_eq!(
            DateCache::new(at(784_111_777)).as_bytes(),
            b"Sun, 06 Nov 1994 08:49:37 GMT"
        );
        assert_eq!(
            DateCache::new(at(0)).as_bytes(),
            b"Thu, 01 Jan 1970 00:00:00 GMT"
        );
        // Leap day, and the last second of a year.
        assert_eq!(
            DateCache::new(at(951_782_400)).as_bytes(),
            b"Tue, 29 Feb 2000 00:00:00 GMT"
        );
        assert_eq!(
            DateCache::new(at(1_704_067_199)).as_bytes(),
            b"Sun, 31 Dec 2023 23:59:59 GMT"
        );
        assert_eq!(
            DateCache::new(UNIX_EPOCH - Duration::from_secs(5)).as_bytes(),
            b"Thu, 01 Jan 1970 00:00:00 GMT"
        );
    }

    #[test]
    fn refreshes_once_per_second() {
        let mut cache = DateCache::new(at(100));
        assert!(!cache.update(at(100) + Duration::from_millis(999)));
        assert!(cache.update(at(101)));
        assert_eq!(cache.as_bytes(), b"Thu, 01 Jan 1970 00:01:41 GMT");
        assert_eq!(
            &cache.line()[..],
            b"Date: Thu, 01 Jan 1970 00:01:41 GMT\r\n"
        );
        assert!(!cache.update(at(101)));
    }

    #[test]
    fn far_future_stays_well_formed() {
        let cache = DateCache::new(at(400_000_000_000));
        assert_eq!(cache.as_bytes().len(), LEN);
        assert!(cache.as_bytes().ends_with(b" GMT"));
    }
}
