//! Byte classes of the HTTP grammar (RFC 9110 §5), as lookup tables:
//! every request and response is checked byte by byte, and one indexed
//! load per byte is the cheapest test there is.

/// Which byte classes a byte belongs to, one bit per class.
static CLASSES: [u8; 256] = classes();

const TCHAR: u8 = 1;
const FIELD_VALUE: u8 = 2;
const REG_NAME: u8 = 4;
/// A reg-name byte other than `%`: the common host needs no escape check.
const PLAIN_REG_NAME: u8 = 8;

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
        // RFC 3986 reg-name bytes: unreserved, sub-delims and the `%` of
        // pct-encoded (whose two hex digits `is_host` checks).
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
                    | b'%'
            )
        {
            class |= REG_NAME;
            if b != b'%' {
                class |= PLAIN_REG_NAME;
            }
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
#[inline]
pub fn is_tchar(b: u8) -> bool {
    CLASSES[usize::from(b)] & TCHAR != 0
}

/// A non-empty token: a valid field name or method.
#[inline]
pub fn is_token(bytes: &[u8]) -> bool {
    !bytes.is_empty() && all(bytes, TCHAR)
}

/// A valid field value: no CR, LF, NUL or other control byte, so it
/// cannot split a message.
#[inline]
pub fn is_field_value(bytes: &[u8]) -> bool {
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

/// A valid `Host` value: `uri-host [ ":" port ]` (RFC 9110 §7.2), where
/// `uri-host` is an IP literal in brackets or a reg-name (RFC 3986 §3.2.2;
/// empty when the target has no authority) and `port` is `*DIGIT`.
/// Anything else, such as NUL, space, `/`, `@`, a second `:`, a port that
/// is not digits, an unclosed `[` or a `%` without two hex digits, is not.
#[inline]
pub fn is_host(bytes: &[u8]) -> bool {
    // The port first, from the end: a host never ends in `:` and digits,
    // so the last `:` before trailing digits (or at the end) starts it.
    // One check per request: each byte is looked at about once.
    let digits = bytes
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    let host = match bytes.len().checked_sub(digits + 1) {
        Some(colon) if bytes[colon] == b':' => &bytes[..colon],
        _ => bytes,
    };
    match host {
        [b'[', inside @ .., b']'] => is_ip_literal(inside),
        _ => all(host, PLAIN_REG_NAME) || is_reg_name(host),
    }
}

/// RFC 3986 `reg-name`: unreserved, sub-delims and pct-encoded bytes.
fn is_reg_name(bytes: &[u8]) -> bool {
    all(bytes, REG_NAME)
        && bytes.iter().enumerate().all(|(i, &b)| {
            b != b'%'
                || bytes
                    .get(i + 1..i + 3)
                    .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
        })
}

/// The inside of an RFC 3986 `IP-literal`: an IPv6 address, or
/// `IPvFuture` (`v` 1*HEXDIG `.` 1*( unreserved / sub-delims / `:` )).
fn is_ip_literal(inside: &[u8]) -> bool {
    match inside {
        [b'v' | b'V', rest @ ..] => {
            let Some(dot) = rest.iter().position(|&b| b == b'.') else {
                return false;
            };
            let (version, address) = (&rest[..dot], &rest[dot + 1..]);
            !version.is_empty()
                && version.iter().all(u8::is_ascii_hexdigit)
                && !address.is_empty()
                && address
                    .iter()
                    .all(|&b| b == b':' || (b != b'%' && CLASSES[usize::from(b)] & REG_NAME != 0))
        }
        _ => std::str::from_utf8(inside).is_ok_and(|s| s.parse::<std::net::Ipv6Addr>().is_ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_match_the_grammar() {
        let tchar_symbols = b"!#$%&'*+-.^_`|~";
        // `%` alone is not a reg-name: it needs its two hex digits.
        let reg_name_symbols = b"-._~!$&'()*+,;=";
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
                is_reg_name(&[b]),
                b.is_ascii_alphanumeric() || reg_name_symbols.contains(&b),
                "reg-name {b:#x}"
            );
            assert_eq!(
                all(&[b], PLAIN_REG_NAME),
                is_reg_name(&[b]),
                "plain reg-name {b:#x}"
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

    /// RFC 9110 §7.2 `Host = uri-host [ ":" port ]`, not just its bytes.
    #[test]
    fn host_follows_the_grammar() {
        for valid in [
            &b""[..],
            b"a",
            b"example.com",
            b"example.com:8080",
            b"example.com:",
            b"127.0.0.1:80",
            b"my_host-1.local",
            b"xn--bcher-kva.example",
            b"a%2Fb",
            b"[::1]",
            b"[::1]:8080",
            b"[2001:db8::7]:443",
            b"[::ffff:192.0.2.1]",
            b"[v1.fe80::a+en1]",
            b":80",
        ] {
            assert!(is_host(valid), "{:?}", String::from_utf8_lossy(valid));
        }
        for invalid in [
            &b":a"[..],
            b"a:b:c",
            b"a:80x",
            b"a:80:80",
            b"a:-1",
            b"[::1",
            b"[::1]x",
            b"[::1]:a",
            b"[a]",
            b"[]",
            b"[::1%25eth0]",
            b"[v1]",
            b"[v.a]",
            b"a]",
            b"a[b]",
            b"a%zz",
            b"a%2",
            b"a%",
            b"a b",
            b"a/b",
            b"a@b",
            b"a\x00b",
            b"a\xc3\xa9",
        ] {
            assert!(!is_host(invalid), "{:?}", String::from_utf8_lossy(invalid));
        }
    }

    /// Every byte at every position of a 19-byte value (two words and a
    /// remainder) gets the verdict a byte-by-byte check gives.
    #[test]
    fn word_at_a_time_checks_agree_with_the_bytes() {
        type Check = fn(&[u8]) -> bool;
        let checks: [(Check, u8); 3] = [
            (is_token, TCHAR),
            (is_field_value, FIELD_VALUE),
            (|v| all(v, REG_NAME), REG_NAME),
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
