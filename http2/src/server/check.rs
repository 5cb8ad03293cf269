//! The rules a request's field block must follow (RFC 9113 §8.1.1,
//! §8.2, §8.3.1, RFC 8441 §4), checked field by field as the block is
//! decoded, with nothing kept but a few flags and the announced length.
//! A block that breaks one is malformed: a stream error of type
//! PROTOCOL_ERROR.

/// The pseudo-header fields a request may carry, one bit each.
const METHOD: u8 = 1;
const SCHEME: u8 = 2;
const PATH: u8 = 4;
const AUTHORITY: u8 = 8;
const PROTOCOL: u8 = 16;

/// One field block's check in progress.
#[derive(Debug, Clone, Copy)]
pub(super) struct HeadCheck {
    /// A trailer block: no pseudo-header at all.
    trailers: bool,
    /// SETTINGS_ENABLE_CONNECT_PROTOCOL was announced: `:protocol` is
    /// allowed on CONNECT.
    connect_protocol: bool,
    seen: u8,
    /// A regular field went by: pseudo-headers may come no more.
    regular: bool,
    connect: bool,
    empty_path: bool,
    length: Option<u64>,
    error: Option<&'static str>,
}

impl HeadCheck {
    /// The check of a request head.
    pub(super) fn request(connect_protocol: bool) -> Self {
        HeadCheck {
            trailers: false,
            connect_protocol,
            seen: 0,
            regular: false,
            connect: false,
            empty_path: false,
            length: None,
            error: None,
        }
    }

    /// The check of a trailer block.
    pub(super) fn trailers() -> Self {
        HeadCheck {
            trailers: true,
            ..HeadCheck::request(false)
        }
    }

    /// Checks the next field; the first rule broken is kept.
    pub(super) fn field(&mut self, name: &[u8], value: &[u8]) {
        if self.error.is_none() {
            self.error = self.check(name, value).err();
        }
    }

    fn check(&mut self, name: &[u8], value: &[u8]) -> Result<(), &'static str> {
        if !valid_value(value) {
            return Err("field value with a control character or edge whitespace");
        }
        if let Some(pseudo) = name.strip_prefix(b":") {
            if self.trailers {
                return Err("pseudo-header field in trailers");
            }
            if self.regular {
                return Err("pseudo-header field after a regular field");
            }
            let bit = match pseudo {
                b"method" => METHOD,
                b"scheme" => SCHEME,
                b"path" => PATH,
                b"authority" => AUTHORITY,
                b"protocol" => PROTOCOL,
                _ => return Err("unknown or response pseudo-header field"),
            };
            if self.seen & bit != 0 {
                return Err("pseudo-header field repeated");
            }
            self.seen |= bit;
            match bit {
                METHOD => self.connect = value == b"CONNECT",
                PATH => self.empty_path = value.is_empty(),
                _ => {}
            }
            return Ok(());
        }
        self.regular = true;
        if name.is_empty() || !name.iter().all(|&b| is_name_byte(b)) {
            return Err("field name not a lowercase token");
        }
        match name {
            // §8.2.2: HTTP/2 has no connection-specific fields.
            b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding"
            | b"upgrade" => Err("connection-specific field"),
            b"te" if value != b"trailers" => Err("TE other than \"trailers\""),
            b"content-length" if !self.trailers => {
                let n = parse_length(value).ok_or("invalid content-length")?;
                if self.length.is_some_and(|m| m != n) {
                    return Err("content-length values differ");
                }
                self.length = Some(n);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The verdict once the block is whole: the announced body length,
    /// if any, or the rule broken.
    pub(super) fn finish(&self) -> Result<Option<u64>, &'static str> {
        if let Some(error) = self.error {
            return Err(error);
        }
        if self.trailers {
            return Ok(None);
        }
        if self.seen & METHOD == 0 {
            return Err("no :method");
        }
        let protocol = self.seen & PROTOCOL != 0;
        if protocol && !self.connect_protocol {
            return Err(":protocol without SETTINGS_ENABLE_CONNECT_PROTOCOL");
        }
        if protocol && !self.connect {
            return Err(":protocol on a method other than CONNECT");
        }
        if self.connect && !protocol {
            // §8.5: a CONNECT names its target by :authority alone.
            if self.seen & (SCHEME | PATH) != 0 {
                return Err("CONNECT with :scheme or :path");
            }
            if self.seen & AUTHORITY == 0 {
                return Err("CONNECT without :authority");
            }
        } else if self.seen & (SCHEME | PATH) != SCHEME | PATH {
            return Err("no :scheme or no :path");
        } else if self.empty_path {
            return Err("empty :path");
        }
        Ok(self.length)
    }
}

/// A token character (RFC 9110 §5.6.2), not uppercase (§8.2.1).
fn is_name_byte(b: u8) -> bool {
    matches!(b,
        b'a'..=b'z' | b'0'..=b'9' | b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*'
        | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~')
}

/// §8.2.1: no NUL, CR or LF (nor other controls but HTAB, which HTTP
/// does not allow either), and no whitespace at either end.
fn valid_value(value: &[u8]) -> bool {
    let edge = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    !edge(value.first())
        && !edge(value.last())
        && value
            .iter()
            .all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

/// A `content-length`: decimal digits only, within `u64`.
fn parse_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |n, &b| {
        let digit = (b as char).to_digit(10)?;
        n.checked_mul(10)?.checked_add(digit as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::HeadCheck;

    fn verdict(
        connect_protocol: bool,
        fields: &[(&str, &str)],
    ) -> Result<Option<u64>, &'static str> {
        let mut check = HeadCheck::request(connect_protocol);
        for (name, value) in fields {
            check.field(name.as_bytes(), value.as_bytes());
        }
        check.finish()
    }

    const GET: [(&str, &str); 4] = [
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/"),
        (":authority", "a"),
    ];

    fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        let mut fields = GET.to_vec();
        fields.extend_from_slice(extra);
        fields
    }

    #[test]
    fn good_requests_pass() {
        assert_eq!(verdict(false, &GET), Ok(None));
        assert_eq!(
            verdict(
                false,
                &with(&[("content-length", "42"), ("te", "trailers")])
            ),
            Ok(Some(42))
        );
        assert_eq!(
            verdict(false, &[(":method", "CONNECT"), (":authority", "a:443")]),
            Ok(None)
        );
        let ws = [
            (":method", "CONNECT"),
            (":protocol", "websocket"),
            (":scheme", "https"),
            (":path", "/chat"),
            (":authority", "a"),
        ];
        assert_eq!(verdict(true, &ws), Ok(None));
        assert!(verdict(false, &ws).is_err(), "not announced");
    }

    #[test]
    fn pseudo_header_rules() {
        let bad: &[&[(&str, &str)]] = &[
            &[(":scheme", "https"), (":path", "/")],
            &[(":method", "GET"), (":path", "/")],
            &[(":method", "GET"), (":scheme", "https")],
            &[(":method", "GET"), (":scheme", "https"), (":path", "")],
            &[
                (":method", "GET"),
                (":method", "GET"),
                (":scheme", "h"),
                (":path", "/"),
            ],
            &[
                (":method", "GET"),
                (":status", "200"),
                (":scheme", "h"),
                (":path", "/"),
            ],
            &[
                (":method", "GET"),
                ("a", "1"),
                (":scheme", "h"),
                (":path", "/"),
            ],
            &[
                (":method", "GET"),
                (":protocol", "ws"),
                (":scheme", "h"),
                (":path", "/"),
            ],
            &[(":method", "CONNECT")],
            &[(":method", "CONNECT"), (":authority", "a"), (":path", "/")],
        ];
        for fields in bad {
            assert!(verdict(true, fields).is_err(), "{fields:?}");
        }
    }

    #[test]
    fn field_rules() {
        let bad: &[(&str, &str)] = &[
            ("Upper", "1"),
            ("sp ace", "1"),
            ("", "1"),
            ("connection", "close"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("keep-alive", "1"),
            ("te", "gzip"),
            ("x", "a\r\nb"),
            ("x", "a\0b"),
            ("x", " a"),
            ("x", "a\t"),
            ("content-length", "1x"),
            ("content-length", ""),
            ("content-length", "99999999999999999999999"),
        ];
        for field in bad {
            assert!(verdict(false, &with(&[*field])).is_err(), "{field:?}");
        }
        assert!(verdict(
            false,
            &with(&[("content-length", "1"), ("content-length", "2")])
        )
        .is_err());
        assert_eq!(
            verdict(
                false,
                &with(&[("content-length", "1"), ("content-length", "1")])
            ),
            Ok(Some(1))
        );
        assert_eq!(verdict(false, &with(&[("x", "a\tb c")])), Ok(None));
    }

    #[test]
    fn trailers_carry_no_pseudo_header() {
        let mut check = HeadCheck::trailers();
        check.field(b"grpc-status", b"0");
        assert_eq!(check.finish(), Ok(None));
        let mut check = HeadCheck::trailers();
        check.field(b":path", b"/");
        assert!(check.finish().is_err());
    }
}
