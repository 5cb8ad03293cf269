//! The token characters of RFC 9110 §5.6.2, defined once for all that
//! checks tokens: the HTTP layer's byte classes and the proxy's pseudonym
//! check (in `percore-handlers`), and the response head scanner of
//! [`head`](crate::head).

/// Whether `c` is a `tchar`: what methods and field names are made of.
pub const fn is_tchar(c: u8) -> bool {
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
