//! Byte classes of the HTTP grammar (RFC 9110 §5), as lookup tables:
//! every request and response is checked byte by byte, and one indexed
//! load per byte is the cheapest test there is.

/// Which byte classes a byte belongs to, one bit per class.
static CLASSES: [u8; 256] = classes();

const TCHAR: u8 = 1;
const FIELD_VALUE: u8 = 2;
const HOST: u8 = 4;

const fn classes() -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        let mut class = 0;
        if crate::tchar::is_tchar(b) {
            class |= TCHAR;
        }
        // §5.5 field-value bytes: VCHAR, SP, HTAB and obs-text; no CR, LF
        // or other control byte.
        if matches!(b, b'\t' | 0x20..=0x7e | 0x80..=0xff) {
            class |= FIELD_VALUE;
        }
        // `uri-host [ ":" port ]`: RFC 3986 reg-name, IP-literal and
        // pct-encoded bytes.
        if b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b':'
                    | b'['
                    | b']'
                    | b'%'
            )
        {
            class |= HOST;
        }
        table[i] = class;
        i += 1;
    }
    table
}

/// Whether every byte is in `class`. The classes of eight bytes at a time
/// are ANDed without a branch per byte: about half the instructions of a
/// byte-by-byte `all`, on values checked for every request.
fn all(bytes: &[u8], class: u8) -> bool {
    let mut acc = class;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        for &b in chunk {
            acc &= CLASSES[usize::from(b)];
        }
        if acc == 0 {
            return false;
        }
    }
    for &b in chunks.remainder() {
        acc &= CLASSES[usize::from(b)];
    }
    acc != 0
}

/// RFC 9110 §5.6.2 `tchar`.
pub(crate) fn is_tchar(b: u8) -> bool {
    CLASSES[usize::from(b)] & TCHAR != 0
}

/// A non-empty token: a valid field name or method.
pub(crate) fn is_token(bytes: &[u8]) -> bool {
    !bytes.is_empty() && all(bytes, TCHAR)
}

/// A valid field value: no CR, LF, NUL or other control byte, so it
/// cannot split a message.
pub(crate) fn is_field_value(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        // Eight bytes as one word: the high bit of `below` is set for some
        // byte exactly when one is under 0x20, that of `del` when one is
        // 0x7f (the usual find-a-zero-byte arithmetic). Only then, rarely
        // (a tab is allowed), are the bytes looked at one by one.
        let x = <[u8; 8]>::try_from(chunk).map_or(0, u64::from_le_bytes);
        let below = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
        let y = x ^ (ONES * 0x7f);
        let del = y.wrapping_sub(ONES) & !y & HIGH;
        if below | del != 0 && !all(chunk, FIELD_VALUE) {
            return false;
        }
    }
    all(chunks.remainder(), FIELD_VALUE)
}

/// A valid `Host` value. Anything else, such as NUL, space, `/` or `@`,
/// is not.
pub(crate) fn is_host(bytes: &[u8]) -> bool {
    all(bytes, HOST)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_match_the_grammar() {
        let tchar_symbols = b"!#$%&'*+-.^_`|~";
        let host_symbols = b"-._~!$&'()*+,;=:[]%";
        for b in 0..=255u8 {
            assert_eq!(
                is_tchar(b),
                b.is_ascii_alphanumeric() || tchar_symbols.contains(&b),
                "tchar {b:#x}"
            );
            assert_eq!(
                is_field_value(&[b]),
                b == b'\t' || (0x20..=0x7e).contains(&b) || b >= 0x80,
                "field value {b:#x}"
            );
            assert_eq!(
                is_host(&[b]),
                b.is_ascii_alphanumeric() || host_symbols.contains(&b),
                "host {b:#x}"
            );
        }
        assert!(!is_token(b""));
        assert!(is_token(b"Content-Type"));
        assert!(!is_token(b"Content Type"));
        assert!(is_field_value(b""));
        assert!(!is_field_value(b"a\r\nb"));
        assert!(is_host(b"[::1]:8080"));
        assert!(!is_host(b"a/b"));
    }

    /// Every byte at every position of a 19-byte value (two words and a
    /// remainder) gets the verdict a byte-by-byte check gives.
    #[test]
    fn word_at_a_time_checks_agree_with_the_bytes() {
        type Check = fn(&[u8]) -> bool;
        let checks: [(Check, u8); 3] = [
            (is_token, TCHAR),
            (is_field_value, FIELD_VALUE),
            (is_host, HOST),
        ];
        for (check, class) in checks {
            for b in 0..=255u8 {
                for at in 0..19 {
                    let mut value = *b"abcdefghij012345678";
                    value[at] = b;
                    let expected = CLASSES[usize::from(b)] & class != 0;
                    assert_eq!(check(&value), expected, "byte {b:#x} at {at}");
                }
            }
        }
    }
}
