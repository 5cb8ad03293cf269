//! The bodies the proxy answers with.
//!
//! On success (200, `application/json`), a JSON array with one object per
//! successful branch, in branch order:
//!
//! ```text
//! [{"upstream":"127.0.0.1:8080","status":200,"latency_ms":0.412,"body":"{\"message\":\"Hello!\"}"}]
//! ```
//!
//! - `upstream`: the address that answered (after a retry, the one tried
//!   last);
//! - `status`: the upstream's status code (any final status counts as an
//!   answer: a 404 from an upstream is its answer, not a proxy failure);
//! - `latency_ms`: from the start of the fan-out to the end of this
//!   branch's response, in milliseconds with microsecond precision;
//! - `body`: the upstream's body as a JSON string. Bytes that are not UTF-8
//!   are replaced with U+FFFD, so the document is always valid JSON.
//!
//! On failure (502 or 504, `text/plain`), one line per branch that failed
//! or was still running at the deadline: `upstream ADDR: REASON`, where
//! ADDR is, after a connect retry, the upstream the branch moved to.
//!
//! Everything is written straight into the response's reused body buffer,
//! after reserving [`entry_bound`] for each entry: the length of an answer
//! varies with the digits of its latencies, and growing the buffer by a few
//! bytes on some later request would be an allocation in steady state.

use std::io::Write as _;
use std::time::Duration;

use crate::http::write_decimal;

/// One successful branch, for [`write_entry`].
#[derive(Debug)]
pub(crate) struct Entry<'a> {
    pub(crate) upstream: &'a str,
    pub(crate) status: u16,
    pub(crate) latency: Duration,
    pub(crate) body: &'a [u8],
}

/// The most bytes [`write_entry`] can append for an entry with this
/// upstream name and body: the fixed text with the widest numbers, plus
/// both strings at their longest escaping.
pub(crate) fn entry_bound(upstream: &str, body: &[u8]) -> usize {
    // `,{"upstream":` `,"status":` 65535 `,"latency_ms":` u128 `.999`
    // `,"body":` `}`, rounded up.
    const FIXED: usize = 96;
    FIXED + json_string_bound(upstream.as_bytes()) + json_string_bound(body)
}

/// The most bytes [`write_json_string`] can append for `bytes`.
fn json_string_bound(bytes: &[u8]) -> usize {
    2 + bytes
        .iter()
        .map(|&b| usize::from(ESCAPED_WIDTH[usize::from(b)]))
        .sum::<usize>()
}

/// The most bytes one input byte can become in a JSON string: `\u00XX`
/// for a control byte, `\"` and `\\`, and at worst each byte of
/// invalid UTF-8 as U+FFFD.
static ESCAPED_WIDTH: [u8; 256] = {
    let mut table = [1u8; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = match b as u8 {
            0..=0x1f => 6,
            b'"' | b'\\' => 2,
            0x80.. => 3,
            _ => 1,
        };
        b += 1;
    }
    table
};

/// Appends `entry` as an array element (`first`: no leading comma).
pub(crate) fn write_entry(out: &mut Vec<u8>, entry: &Entry<'_>, first: bool) {
    if !first {
        out.push(b',');
    }
    out.extend_from_slice(b"{\"upstream\":");
    write_json_string(out, entry.upstream.as_bytes());
    out.extend_from_slice(b",\"status\":");
    write_decimal(out, u64::from(entry.status));
    let micros = u64::try_from(entry.latency.as_micros()).unwrap_or(u64::MAX);
    out.extend_from_slice(b",\"latency_ms\":");
    write_decimal(out, micros / 1000);
    let frac = micros % 1000;
    out.extend_from_slice(&[
        b'.',
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
    out.extend_from_slice(b",\"body\":");
    write_json_string(out, entry.body);
    out.push(b'}');
}

/// Appends `bytes` as a JSON string (RFC 8259 §7): quotes, backslashes and
/// control characters escaped, invalid UTF-8 replaced with U+FFFD.
pub(crate) fn write_json_string(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    if !escape_ascii(out, bytes) {
        for chunk in bytes.utf8_chunks() {
            escape_utf8(out, chunk.valid());
            if !chunk.invalid().is_empty() {
                out.extend_from_slice("\u{fffd}".as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// What [`escape_ascii`] does with a byte.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Copy,
    Escape,
    NotAscii,
}

static CLASS: [Class; 256] = {
    let mut table = [Class::Copy; 256];
    let mut b = 0;
    while b < 256 {
        if b < 0x20 || b == b'"' as usize || b == b'\\' as usize {
            table[b] = Class::Escape;
        } else if b >= 0x80 {
            table[b] = Class::NotAscii;
        }
        b += 1;
    }
    table
};

/// Escapes `bytes` if they are all ASCII, copying the runs between escapes
/// whole; `false` (having written nothing) if they are not.
fn escape_ascii(out: &mut Vec<u8>, bytes: &[u8]) -> bool {
    let start = out.len();
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        match CLASS[usize::from(b)] {
            Class::Copy => continue,
            Class::Escape => {
                out.extend_from_slice(&bytes[run..i]);
                escape(out, b);
                run = i + 1;
            }
            Class::NotAscii => {
                out.truncate(start);
                return false;
            }
        }
    }
    out.extend_from_slice(&bytes[run..]);
    true
}

/// Escapes valid UTF-8 character by character (the rare non-ASCII case).
fn escape_utf8(out: &mut Vec<u8>, text: &str) {
    for c in text.chars() {
        match u8::try_from(c) {
            Ok(b) if CLASS[usize::from(b)] == Class::Escape => escape(out, b),
            _ => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
}

/// Appends the JSON escape of a control byte, quote or backslash.
fn escape(out: &mut Vec<u8>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match b {
        b'"' => out.extend_from_slice(b"\\\""),
        b'\\' => out.extend_from_slice(b"\\\\"),
        b'\n' => out.extend_from_slice(b"\\n"),
        b'\r' => out.extend_from_slice(b"\\r"),
        b'\t' => out.extend_from_slice(b"\\t"),
        _ => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(b >> 4)],
            HEX[usize::from(b & 0xf)],
        ]),
    }
}

/// Appends the failure line of one branch.
pub(crate) fn write_failure(out: &mut Vec<u8>, upstream: &str, reason: &dyn std::fmt::Display) {
    let _ = writeln!(out, "upstream {upstream}: {reason}");
}
