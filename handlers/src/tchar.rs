//! The token characters of RFC 9110 §5.6.2, defined once for the two byte
//! tables built from them: the HTTP layer's byte classes and the proxy's
//! response head scanner. The scanner stays free of crate paths (the tokio
//! fan-out baseline compiles it on its own), so it includes this file by
//! path rather than through the crate.

/// Whether `c` is a `tchar`: what methods and field names are made of.
pub(crate) const fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(
            c,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        )
}
