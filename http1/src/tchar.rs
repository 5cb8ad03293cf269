//! The token characters of RFC 9110 §5.6.2, defined once for all that
//! checks tokens: the byte classes of [`chars`](crate::chars), the
//! response head scanner of [`response::head`](crate::response::head), and
//! the proxy's pseudonym check (in `percore-handlers`). A `const fn`, so
//! that lookup tables can be built from it at compile time.

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
