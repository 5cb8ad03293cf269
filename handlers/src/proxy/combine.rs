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
//! ADDR is, after a connect retry, the upstream the branch moved to, and
//! the line goes on `(moved there after upstream FIRST: REASON)`.
//!
//! Everything is written straight into the response's reused body buffer,
//! after reserving [`entry_bound`] for each entry: the length of an answer
//! varies with the digits of its latencies, and growing the buffer by a few
//! bytes on some later request would be an allocation in steady state.
//! Each entry is then written into a slice of exactly its bound (cut back
//! afterwards), so that the per-byte work is plain stores: no capacity
//! check per escape, no `memcpy` call per run of plain bytes.
//!
//! Only std, and nothing else of this crate: the tokio fan-out baseline
//! (`benches/src/tokio_fanout.rs`), which builds without percore, compiles
//! this very file into itself, so that both servers write their answers
//! with the same code. It is the proxy's policy, not HTTP grammar, so it
//! lives here rather than in `percore-http1`.

use std::io::Write as _;
use std::time::Duration;

/// One successful branch, for [`write_entry`].
#[derive(Debug)]
pub(crate) struct Entry<'a> {
    /// The upstream's [`entry_prefix`].
    pub(crate) prefix: &'a [u8],
    /// The upstream's status code.
    pub(crate) status: u16,
    /// From the start of the fan-out to the end of this branch's response.
    pub(crate) latency: Duration,
    /// The upstream's body, written as a JSON string.
    pub(crate) body: &'a [u8],
    /// Its [`entry_bound`], which the caller has already counted to
    /// reserve room for the whole answer.
    pub(crate) bound: usize,
}

/// The start of every entry for `upstream`, up to its status: the same for
/// each of its answers, so escaped once, when the proxy starts.
pub(crate) fn entry_prefix(upstream: &str) -> Box<[u8]> {
    let mut out = b"{\"upstream\":".to_vec();
    write_json_string(&mut out, upstream.as_bytes());
    out.extend_from_slice(b",\"status\":");
    out.into_boxed_slice()
}

/// The most bytes [`write_entry`] can append for an entry with this
/// prefix and body: the fixed text with the widest numbers, plus the body
/// at its longest escaping.
pub(crate) fn entry_bound(prefix: &[u8], body: &[u8]) -> usize {
    // `,` 65535 `,"latency_ms":` u64 `.999` `,"body":` `}`, rounded up.
    const FIXED: usize = 64;
    FIXED + prefix.len() + json_string_bound(body)
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
/// invalid UTF-8 as U+FFFD. Every width is at least 1, which is what lets
/// the escaper store a whole word while 8 input bytes remain.
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
    // A smaller bound would make the cursor index past its slice.
    debug_assert!(entry.bound >= entry_bound(entry.prefix, entry.body));
    let start = out.len();
    out.resize(start + entry.bound, 0);
    let mut w = Cursor {
        buf: &mut out[start..],
        at: 0,
    };
    if !first {
        w.byte(b',');
    }
    w.put(entry.prefix);
    w.decimal(u64::from(entry.status));
    w.put(b",\"latency_ms\":");
    let millis = entry
        .latency
        .as_secs()
        .saturating_mul(1000)
        .saturating_add(u64::from(entry.latency.subsec_millis()));
    w.decimal(millis);
    let frac = entry.latency.subsec_micros() % 1000;
    w.put(&[
        b'.',
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
    w.put(b",\"body\":");
    w.json_string(entry.body);
    w.byte(b'}');
    let end = start + w.at;
    out.truncate(end);
}

/// Appends `bytes` as a JSON string (RFC 8259 §7): quotes, backslashes and
/// control characters escaped, invalid UTF-8 replaced with U+FFFD.
pub(crate) fn write_json_string(out: &mut Vec<u8>, bytes: &[u8]) {
    let start = out.len();
    out.resize(start + json_string_bound(bytes), 0);
    let mut w = Cursor {
        buf: &mut out[start..],
        at: 0,
    };
    w.json_string(bytes);
    let end = start + w.at;
    out.truncate(end);
}

/// Writes into a slice already sized to the bound of what goes in.
struct Cursor<'a> {
    buf: &'a mut [u8],
    at: usize,
}

/// `0x01` in every byte of a word.
const ONES: u64 = u64::from_le_bytes([1; 8]);
/// `0x80` in every byte of a word.
const HIGH: u64 = ONES * 0x80;

/// The high bit of each byte of `word` (little-endian) that a JSON string
/// cannot copy as is: a control byte, `"`, `\`, or a byte that is not
/// ASCII. Bytes above the first such byte may be flagged wrongly (a borrow
/// runs upward), but the lowest flag is always right, and only it is used.
fn special_bytes(word: u64) -> u64 {
    let below_space = word.wrapping_sub(ONES * 0x20) & !word;
    let quote = word ^ (ONES * u64::from(b'"'));
    let backslash = word ^ (ONES * u64::from(b'\\'));
    let zero_in = |x: u64| x.wrapping_sub(ONES) & !x;
    (below_space | zero_in(quote) | zero_in(backslash) | word) & HIGH
}

impl Cursor<'_> {
    fn byte(&mut self, b: u8) {
        self.buf[self.at] = b;
        self.at += 1;
    }

    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }

    fn decimal(&mut self, mut n: u64) {
        let mut digits = 1;
        let mut rest = n / 10;
        while rest > 0 {
            digits += 1;
            rest /= 10;
        }
        self.at += digits;
        for slot in self.buf[self.at - digits..self.at].iter_mut().rev() {
            *slot = b'0' + (n % 10) as u8;
            n /= 10;
        }
    }

    /// Eight bytes at a time while eight remain: each word is stored whole
    /// (the bound leaves room: every byte's width is at least 1) and the
    /// cursor moves past its plain bytes, up to the first that needs work.
    fn json_string(&mut self, bytes: &[u8]) {
        self.byte(b'"');
        let mut i = 0;
        while let Some(chunk) = bytes.get(i..i + 8) {
            self.buf[self.at..self.at + 8].copy_from_slice(chunk);
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            let special = special_bytes(u64::from_le_bytes(word));
            if special == 0 {
                i += 8;
                self.at += 8;
                continue;
            }
            let plain = (special.trailing_zeros() / 8) as usize;
            i += plain;
            self.at += plain;
            match bytes[i] {
                // The common escapes (JSON bodies are full of quotes) inline.
                b @ (b'"' | b'\\') => self.put(&[b'\\', b]),
                0x80.. => break,
                b => self.escape(b),
            }
            i += 1;
        }
        let rest = &bytes[i..];
        match rest.iter().position(|&b| b >= 0x80) {
            None => self.escape_ascii(rest),
            Some(_) => {
                for chunk in rest.utf8_chunks() {
                    self.escape_ascii(chunk.valid().as_bytes());
                    if !chunk.invalid().is_empty() {
                        self.put("\u{fffd}".as_bytes());
                    }
                }
            }
        }
        self.byte(b'"');
    }

    /// Byte by byte: escapes what needs it and copies the rest, including
    /// the bytes of valid multi-byte characters.
    fn escape_ascii(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b < 0x20 || b == b'"' || b == b'\\' {
                self.escape(b);
            } else {
                self.byte(b);
            }
        }
    }

    /// The JSON escape of a control byte, quote or backslash.
    fn escape(&mut self, b: u8) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        match b {
            b'"' => self.put(b"\\\""),
            b'\\' => self.put(b"\\\\"),
            b'\n' => self.put(b"\\n"),
            b'\r' => self.put(b"\\r"),
            b'\t' => self.put(b"\\t"),
            _ => self.put(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ]),
        }
    }
}

/// Appends the failure line of one branch, and the failed connect it
/// moved to `upstream` after, if any:
/// `upstream B: REASON (moved there after upstream A: REASON)`.
pub(crate) fn write_failure(
    out: &mut Vec<u8>,
    upstream: &str,
    reason: &dyn std::fmt::Display,
    moved_from: Option<(&str, &dyn std::fmt::Display)>,
) {
    let _ = write!(out, "upstream {upstream}: {reason}");
    if let Some((first, why)) = moved_from {
        let _ = write!(out, " (moved there after upstream {first}: {why})");
    }
    out.push(b'\n');
}
