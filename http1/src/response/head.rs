//! The head of a response, scanned in one pass that also notes what its
//! reader (the client, the proxy) needs from its fields (the framing and
//! `Connection: close`), so that no field is stored or looked at twice.
//!
//! It accepts and refuses exactly what httparse (with its default response
//! settings) does, which it replaced on this path for speed: leading empty
//! lines are skipped; the version is `HTTP/1.0` or `HTTP/1.1`, followed by
//! one space and three digits, then a space and a reason phrase, or the end
//! of the line; a field name is a token followed directly by `:`; a value
//! holds no control byte but HTAB; a line ends in CRLF or a bare LF;
//! obsolete line folding is refused; more than [`MAX_FIELDS`] fields are
//! refused. A bad byte is reported as soon as it is in the buffer, even
//! before the head is complete, so that an upstream speaking another
//! protocol is refused at once rather than at the deadline.
//!
//! Only std (and httparse in the tests): the tokio fan-out baseline
//! (`benches/src/tokio_fanout.rs`) uses this module too, so that both
//! servers scan upstream heads with the same code.

use crate::tchar;

/// Most header fields in an upstream response head.
pub const MAX_FIELDS: usize = 64;

/// Why a head was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadError {
    /// A byte or line the grammar does not allow.
    Malformed,
    /// More than [`MAX_FIELDS`] fields.
    TooManyFields,
}

/// A complete response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Its length in bytes, leading empty lines included.
    pub len: usize,
    /// The minor version: 0 or 1.
    pub minor: u8,
    /// The status code: three digits.
    pub status: u16,
    /// What its fields say.
    pub fields: Fields,
}

/// What the fields say about framing and the connection.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Fields {
    /// The `Content-Length`, once one was seen.
    pub length: Option<u64>,
    /// A `Transfer-Encoding` field was seen (then it said `chunked`, or
    /// `invalid` says otherwise).
    pub chunked: bool,
    /// A `Connection` field lists `close`.
    pub close: bool,
    /// The first framing fault, in field order. Kept rather than returned
    /// so that a malformed line later in the head is reported first, as
    /// when the head was parsed whole before its fields were read.
    pub invalid: Option<&'static str>,
}

/// Bytes a field value (and a reason phrase) may hold: HTAB, SP, visible
/// ASCII and obs-text (RFC 9110 §5.5).
static VALUE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = b == 0x09 || (b >= 0x20 && b != 0x7f);
        b += 1;
    }
    table
};

/// `tchar` (RFC 9110 §5.6.2): the bytes of a field name.
static TOKEN: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = tchar::is_tchar(b as u8);
        b += 1;
    }
    table
};

/// `0x01` in every byte of a word.
const ONES: u64 = u64::from_le_bytes([1; 8]);
/// `0x80` in every byte of a word.
const HIGH: u64 = ONES * 0x80;

/// Scans a response head at the start of `buf`. `Ok(None)`: no bad byte
/// so far, but the head is not complete.
pub fn parse(buf: &[u8]) -> Result<Option<Head>, HeadError> {
    use HeadError::Malformed;
    let mut i = 0;
    // RFC 9112 §2.2: empty lines before the status line are ignored.
    loop {
        match buf.get(i) {
            None => return Ok(None),
            Some(b'\n') => i += 1,
            Some(b'\r') => match buf.get(i + 1) {
                None => return Ok(None),
                Some(b'\n') => i += 2,
                Some(_) => return Err(Malformed),
            },
            Some(_) => break,
        }
    }
    let line = &buf[i..];
    // `HTTP/1.x 200` and the byte after it.
    let Some(&[v0, v1, v2, v3, v4, v5, v6, v7, space, d1, d2, d3, after]) = line.get(..13) else {
        return if status_line_prefix_ok(line) {
            Ok(None)
        } else {
            Err(Malformed)
        };
    };
    let minor = match u64::from_le_bytes([v0, v1, v2, v3, v4, v5, v6, v7]) {
        HTTP_10 => 0,
        HTTP_11 => 1,
        _ => return Err(Malformed),
    };
    if space != b' ' || ![d1, d2, d3].iter().all(u8::is_ascii_digit) {
        return Err(Malformed);
    }
    let status = u16::from(d1 - b'0') * 100 + u16::from(d2 - b'0') * 10 + u16::from(d3 - b'0');
    i += 12;
    i = match after {
        // The reason phrase: the same bytes as a field value.
        b' ' => match line_end(buf, value_end(buf, i + 1))? {
            Some(next) => next,
            None => return Ok(None),
        },
        b'\r' | b'\n' => match line_end(buf, i)? {
            Some(next) => next,
            None => return Ok(None),
        },
        _ => return Err(Malformed),
    };
    let mut fields = Fields::default();
    let mut count = 0;
    loop {
        match buf.get(i) {
            None => return Ok(None),
            Some(b'\r' | b'\n') => {
                return Ok(line_end(buf, i)?.map(|len| Head {
                    len,
                    minor,
                    status,
                    fields,
                }))
            }
            Some(_) => {}
        }
        let name_start = i;
        i = name_end(buf, i);
        match buf.get(i) {
            None => return Ok(None),
            Some(b':') if i > name_start => {}
            Some(_) => return Err(Malformed),
        }
        let name = &buf[name_start..i];
        i += 1;
        while buf.get(i).is_some_and(|&b| b == b' ' || b == b'\t') {
            i += 1;
        }
        let value_start = i;
        let end = value_end(buf, i);
        let Some(next) = line_end(buf, end)? else {
            return Ok(None);
        };
        if count == MAX_FIELDS {
            return Err(HeadError::TooManyFields);
        }
        count += 1;
        fields.note(name, &buf[value_start..end]);
        i = next;
    }
}

const HTTP_10: u64 = u64::from_le_bytes(*b"HTTP/1.0");
const HTTP_11: u64 = u64::from_le_bytes(*b"HTTP/1.1");

/// Whether `line`, shorter than `HTTP/1.x 200` and the byte after it, may
/// still become a status line.
fn status_line_prefix_ok(line: &[u8]) -> bool {
    let prefix = &line[..line.len().min(7)];
    if prefix != &b"HTTP/1."[..prefix.len()] {
        return false;
    }
    // What follows `HTTP/1.`: the minor version, the space, digits.
    match &line[prefix.len()..] {
        [] => true,
        [minor, rest @ ..] => {
            matches!(minor, b'0' | b'1')
                && rest.first().is_none_or(|&b| b == b' ')
                && rest
                    .get(1..)
                    .unwrap_or_default()
                    .iter()
                    .all(u8::is_ascii_digit)
        }
    }
}

/// The index after the line end at `i` (CRLF or LF); `Ok(None)` when the
/// buffer ends first; an error for any other byte there.
fn line_end(buf: &[u8], i: usize) -> Result<Option<usize>, HeadError> {
    match buf.get(i) {
        None => Ok(None),
        Some(b'\n') => Ok(Some(i + 1)),
        Some(b'\r') => match buf.get(i + 1) {
            None => Ok(None),
            Some(b'\n') => Ok(Some(i + 2)),
            Some(_) => Err(HeadError::Malformed),
        },
        Some(_) => Err(HeadError::Malformed),
    }
}

/// The eight bytes at `i`, as a little-endian word, if there are eight.
fn word_at(buf: &[u8], i: usize) -> Option<u64> {
    let mut word = [0; 8];
    word.copy_from_slice(buf.get(i..i + 8)?);
    Some(u64::from_le_bytes(word))
}

/// The index of the first byte from `i` on that a field name may not hold
/// (where a name ends, at its `:`), or the buffer's length. Eight bytes at
/// a time while they are letters, digits and `-`, as nearly every name's
/// are; the other `tchar`s are looked up one by one.
fn name_end(buf: &[u8], mut i: usize) -> usize {
    while let Some(word) = word_at(buf, i) {
        let stop = not_alnum_or_dash(word);
        if stop == 0 {
            i += 8;
            continue;
        }
        i += (stop.trailing_zeros() / 8) as usize;
        if !TOKEN[usize::from(buf[i])] {
            return i;
        }
        i += 1;
    }
    while buf.get(i).is_some_and(|&b| TOKEN[usize::from(b)]) {
        i += 1;
    }
    i
}

/// The high bit of each byte of `word` that is not an ASCII letter, digit
/// or `-`. Exact for every byte: each sum below stays within its byte
/// (the high bits are cleared first), so nothing carries into the next.
fn not_alnum_or_dash(word: u64) -> u64 {
    let low = word & !HIGH;
    let at_least = |x: u64, c: u8| x + ONES * u64::from(0x80 - c);
    let digit = at_least(low, b'0') & !at_least(low, b'9' + 1);
    let folded = low | (ONES * 0x20);
    let letter = at_least(folded, b'a') & !at_least(folded, b'z' + 1);
    let dash = !((low ^ (ONES * u64::from(b'-'))) + (ONES * 0x7f));
    !((digit | letter | dash) & !word) & HIGH
}

/// The index of the first byte from `i` on that a value may not hold (the
/// line end, or a bad byte), or the buffer's length. Eight bytes at a
/// time: values (dates, types, cookies) are most of a head's bytes.
fn value_end(buf: &[u8], mut i: usize) -> usize {
    while let Some(word) = word_at(buf, i) {
        // The high bit of each byte below 0x20 or equal to 0x7f. A borrow
        // may flag bytes above the first flagged one wrongly, but the
        // lowest flag is always right, and only it is used.
        let del = word ^ (ONES * 0x7f);
        let flagged =
            ((word.wrapping_sub(ONES * 0x20) & !word) | (del.wrapping_sub(ONES) & !del)) & HIGH;
        if flagged == 0 {
            i += 8;
            continue;
        }
        let at = i + (flagged.trailing_zeros() / 8) as usize;
        if buf[at] != b'\t' {
            return at;
        }
        i = at + 1;
    }
    while buf.get(i).is_some_and(|&b| VALUE[usize::from(b)]) {
        i += 1;
    }
    i
}

impl Fields {
    /// Notes one field. The names compared are letters and `-`, at least
    /// eight bytes long, and `name` is a token: setting the 0x20 bit turns
    /// an upper-case letter into its lower case and leaves `-` as it is,
    /// and no other token byte becomes a lower-case letter or `-` that
    /// way, so comparing words with that bit set in every byte is exactly
    /// a case-insensitive comparison.
    fn note(&mut self, name: &[u8], value: &[u8]) {
        let is = |lower: &[u8]| {
            let n = lower.len();
            name.len() == n
                && (0..n.div_ceil(8)).all(|k| {
                    let at = (k * 8).min(n - 8);
                    word_at(name, at).map(|w| w | (ONES * 0x20)) == word_at(lower, at)
                })
        };
        if is(b"content-length") {
            let Some(n) = parse_length(value) else {
                self.fault("invalid Content-Length");
                return;
            };
            if self.length.is_some_and(|l| l != n) {
                self.fault("conflicting Content-Length values");
            }
            self.length = Some(n);
        } else if is(b"transfer-encoding") {
            if self.chunked {
                self.fault("repeated Transfer-Encoding");
            } else if !value.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                self.fault("unsupported Transfer-Encoding");
            }
            self.chunked = true;
        } else if is(b"connection") {
            self.close |= has_token(value, b"close");
        }
    }

    fn fault(&mut self, why: &'static str) {
        self.invalid.get_or_insert(why);
    }
}

/// Whether the comma-separated list `value` holds `token` (any case).
pub fn has_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// `1*DIGIT`, at most 19 digits (no sign, no spaces inside, no overflow).
fn parse_length(value: &[u8]) -> Option<u64> {
    let digits = value.trim_ascii();
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What httparse, with the settings the proxy used, makes of `buf`,
    /// with the fields read the way the proxy read them from it.
    fn reference(buf: &[u8]) -> Result<Option<Head>, HeadError> {
        let mut storage = [httparse::EMPTY_HEADER; MAX_FIELDS];
        let mut resp = httparse::Response::new(&mut storage);
        let len = match httparse::ParserConfig::default().parse_response(&mut resp, buf) {
            Ok(httparse::Status::Partial) => return Ok(None),
            Ok(httparse::Status::Complete(len)) => len,
            Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooManyFields),
            Err(_) => return Err(HeadError::Malformed),
        };
        let mut fields = Fields::default();
        let mut te = false;
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                match parse_length(h.value) {
                    None => fields.fault("invalid Content-Length"),
                    Some(n) => {
                        if fields.length.is_some_and(|l| l != n) {
                            fields.fault("conflicting Content-Length values");
                        }
                        fields.length = Some(n);
                    }
                }
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                if te {
                    fields.fault("repeated Transfer-Encoding");
                } else if !h.value.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                    fields.fault("unsupported Transfer-Encoding");
                }
                te = true;
            } else if h.name.eq_ignore_ascii_case("connection") {
                fields.close |= has_token(h.value, b"close");
            }
        }
        fields.chunked = te;
        Ok(Some(Head {
            len,
            minor: resp.version.unwrap_or(9),
            status: resp.code.unwrap_or(0),
            fields,
        }))
    }

    /// The word-at-a-time name check flags exactly the bytes that are not
    /// letters, digits or `-`, whatever their neighbours.
    #[test]
    fn name_bytes_word_at_a_time() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                let word = u64::from_le_bytes([b'x', a, b, b'-', b'0', a, b'Z', b]);
                let flags = not_alnum_or_dash(word).to_le_bytes();
                for (byte, flag) in word.to_le_bytes().into_iter().zip(flags) {
                    let plain = byte.is_ascii_alphanumeric() || byte == b'-';
                    assert_eq!(flag == 0x80, !plain, "{a:#x} {b:#x}: byte {byte:#x}");
                }
            }
        }
    }

    /// Every prefix of many heads, valid and mutated, gets what httparse
    /// gets: the same length, status, version and fields, the same
    /// refusals, and `None` for the same incomplete heads.
    #[test]
    fn agrees_with_httparse() {
        let heads: [&[u8]; 7] = [
            b"HTTP/1.1 200 OK\r\nDate: Mon, 30 Nov 2026 23:29:53 GMT\r\nContent-Length: 20\r\nContent-Type: application/json\r\n\r\nbody",
            b"\r\n\nHTTP/1.0 404 Not \xffFound\nCONTENT-length:  7 \nConnection: keep-alive, Close\n\n",
            b"HTTP/1.1 204\r\nTransfer-Encoding:\tchunked\t\r\nX-Empty:\r\nx:y\r\n\r\n",
            b"HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\ncontent-length: x\r\n\r\n",
            b"HTTP/1.1 500 Internal Server Error\r\nSet-Cookie: a=b; Path=/; HttpOnly\r\nContent-Length: 0\r\n\r\n",
        ];
        // Bytes that sit on the scanner's edges.
        let edges = b"\r\n \t:\x00\x1f\x7f\x80\xffaA0/.1-_^~\"";
        let mut seed = 0x853c_49e6_748f_ea9bu64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut cases: Vec<Vec<u8>> = heads.iter().map(|h| h.to_vec()).collect();
        let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..=MAX_FIELDS {
            many.extend_from_slice(format!("F{i}: v\r\n").as_bytes());
            if i + 1 >= MAX_FIELDS {
                cases.push([many.as_slice(), b"\r\n"].concat());
            }
        }
        for _ in 0..3000 {
            let mut case = heads[(next() % heads.len() as u64) as usize].to_vec();
            for _ in 0..1 + next() % 3 {
                let at = (next() % case.len() as u64) as usize;
                let byte = edges[(next() % edges.len() as u64) as usize];
                match next() % 3 {
                    0 => case[at] = byte,
                    1 => case.insert(at, byte),
                    _ => drop(case.remove(at)),
                }
            }
            cases.push(case);
        }
        for case in &cases {
            for end in 0..=case.len() {
                let input = &case[..end];
                assert_eq!(
                    parse(input),
                    reference(input),
                    "{:?}",
                    String::from_utf8_lossy(input)
                );
            }
        }
    }
}
