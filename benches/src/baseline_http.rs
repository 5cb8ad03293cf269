//! The HTTP work of the tokio baseline servers: what `http_echo` does for
//! each request, written the way a careful tokio server would, so that the
//! comparison is of runtimes doing the same work.
//!
//! Per request: the head is parsed with httparse (up to 32 fields);
//! `GET`/`HEAD` answer 200 with the 20-byte JSON body and
//! `Content-Type: application/json`; `POST`/`PUT` echo a `Content-Length`
//! body with the request's content type; other methods get 405 with
//! `Allow`. Every response carries a `Date` line formatted at most once a
//! second per thread. A malformed head, a chunked body or a bad
//! `Content-Length` is answered 400 and ends the connection. What it does
//! not do: HTTP/1.0 keep-alive rules, `Connection: close`, `Expect`,
//! limits and timeouts (the percore server has them all; they cost it
//! little per request, but more than nothing).

use std::io::Write as _;
use std::mem::MaybeUninit;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::http::BODY;

/// Most header fields of a request.
const MAX_FIELDS: usize = 32;

/// What [`respond`] made of the start of its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// One request was answered; it took this many bytes.
    Answered(usize),
    /// The request is incomplete: read more.
    Partial,
    /// The input is not a request this server serves: a 400 was written and
    /// the connection must close.
    Bad,
}

/// The `Date: ...\r\n` line of the responses, refreshed at most once a
/// second.
#[derive(Debug)]
pub struct DateLine {
    secs: u64,
    line: [u8; 37],
}

impl Default for DateLine {
    fn default() -> Self {
        let mut d = DateLine {
            secs: u64::MAX,
            line: [0; 37],
        };
        d.refresh();
        d
    }
}

impl DateLine {
    /// Reformats the line if the second changed.
    pub fn refresh(&mut self) {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if secs == self.secs {
            return;
        }
        self.secs = secs;
        const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        let days = secs / 86_400;
        let (y, m, d) = crate::sys::civil_from_days(days as i64);
        let rem = secs % 86_400;
        // Writing into the fixed array cannot fail for years 0..=9999.
        let _ = write!(
            &mut self.line[..],
            "Date: {}, {d:02} {} {y:04} {:02}:{:02}:{:02} GMT\r\n",
            DAYS[(days % 7) as usize],
            MONTHS[(m - 1) as usize],
            rem / 3600,
            rem / 60 % 60,
            rem % 60
        );
    }

    /// The current line.
    pub fn line(&self) -> &[u8] {
        &self.line
    }
}

/// Answers the request at the start of `input` into `out`.
pub fn respond(input: &[u8], out: &mut Vec<u8>, date: &DateLine) -> Parsed {
    let mut slots = [MaybeUninit::<httparse::Header<'_>>::uninit(); MAX_FIELDS];
    let mut req = httparse::Request::new(&mut []);
    let head = match req.parse_with_uninit_headers(input, &mut slots) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(_) => return bad(out, date),
    };
    let mut length = 0usize;
    let mut content_type: &[u8] = b"application/octet-stream";
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            match std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.parse().ok())
            {
                Some(n) => length = n,
                None => return bad(out, date),
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return bad(out, date);
        } else if h.name.eq_ignore_ascii_case("content-type") {
            content_type = h.value;
        }
    }
    let Some(end) = head.checked_add(length) else {
        return bad(out, date);
    };
    if input.len() < end {
        return Parsed::Partial;
    }
    match req.method.unwrap_or_default() {
        m @ ("GET" | "HEAD") => {
            head_lines(out, b"200 OK", date, BODY.len(), b"application/json");
            if m == "GET" {
                out.extend_from_slice(BODY);
            }
        }
        "POST" | "PUT" => {
            head_lines(out, b"200 OK", date, length, content_type);
            out.extend_from_slice(&input[head..end]);
        }
        _ => {
            out.extend_from_slice(b"HTTP/1.1 405 Method Not Allowed\r\n");
            out.extend_from_slice(date.line());
            out.extend_from_slice(b"Allow: GET, HEAD, POST, PUT\r\nContent-Length: 0\r\n\r\n");
        }
    }
    Parsed::Answered(end)
}

fn bad(out: &mut Vec<u8>, date: &DateLine) -> Parsed {
    out.extend_from_slice(b"HTTP/1.1 400 Bad Request\r\n");
    out.extend_from_slice(date.line());
    out.extend_from_slice(b"Connection: close\r\nContent-Length: 0\r\n\r\n");
    Parsed::Bad
}

fn head_lines(out: &mut Vec<u8>, status: &[u8], date: &DateLine, len: usize, ctype: &[u8]) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(date.line());
    out.extend_from_slice(b"Content-Length: ");
    write_decimal(out, len as u64);
    out.extend_from_slice(b"\r\nContent-Type: ");
    out.extend_from_slice(ctype);
    out.extend_from_slice(b"\r\n\r\n");
}

/// Appends `n` in decimal.
pub(crate) fn write_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{frame_response, REQUEST};

    fn answer(input: &[u8]) -> (Parsed, String) {
        let mut out = Vec::new();
        let p = respond(input, &mut out, &DateLine::default());
        (p, String::from_utf8(out).expect("ASCII"))
    }

    #[test]
    fn get_head_post_and_others() {
        let (p, out) = answer(REQUEST);
        assert_eq!(p, Parsed::Answered(REQUEST.len()));
        assert!(out.starts_with("HTTP/1.1 200 OK\r\nDate: "), "{out}");
        assert!(out.ends_with("Content-Type: application/json\r\n\r\n{\"message\":\"Hello!\"}"));
        assert_eq!(frame_response(out.as_bytes()), Ok(Some(out.len())));
        let (_, out) = answer(b"HEAD / HTTP/1.1\r\n\r\n");
        assert!(out.ends_with("Content-Length: 20\r\nContent-Type: application/json\r\n\r\n"));
        let post =
            b"POST /x HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(answer(&post[..post.len() - 1]).0, Parsed::Partial);
        let (p, out) = answer(post);
        assert_eq!(p, Parsed::Answered(post.len()));
        assert!(
            out.ends_with("Content-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello"),
            "{out}"
        );
        let (_, out) = answer(b"DELETE / HTTP/1.1\r\n\r\n");
        assert!(
            out.starts_with("HTTP/1.1 405 ") && out.contains("Allow: "),
            "{out}"
        );
    }

    #[test]
    fn bad_requests_close() {
        for bad in [
            &b"GARBAGE\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        ] {
            let (p, out) = answer(bad);
            assert_eq!(p, Parsed::Bad, "{out}");
            assert!(out.starts_with("HTTP/1.1 400 "), "{out}");
        }
    }

    #[test]
    fn date_line_is_an_imf_fixdate() {
        let d = DateLine::default();
        let line = std::str::from_utf8(d.line()).expect("ASCII");
        // "Date: Mon, 30 Nov 2026 12:00:00 GMT\r\n"
        assert_eq!(line.len(), 37, "{line:?}");
        assert!(
            line.starts_with("Date: ") && line.ends_with(" GMT\r\n"),
            "{line:?}"
        );
        assert_eq!(&line[9..11], ", ", "{line:?}");
    }
}
