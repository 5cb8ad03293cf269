//! Request-head parsing: request line and field section, with limits and
//! the framing decision, on top of httparse.

use std::mem::MaybeUninit;

use super::{fields, line, HttpError, Limits};
use line::RequestLine;

/// Storage for one parsed header field; [`parse_head`] fills only as many
/// as the request has.
pub type HeaderSlot<'b> = MaybeUninit<httparse::Header<'b>>;

/// `N` empty header slots for [`parse_head`], on the stack. Left
/// uninitialised: initialising a hundred 32-byte slots per request would
/// cost more than parsing a typical head.
pub const fn header_storage<'b, const N: usize>() -> [HeaderSlot<'b>; N] {
    [MaybeUninit::uninit(); N]
}

/// The reason of the 431 for a head with more fields than its slots.
const TOO_MANY_FIELDS: &str = "too many header fields";

/// Whether `e` refused a head for having more fields than its slots held
/// (rather than for another limit).
#[inline]
pub fn too_many_fields(e: &HttpError) -> bool {
    e.status == 431 && e.reason == TOO_MANY_FIELDS
}

/// When an incomplete head is worth parsing again.
///
/// Parsers such as httparse start from the first byte on every call, so a
/// head that arrives one byte per read would be parsed once per byte, its
/// whole length each time: quadratic work that one cheap client can force
/// (for a 38 KiB head sent a byte every 30 µs it was a quarter of the
/// server's CPU time on epoll and two fifths on io_uring). A head can
/// only end with an empty line, so a retry waits for new bytes that may
/// close one. Until then it retries only when the head has doubled since
/// the last attempt (the total work stays linear, and malformed bytes and
/// limits are still found early) or when the head is longer than any
/// complete head may be (so no more than that is ever held).
///
/// # Examples
///
/// ```
/// use percore_http1::{header_storage, max_head_len, parse_head, HeadRetry, Limits};
///
/// let limits = Limits::default();
/// let mut retry = HeadRetry::default();
/// let (mut head, mut parses) = (Vec::new(), 0);
/// for byte in b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n" {
///     head.push(*byte); // one byte per read
///     if !retry.due(&head, max_head_len(&limits)) {
///         continue;
///     }
///     parses += 1;
///     let mut storage = header_storage::<16>();
///     match parse_head(&head, &mut storage, &limits) {
///         Ok(None) => retry.tried(head.len()),
///         Ok(Some(request)) => assert_eq!(request.target, "/a"),
///         Err(e) => panic!("{e}"),
///     }
/// }
/// assert_eq!(parses, 6); // at 1, 2, 4, 8 and 16 bytes, and at the end (28)
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct HeadRetry {
    /// Length of the head at the last attempt; 0 before the first. A
    /// `u32` (heads are bounded far below 4 GiB): every connection keeps
    /// one, beside another `u32`.
    tried: u32,
}

impl HeadRetry {
    /// Whether to parse `head` (the incomplete head so far, grown since the
    /// last attempt) again; `max_len` is the longest head the limits allow.
    #[inline]
    pub fn due(&self, head: &[u8], max_len: usize) -> bool {
        let tried = self.tried as usize;
        tried == 0
            || head.len() >= tried.saturating_mul(2)
            || head.len() > max_len
            // The empty line may start up to two bytes before the new ones.
            || may_end_head(head.get(tried.saturating_sub(2)..).unwrap_or_default())
    }

    /// An attempt found the head incomplete at `len` bytes.
    #[inline]
    pub fn tried(&mut self, len: usize) {
        self.tried = u32::try_from(len).unwrap_or(u32::MAX);
    }

    /// A head was complete: the next one starts afresh.
    #[inline]
    pub fn reset(&mut self) {
        self.tried = 0;
    }
}

/// Whether `bytes` hold the end of an empty line (`\n\n` or `\n\r\n`).
fn may_end_head(bytes: &[u8]) -> bool {
    bytes.iter().enumerate().any(|(i, &b)| {
        b == b'\n'
            && match bytes.get(i + 1) {
                Some(b'\n') => true,
                Some(b'\r') => bytes.get(i + 2) == Some(&b'\n'),
                _ => false,
            }
    })
}

/// The longest request head `limits` allow: a request line, its line
/// ending, and a field section.
#[inline]
pub fn max_head_len(limits: &Limits) -> usize {
    limits
        .max_request_line
        .saturating_add(2)
        .saturating_add(limits.max_header_bytes)
}

/// How the body of a request is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No `Content-Length` and no `Transfer-Encoding`: no body at all.
    None,
    /// `Content-Length: n`, already checked against [`Limits::max_body`].
    Length(u64),
    /// `Transfer-Encoding: chunked`; decode with [`super::BodyDecoder`].
    Chunked,
}

/// A parsed and validated request head, borrowing from the input buffer
/// (`'b`) and from the caller's header storage (`'h`).
#[derive(Debug)]
pub struct RequestHead<'h, 'b> {
    /// Method token, e.g. `GET`; case-sensitive (RFC 9110 §9.1).
    pub method: &'b str,
    /// Request target as sent (origin-form, absolute-form, `*` or
    /// authority), query included; [`path`](Self::path) is its path alone.
    pub target: &'b str,
    /// Minor version: `0` for HTTP/1.0, `1` for HTTP/1.1.
    pub version: u8,
    /// Bytes of the head, including empty lines before it and the blank
    /// line after it. The body, or the next pipelined request, starts here.
    pub head_len: usize,
    /// How the body is framed.
    pub body: BodyKind,
    /// Whether the connection may serve another request after this one.
    /// The service layer may still decide to close (request cap, shutdown).
    pub keep_alive: bool,
    /// The client sent `Expect: 100-continue` on an HTTP/1.1 request with a
    /// body and waits for [`super::CONTINUE_100`] before sending it.
    pub expect_continue: bool,
    /// The first `Content-Type` value, if any.
    pub content_type: Option<&'b [u8]>,
    /// All header fields in order, names as sent.
    pub headers: &'h [httparse::Header<'b>],
}

impl<'b> RequestHead<'_, 'b> {
    /// The value of the first field named `name` (ASCII case-insensitive).
    #[inline]
    pub fn header(&self, name: &str) -> Option<&'b [u8]> {
        self.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    }

    /// The target's path, e.g. `/search` for `/search?q=1` and for
    /// `http://example.com/search?q=1` (`/` when the absolute form has
    /// none), as sent: not percent-decoded. `*` for `OPTIONS *`, and an
    /// authority-form target (`CONNECT host:port`) whole.
    #[inline]
    pub fn path(&self) -> &'b str {
        let target = self.target;
        let path = if target.starts_with('/') {
            target
        } else if let Some(after_scheme) = absolute_form(target) {
            match after_scheme.find(['/', '?', '#']) {
                Some(i) if after_scheme.as_bytes()[i] == b'/' => &after_scheme[i..],
                _ => return "/",
            }
        } else {
            return target;
        };
        match query_start(path.as_bytes()) {
            Some(end) => path.get(..end).unwrap_or(path),
            None => path,
        }
    }

    /// The target's query, without its `?` (`q=1` for `/search?q=1`), as
    /// sent: not percent-decoded. `None` when the target has no `?`.
    #[inline]
    pub fn query(&self) -> Option<&'b str> {
        let (_, query) = self.target.split_once('?')?;
        Some(query.split('#').next().unwrap_or(query))
    }
}

/// Where the query (`?`) or fragment (`#`) of a target starts, eight bytes
/// at a time: a router asks on every request, and a byte loop (or
/// `split(['?', '#'])`) cost 200 instructions on a 17-byte path, this 50.
fn query_start(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    // A zero byte in `v` sets its high bit here (and maybe, above a true
    // zero, others: only whether there is one counts).
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let mut chunks = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let word = u64::from_ne_bytes(chunk.try_into().unwrap_or([0; 8]));
        if has_zero(word ^ (ONES * u64::from(b'?'))) | has_zero(word ^ (ONES * u64::from(b'#')))
            != 0
        {
            break;
        }
        at += 8;
    }
    bytes[at..]
        .iter()
        .position(|&b| b == b'?' || b == b'#')
        .map(|i| at + i)
}

/// What follows `scheme://` in an `http` or `https` absolute-form target
/// (the scheme is case-insensitive, RFC 9110 §4.2.3).
fn absolute_form(target: &str) -> Option<&str> {
    let (scheme, rest) = target.split_once("://")?;
    (scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")).then_some(rest)
}

/// Parses the request head at the start of `buf`.
///
/// Returns `Ok(None)` when the head is incomplete: append more bytes and
/// call again with the whole buffer. Limits are enforced on partial input
/// too, so a head that can only grow past a limit fails now, with the same
/// status it would get when complete (a 64 KiB request line without CRLF is
/// 414, not 431). `headers` is the field storage; at most
/// [`Limits::max_headers`] of it are used, and [`header_storage`]`::<100>()`
/// on the stack avoids any allocation.
///
/// Bare LF line endings are accepted in the head (RFC 9112 §2.2: "a
/// recipient MAY recognize a single LF as a line terminator"). A request
/// target with a raw byte from 0x80 up is refused with 400 (the target is
/// ASCII, RFC 9112 §3.2; percent-encode the rest), and an empty `Expect`
/// expects nothing (RFC 9110 §10.1.1) where any other expectation than
/// `100-continue` is 417.
///
/// What request smuggling exploits (RFC 9112 §11.2) is refused, never
/// guessed at: `Content-Length` with `Transfer-Encoding`, duplicate or
/// malformed lengths, obsolete line folding and a bare CR. A bad chunk
/// size is refused by [`BodyDecoder`](super::BodyDecoder).
///
/// # Errors
///
/// An [`HttpError`] with the status to answer; the connection must close.
pub fn parse_head<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut [HeaderSlot<'b>],
    limits: &Limits,
) -> Result<Option<RequestHead<'h, 'b>>, HttpError> {
    let cap = headers.len().min(limits.max_headers);
    // The slots are lent twice on the path of a higher minor version, the
    // first loan dead by then; the borrow checker cannot see it die, as
    // the other path returns it.
    let slots: *mut [HeaderSlot<'b>] = &mut headers[..cap];
    let mut req = httparse::Request::new(&mut []);
    // SAFETY: `slots` points into `headers`, borrowed by us for 'h, and
    // this is the only reference made from it on every path but the one
    // below.
    let parsed = req.parse_with_uninit_headers(buf, unsafe { &mut *slots });
    if let Err(httparse::Error::Version) = parsed {
        let request_line = line::request_line(buf, limits)?;
        if let Some((method, target)) = line::higher_minor(buf, request_line) {
            // SAFETY: `req`, which holds the first reference, is not used
            // again on this path (and has no `Drop`): one loan at a time.
            let slots = unsafe { &mut *slots };
            return parse_as_1_1(buf, method, target, request_line, slots, limits);
        }
    }
    let head_len = match parsed {
        // A complete head no longer than the smallest line or section
        // limit cannot break any of them: the common case skips the scans.
        Ok(httparse::Status::Complete(n)) if n <= shortest_limit(limits) => n,
        _ => match check_limits(buf, parsed, limits)? {
            Some(n) => n,
            None => return Ok(None),
        },
    };

    let (Some(method), Some(path), Some(version)) = (req.method, req.path, req.version) else {
        return Err(HttpError::bad_request("incomplete request line"));
    };
    // RFC 9112 §3.2 and RFC 3986: a request-target is ASCII; httparse lets
    // raw bytes from 0x80 up through, which another hop may read otherwise.
    // A byte loop: on the usual short target, `str::is_ascii` cost 10
    // instructions per request more than it.
    if !path.bytes().all(|b| b < 0x80) {
        return Err(non_ascii_target());
    }
    let headers: &'h [httparse::Header<'b>] = req.headers;
    let decision = fields::decide(headers, version, limits)?;
    Ok(Some(RequestHead {
        method,
        target: path,
        version,
        head_len,
        body: decision.body,
        keep_alive: decision.keep_alive,
        expect_continue: decision.expect_continue,
        content_type: decision.content_type,
        headers,
    }))
}

/// The head of an `HTTP/1.x` request (`x` above 1) whose request line
/// [`line::higher_minor`] accepted: its fields parsed as httparse parses
/// any, the request then served as HTTP/1.1.
#[cold]
fn parse_as_1_1<'h, 'b>(
    buf: &'b [u8],
    method: &'b str,
    target: &'b str,
    request_line: RequestLine,
    slots: &'h mut [HeaderSlot<'b>],
    limits: &Limits,
) -> Result<Option<RequestHead<'h, 'b>>, HttpError> {
    let RequestLine::Done { next, .. } = request_line else {
        return Ok(None);
    };
    let fields = &buf[next..];
    let (len, headers) = match httparse::parse_headers(fields, initialised(slots)) {
        Ok(httparse::Status::Complete(done)) => done,
        Ok(httparse::Status::Partial) => {
            line::check_fields(fields, limits)?;
            return Ok(None);
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Err(HttpError::fields_too_large(TOO_MANY_FIELDS))
        }
        Err(_) => return Err(HttpError::bad_request("malformed header field")),
    };
    line::check_fields(&fields[..len], limits)?;
    let headers: &'h [httparse::Header<'b>] = headers;
    let decision = fields::decide(headers, 1, limits)?;
    Ok(Some(RequestHead {
        method,
        target,
        version: 1,
        head_len: next + len,
        body: decision.body,
        keep_alive: decision.keep_alive,
        expect_continue: decision.expect_continue,
        content_type: decision.content_type,
        headers,
    }))
}

/// The slots, each set to an empty field, as `httparse::parse_headers`
/// takes them.
fn initialised<'s, 'b>(slots: &'s mut [HeaderSlot<'b>]) -> &'s mut [httparse::Header<'b>] {
    for slot in slots.iter_mut() {
        slot.write(httparse::EMPTY_HEADER);
    }
    let slots: *mut [HeaderSlot<'b>] = slots;
    // SAFETY: every element was initialised just above, and
    // `MaybeUninit<T>` has the size, alignment and layout of `T`, so the
    // slice is a valid `[Header]` of the same length, borrowed as long.
    unsafe { &mut *(slots as *mut [httparse::Header<'b>]) }
}

#[cold]
fn non_ascii_target() -> HttpError {
    HttpError::bad_request("non-ASCII byte in the request target")
}

/// The head length below which no size limit can be exceeded.
fn shortest_limit(limits: &Limits) -> usize {
    limits
        .max_request_line
        .min(limits.max_field_line)
        .min(limits.max_header_bytes)
}

/// Applies the size limits and classifies httparse's verdict on `buf`:
/// the head length when complete and within limits, `None` when more bytes
/// are needed.
fn check_limits(
    buf: &[u8],
    parsed: httparse::Result<usize>,
    limits: &Limits,
) -> Result<Option<usize>, HttpError> {
    // The 414 check comes first: it must win over anything httparse would
    // say about a line that is too long to look at.
    let request_line = line::request_line(buf, limits)?;
    let fields_start = match request_line {
        RequestLine::Done { next, .. } => Some(next),
        RequestLine::Open => None,
    };
    let head_len = match parsed {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            if let Some(start) = fields_start {
                line::check_fields(&buf[start..], limits)?;
            }
            return Ok(None);
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Err(HttpError::fields_too_large(TOO_MANY_FIELDS))
        }
        Err(httparse::Error::Version) => {
            return line::classify_version(buf, request_line).map(|_| None)
        }
        Err(httparse::Error::Token) => {
            return Err(HttpError::bad_request("malformed request line"))
        }
        Err(_) => return Err(HttpError::bad_request("malformed header field")),
    };
    // httparse only completes after the request line's LF, so the field
    // section is `start..head_len`; `get` keeps a disagreement a 400.
    let fields = fields_start
        .and_then(|start| buf.get(start..head_len))
        .ok_or(HttpError::bad_request("malformed request line"))?;
    line::check_fields(fields, limits)?;
    Ok(Some(head_len))
}

#[cfg(test)]
mod tests {
    use super::query_start;

    #[test]
    fn query_start_finds_the_first_question_mark_or_hash() {
        let slow = |b: &[u8]| b.iter().position(|&c| c == b'?' || c == b'#');
        let mut cases: Vec<Vec<u8>> = vec![b"".to_vec(), b"?".to_vec(), b"/a/b/c".to_vec()];
        for len in 0..40 {
            for at in 0..len {
                for mark in [b'?', b'#'] {
                    let mut v = vec![b'a'; len];
                    v[at] = mark;
                    // Bytes near the marks in value, to catch a false match.
                    v.iter_mut().skip(at + 1).step_by(3).for_each(|b| *b = 0xbf);
                    cases.push(v);
                }
            }
            cases.push(vec![b'>'; len]);
            cases.push(vec![0xff; len]);
        }
        for case in cases {
            assert_eq!(query_start(&case), slow(&case), "{case:?}");
        }
    }
}
