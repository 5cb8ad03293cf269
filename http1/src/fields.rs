//! Field semantics that decide framing and connection reuse: Content-Length,
//! Transfer-Encoding, Host, Connection and Expect.
//!
//! httparse checks field syntax; this module checks meaning. Every rule here
//! rejects instead of guessing, because two parsers that guess differently
//! are exactly what request smuggling exploits (RFC 9112 §11.2).

use super::{chars, BodyKind, HttpError, Limits};

/// What the fields of a request decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decision<'b> {
    pub(crate) body: BodyKind,
    pub(crate) keep_alive: bool,
    pub(crate) expect_continue: bool,
    pub(crate) content_type: Option<&'b [u8]>,
}

/// Interprets the fields of a parsed head of HTTP/1.`minor`.
pub(crate) fn decide<'b>(
    headers: &[httparse::Header<'b>],
    minor: u8,
    limits: &Limits,
) -> Result<Decision<'b>, HttpError> {
    let mut length: Option<u64> = None;
    let mut te: Option<&[u8]> = None;
    let mut hosts = 0usize;
    let mut close = false;
    let mut keep_alive_token = false;
    let mut expect_continue = false;
    let mut content_type = None;

    for h in headers {
        let name = h.name.as_bytes();
        // Dispatch on the length first: most fields are none of these.
        match name.len() {
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                // RFC 9112 §6.3: a list or repeated Content-Length is "an
                // unrecoverable error"; we refuse even identical duplicates
                // rather than merge them (nginx does the same).
                if length.is_some() {
                    return Err(HttpError::bad_request("duplicate Content-Length"));
                }
                length = Some(parse_length(h.value)?);
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                // Two TE lines could be read as one list or as two fields;
                // a proxy and an origin that differ on this disagree on
                // framing.
                if te.is_some() {
                    return Err(HttpError::bad_request("duplicate Transfer-Encoding"));
                }
                te = Some(h.value);
            }
            4 if name.eq_ignore_ascii_case(b"host") => {
                hosts += 1;
                if !chars::is_host(h.value) {
                    return Err(HttpError::bad_request("invalid Host"));
                }
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                for token in list(h.value) {
                    close |= token.eq_ignore_ascii_case(b"close");
                    keep_alive_token |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            }
            6 if name.eq_ignore_ascii_case(b"expect") => {
                // RFC 9110 §10.1.1: "A server that receives an Expect field
                // value containing a member other than 100-continue MAY
                // respond with a 417 (Expectation Failed)". We do, like h2o.
                // An empty list expects nothing, so it is no failure.
                for member in list(h.value) {
                    if !member.eq_ignore_ascii_case(b"100-continue") {
                        return Err(HttpError::expectation("unsupported expectation"));
                    }
                    expect_continue = true;
                }
            }
            12 if content_type.is_none() && name.eq_ignore_ascii_case(b"content-type") => {
                content_type = Some(h.value);
            }
            _ => {}
        }
    }

    // RFC 9112 §3.2: "A server MUST respond with a 400 (Bad Request) status
    // code to any HTTP/1.1 request message that lacks a Host header field
    // and to any request message that contains more than one Host header
    // field line or a Host header field with an invalid field value."
    if hosts > 1 || (hosts == 0 && minor == 1) {
        return Err(HttpError::bad_request("missing or duplicate Host"));
    }

    let body = match (te, length) {
        // RFC 9112 §6.1: a message with both "ought to be handled as an
        // error"; we take the strict choice (400 + close) like nginx.
        (Some(_), Some(_)) => {
            return Err(HttpError::bad_request(
                "Content-Length with Transfer-Encoding",
            ))
        }
        // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding must be
        // treated "as if the framing is faulty".
        (Some(_), None) if minor == 0 => {
            return Err(HttpError::bad_request("Transfer-Encoding in HTTP/1.0"))
        }
        (Some(value), None) => transfer_coding(value)?,
        (None, Some(n)) if n > limits.max_body => {
            return Err(HttpError::too_large("Content-Length over limit"))
        }
        (None, Some(n)) => BodyKind::Length(n),
        // RFC 9112 §6.3 rule 7: a request with neither has no body.
        (None, None) => BodyKind::None,
    };

    // RFC 9112 §9.3: 1.1 persists unless "close"; 1.0 only with keep-alive.
    let keep_alive = !close && (minor == 1 || keep_alive_token);
    // RFC 9110 §10.1.1: a 100-continue in HTTP/1.0 "MUST" be ignored, and
    // one without content has nothing to wait for.
    let has_body = !matches!(body, BodyKind::None | BodyKind::Length(0));
    Ok(Decision {
        body,
        keep_alive,
        expect_continue: expect_continue && minor == 1 && has_body,
        content_type,
    })
}

/// RFC 9110 §8.6: `Content-Length = 1*DIGIT`. No sign, no hex, no spaces
/// inside, no list, and no silent wrap-around on overflow. Stricter than
/// the grammar, leading zeros (`010`) are refused too: a hop
/// that reads them as octal would frame the body differently.
fn parse_length(value: &[u8]) -> Result<u64, HttpError> {
    const BAD: HttpError = HttpError::bad_request("invalid Content-Length");
    if value.is_empty() || (value.len() > 1 && value[0] == b'0') {
        return Err(BAD);
    }
    let mut n: u64 = 0;
    for &b in value {
        if !b.is_ascii_digit() {
            return Err(BAD);
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(b - b'0')))
            .ok_or(BAD)?;
    }
    Ok(n)
}

/// Interprets a Transfer-Encoding value.
///
/// RFC 9112 §6.3: "If a Transfer-Encoding header field is present in a
/// request and the chunked transfer coding is not the final encoding, the
/// message body length cannot be determined reliably; the server MUST
/// respond with the 400 (Bad Request) status code and then close the
/// connection." §6.1: chunked "MUST NOT" be applied twice. §6.1 also says a
/// server receiving a coding it does not understand "SHOULD respond with
/// the 501 (Not Implemented) status code".
fn transfer_coding(value: &[u8]) -> Result<BodyKind, HttpError> {
    let mut chunked_seen = false;
    let mut chunked_last = false;
    let mut unknown = false;
    for token in value.split(|&b| b == b',').map(trim_ows) {
        // Empty elements (`,chunked`) and non-tokens (`\xa0chunked`) are
        // not guessed at: another hop might read them differently.
        if !chars::is_token(token) {
            return Err(HttpError::bad_request("malformed Transfer-Encoding"));
        }
        if token.eq_ignore_ascii_case(b"chunked") {
            if chunked_seen {
                return Err(HttpError::bad_request("chunked applied twice"));
            }
            chunked_seen = true;
            chunked_last = true;
        } else {
            unknown = true;
            chunked_last = false;
        }
    }
    if chunked_seen && !chunked_last {
        return Err(HttpError::bad_request("chunked is not the final coding"));
    }
    if unknown {
        return Err(HttpError::not_implemented("unknown transfer coding"));
    }
    Ok(BodyKind::Chunked)
}

/// Non-empty, OWS-trimmed elements of a comma-separated list.
fn list(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|t| !t.is_empty())
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}
