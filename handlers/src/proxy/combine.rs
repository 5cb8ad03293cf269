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
//! or was still running at the deadline: `upstream ADDR: REASON`.
//!
//! Everything is written straight into the response's reused body buffer,
//! after reserving [`entry_bound`] for each entry: the length of an answer
//! varies with the digits of its latencies, and growing the buffer by a few
//! bytes on some later request would be an allocation in steady state.

use std::io::Write;
use std::time::Duration;

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
        .map(|&b| match b {
            0..=0x1f => 6,     // \u00XX
            b'"' | b'\\' => 2, // \" \\
            0x80.. => 3,       // at worst each byte becomes U+FFFD
            _ => 1,
        })
        .sum::<usize>()
}

/// Appends `entry` as an array element (`first`: no leading comma).
pub(crate) fn write_entry(out: &mut Vec<u8>, entry: &Entry<'_>, first: bool) {
    if !first {
        out.push(b',');
    }
    out.extend_from_slice(b"{\"upstream\":");
    write_json_string(out, entry.upstream.as_bytes());
    let micros = entry.latency.as_micros();
    // Writing to a Vec cannot fail.
    let _ = write!(
        out,
        ",\"status\":{},\"latency_ms\":{}.{:03},\"body\":",
        entry.status,
        micros / 1000,
        micros % 1000
    );
    write_json_string(out, entry.body);
    out.push(b'}');
}

/// Appends `bytes` as a JSON string (RFC 8259 §7): quotes, backslashes and
/// control characters escaped, invalid UTF-8 replaced with U+FFFD.
pub(crate) fn write_json_string(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for chunk in bytes.utf8_chunks() {
        for &b in chunk.valid().as_bytes() {
            match b {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0..=0x1f => {
                    let _ = write!(out, "\\u{b:04x}");
                }
                _ => out.push(b),
            }
        }
        if !chunk.invalid().is_empty() {
            out.extend_from_slice("\u{fffd}".as_bytes());
        }
    }
    out.push(b'"');
}

/// Appends the failure line of one branch.
pub(crate) fn write_failure(out: &mut Vec<u8>, upstream: &str, reason: &dyn std::fmt::Display) {
    let _ = writeln!(out, "upstream {upstream}: {reason}");
}
