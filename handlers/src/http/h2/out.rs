//! [`StreamOut`]: the sending half of an HTTP/2 stream, where its
//! [`Response`](crate::http::Response) goes.

use std::cell::RefCell;
use std::future::poll_fn;
use std::io;
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::SendStream;
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH};

use crate::http::date::SharedDate;

/// The sending half of one stream: its HEADERS once, then DATA as the
/// flow-control windows allow.
pub(crate) struct StreamOut {
    respond: SendResponse<Bytes>,
    send: Option<SendStream<Bytes>>,
    failed: bool,
    /// How long a send may wait for the client's windows to open (the
    /// layer's `write_timeout`): a client that never reads, and so never
    /// opens them (FAULTS L4), holds its stream no longer.
    write_timeout: Duration,
}

impl StreamOut {
    pub(super) fn new(respond: SendResponse<Bytes>, write_timeout: Duration) -> Self {
        Self {
            respond,
            send: None,
            failed: false,
            write_timeout,
        }
    }

    /// The stream's sending half, once the head went out.
    pub(super) fn into_send(self) -> Option<SendStream<Bytes>> {
        self.send
    }

    /// Whether the client reset the stream or the connection broke.
    pub(crate) fn failed(&self) -> bool {
        self.failed
    }

    /// Sends the head: `status`, the service's fields (encoded
    /// `Name: value\r\n` lines, already checked), `Date`, and the length
    /// when known. `end` ends the stream with it (no body).
    pub(crate) fn send_head(
        &mut self,
        status: u16,
        fields: &[u8],
        length: Option<u64>,
        date: &SharedDate,
        end: bool,
    ) -> io::Result<()> {
        let mut response = http::Response::new(());
        *response.status_mut() =
            http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
        append_fields(response.headers_mut(), fields);
        let headers = response.headers_mut();
        REPEATED.with(|repeated| {
            let mut repeated = repeated.borrow_mut();
            if let Some(len) = length {
                headers.insert(CONTENT_LENGTH, repeated.length(len));
            }
            if let Some(value) = date.with(|d| repeated.date(d.as_bytes())) {
                headers.insert(http::header::DATE, value);
            }
        });
        match self.respond.send_response(response, end) {
            Ok(send) => {
                self.send = Some(send);
                Ok(())
            }
            Err(e) => {
                self.failed = true;
                Err(io::Error::new(io::ErrorKind::BrokenPipe, e))
            }
        }
    }

    /// Sends `data` as the client's windows allow, then ends the stream
    /// if `end`.
    pub(crate) async fn send_data(&mut self, mut data: Bytes, end: bool) -> io::Result<()> {
        let Some(send) = self.send.as_mut() else {
            return Err(io::Error::other("response body before its head"));
        };
        let gone = |failed: &mut bool, e: h2::Error| {
            *failed = true;
            io::Error::new(io::ErrorKind::BrokenPipe, e)
        };
        if data.is_empty() {
            if end {
                send.send_data(data, true)
                    .map_err(|e| gone(&mut self.failed, e))?;
            }
            return Ok(());
        }
        while !data.is_empty() {
            send.reserve_capacity(data.len());
            let wait =
                percore::time::timeout(self.write_timeout, poll_fn(|cx| send.poll_capacity(cx)));
            let Ok(granted) = wait.await else {
                // The stream is given up: CANCEL tells the client so.
                send.send_reset(h2::Reason::CANCEL);
                self.failed = true;
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client's HTTP/2 window stayed closed past the write timeout",
                ));
            };
            let granted = match granted {
                Some(Ok(n)) => n,
                Some(Err(e)) => return Err(gone(&mut self.failed, e)),
                None => {
                    self.failed = true;
                    return Err(io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        "HTTP/2 stream closed",
                    ));
                }
            };
            let n = granted.min(data.len());
            if n == 0 {
                continue;
            }
            let piece = data.split_to(n);
            send.send_data(piece, end && data.is_empty())
                .map_err(|e| gone(&mut self.failed, e))?;
        }
        Ok(())
    }

    /// Ends the stream with the trailer fields `fields` (`Name: value\r\n`
    /// lines, already checked), after the body sent so far.
    pub(crate) fn send_trailers(&mut self, fields: &[u8]) -> io::Result<()> {
        let Some(send) = self.send.as_mut() else {
            return Err(io::Error::other("trailers before the response head"));
        };
        let mut trailers = http::HeaderMap::new();
        append_fields(&mut trailers, fields);
        send.send_trailers(trailers).map_err(|e| {
            self.failed = true;
            io::Error::new(io::ErrorKind::BrokenPipe, e)
        })
    }

    /// Resets the stream: its response cannot be completed.
    pub(crate) fn reset(&mut self) {
        match self.send.as_mut() {
            Some(send) => send.send_reset(h2::Reason::INTERNAL_ERROR),
            None => self.respond.send_reset(h2::Reason::INTERNAL_ERROR),
        }
    }
}

/// The header values a core's answers repeat: `Date`, the same for a
/// second, and the last `Content-Length`. Each is made once and shared (a
/// clone counts a reference) rather than copied into a new allocation
/// and checked again for every answer.
#[derive(Default)]
struct Repeated {
    date: Option<HeaderValue>,
    length: Option<(u64, HeaderValue)>,
}

impl Repeated {
    /// The `Date` value for the formatted date `now`.
    fn date(&mut self, now: &[u8]) -> Option<HeaderValue> {
        match &self.date {
            Some(value) if value.as_bytes() == now => Some(value.clone()),
            _ => {
                let value = HeaderValue::from_bytes(now).ok()?;
                self.date = Some(value.clone());
                Some(value)
            }
        }
    }

    /// The `Content-Length` value for `len`.
    fn length(&mut self, len: u64) -> HeaderValue {
        match &self.length {
            Some((n, value)) if *n == len => value.clone(),
            _ => {
                let value = HeaderValue::from(len);
                self.length = Some((len, value.clone()));
                value
            }
        }
    }
}

thread_local! {
    /// This core's repeated values.
    static REPEATED: RefCell<Repeated> = RefCell::default();
}

/// Appends the `Name: value\r\n` lines of `fields` (already checked) to
/// `headers`, leaving out what HTTP/2 has no place for.
fn append_fields(headers: &mut http::HeaderMap, fields: &[u8]) {
    for line in fields.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        let value = value.strip_prefix(b" ").unwrap_or(value);
        // HTTP/2 has no connection-specific fields (RFC 9113 §8.2.2);
        // the server's own framing ones are refused as they are added.
        let Ok(name) = HeaderName::from_bytes(name) else {
            continue;
        };
        if matches!(name.as_str(), "upgrade" | "proxy-connection" | "te") {
            continue;
        }
        if let Ok(value) = HeaderValue::from_bytes(value) {
            headers.append(name, value);
        }
    }
}
