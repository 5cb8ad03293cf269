//! The request target of a sub-request (RFC 9112 §3.2).
//!
//! A client may name the resource in four forms. The proxy is a gateway: it
//! chooses the upstream itself and writes its own `Host`, so what it
//! forwards is the origin-form (`/path?query`), whatever form came in:
//!
//! - origin-form (`/path?q`) goes as sent, less a fragment (`#...`);
//! - absolute-form (`http://host:port/path?q`, which RFC 9112 §3.2.2 says
//!   a server MUST accept) is cut down to its path and query, with `/` for
//!   an empty path (§3.2.1). Forwarded whole, an upstream that honours the
//!   absolute form would take the authority from it and ignore the
//!   proxy's `Host`. An `OPTIONS` for a whole server
//!   (`OPTIONS http://host:port`) becomes `OPTIONS *`, as §3.2.4 requires
//!   of the last proxy on the chain;
//! - asterisk-form (`OPTIONS *`) goes as sent;
//! - authority-form (`host:port`) belongs to `CONNECT`, which asks for a
//!   tunnel; the proxy does not open tunnels, so `CONNECT` is refused,
//!   whatever its target.
//!
//! A target in no form its method may use (`GET host:443`, `GET *`, a
//! scheme other than `http`/`https`, an `http` URI without a host or with
//! userinfo) is a 400: a gateway cannot turn it into an origin-form
//! request. The target is never copied: an [`OriginForm`] borrows the
//! request's bytes.

use crate::http::HttpError;

/// The target to write in a sub-request's request line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OriginForm<'a> {
    /// Write `/` before `rest`: the absolute form had an empty path
    /// (`http://host` or `http://host?q`).
    slash: bool,
    /// The path and query as sent, or `*`.
    rest: &'a str,
}

impl<'a> OriginForm<'a> {
    /// Appends the target to a request line being written.
    pub(crate) fn write_to(self, out: &mut Vec<u8>) {
        if self.slash {
            out.push(b'/');
        }
        out.extend_from_slice(self.rest.as_bytes());
    }

    /// A target that goes as sent (origin-form or `*`).
    const fn verbatim(rest: &'a str) -> Self {
        Self { slash: false, rest }
    }
}

/// 501 rather than 405: RFC 9110 §9.1 answers a method the server does not
/// implement with 501, and 405 with the methods the *target resource*
/// allows (its `Allow` is required, §15.5.6). The proxy forwards every
/// other method to resources it knows nothing about, so it has no honest
/// `Allow` to give; what it lacks is the tunnel itself, for any target.
const CONNECT_REFUSED: HttpError =
    HttpError::not_implemented("CONNECT: the proxy opens no tunnels");

/// What to forward for a request with `method` and `target`.
///
/// # Errors
///
/// `CONNECT` (501) and a target in no form the method may use (400). The
/// HTTP layer answers either with its status and closes the connection:
/// after a refused `CONNECT` the client may already be sending tunnel
/// bytes, which must not be read as a request.
pub(crate) fn origin_form<'a>(method: &str, target: &'a str) -> Result<OriginForm<'a>, HttpError> {
    if method == "CONNECT" {
        return Err(CONNECT_REFUSED);
    }
    if target.starts_with('/') {
        return Ok(OriginForm::verbatim(without_fragment(target)));
    }
    if target == "*" {
        // RFC 9112 §3.2.4: asterisk-form is only for a server-wide OPTIONS.
        return if method == "OPTIONS" {
            Ok(OriginForm::verbatim(target))
        } else {
            Err(HttpError::bad_request(
                "asterisk-form target without OPTIONS",
            ))
        };
    }
    let rest = path_of_absolute(target).ok_or(HttpError::bad_request(
        "request target is neither origin-form nor an http(s) absolute URI",
    ))?;
    if rest.is_empty() && method == "OPTIONS" {
        return Ok(OriginForm::verbatim("*"));
    }
    Ok(OriginForm {
        slash: !rest.starts_with('/'),
        rest,
    })
}

/// The path and query of an `http` or `https` absolute URI (everything
/// after the authority), or `None` when `target` is not one.
fn path_of_absolute(target: &str) -> Option<&str> {
    let (scheme, rest) = target.split_once("://")?;
    // Schemes are case-insensitive (RFC 3986 §3.1).
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    // RFC 3986 §3.2: the authority ends at the first `/`, `?` or `#`.
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    // RFC 9110 §4.2.4: userinfo in an `http` URI is to be treated as an
    // error (it has been used to disguise the real host from people).
    if authority.contains('@') {
        return None;
    }
    // RFC 9110 §4.2.1: an `http` URI with an empty host is invalid. The
    // port follows the last `:`, except inside an IPv6 literal.
    let host = match authority.rfind(':') {
        Some(colon) if !authority[colon..].contains(']') => &authority[..colon],
        _ => authority,
    };
    if host.is_empty() {
        return None;
    }
    Some(without_fragment(&rest[end..]))
}

/// `target` up to a `#`: a fragment is the client's own business (RFC 3986
/// §3.5) and has no place in a request target, in any form.
fn without_fragment(target: &str) -> &str {
    target.split_once('#').map_or(target, |(before, _)| before)
}
