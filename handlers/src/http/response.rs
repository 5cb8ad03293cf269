//! [`Response`]: what a service answers, gathered in the connection's
//! reused buffers and framed by the server.

mod file;
#[cfg(feature = "h2")]
mod h2;
mod trailers;

use std::io;

use super::date::SharedDate;
use super::proto::{chars, encode_chunk, Framing, HttpError, ResponseHead};
use super::upgrade::{on_upgrade, OnUpgrade, Upgraded};
use super::wire::Wire;

/// The response to one request, filled in by a [`Service`](super::Service).
///
/// The service sets a status, adds header fields and writes body bytes;
/// the server owns the framing: it adds `Date`, `Content-Length` (or
/// `Transfer-Encoding: chunked` for a streamed body) and `Connection`, and
/// it leaves out the body for `HEAD` and for 204 and 304 responses. So a
/// service answers `HEAD` exactly like `GET`.
///
/// Nothing is sent until the service returns (the response is then written
/// together with the others of the same read), unless it calls
/// [`flush`](Self::flush) to stream a large or slow body.
///
/// The header and body buffers belong to the connection and keep their
/// capacity from one request to the next: a steady stream of responses
/// allocates nothing.
pub struct Response<'r> {
    sink: Sink<'r>,
    date: &'r SharedDate,
    pub(crate) status: u16,
    /// Encoded, validated `Name: value\r\n` lines.
    pub(crate) headers: &'r mut Vec<u8>,
    pub(crate) body: &'r mut Vec<u8>,
    pub(crate) version: u8,
    pub(crate) head_only: bool,
    /// Whether the connection is kept after this response: the server's
    /// intent before the service ran, cleared by
    /// [`close_connection`](Self::close_connection).
    pub(crate) keep_alive: bool,
    pub(crate) streaming: Option<Streaming>,
    /// The body length the service declared with
    /// [`set_content_length`](Self::set_content_length).
    declared: Option<u64>,
    /// Of a declared streamed body, the bytes not yet sent.
    left: u64,
    /// What takes the connection after a 101 ([`upgrade`](Self::upgrade)).
    pub(crate) upgrade: Option<OnUpgrade>,
    /// Trailer fields, encoded as the head's (see
    /// [`trailer`](Self::trailer)); allocated only when one is added.
    pub(crate) trailers: Vec<u8>,
}

/// Where a response goes: the HTTP/1 connection's output, or an HTTP/2
/// stream.
pub(crate) enum Sink<'r> {
    H1(&'r Wire),
    #[cfg(feature = "h2")]
    H2(&'r mut crate::http::h2::StreamOut),
}

/// How a response whose head was already sent by [`Response::flush`]
/// carries the rest of its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Streaming {
    /// Chunked (HTTP/1.1); the server ends it with the last chunk.
    Chunked,
    /// Until the connection closes (HTTP/1.0 has no chunked coding).
    UntilClose,
    /// As declared by `Content-Length`.
    Length,
    /// No body bytes go out at all (HEAD, 204, 304).
    NoBody,
}

impl<'r> Response<'r> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        wire: &'r Wire,
        date: &'r SharedDate,
        headers: &'r mut Vec<u8>,
        body: &'r mut Vec<u8>,
        version: u8,
        head_only: bool,
        keep_alive: bool,
    ) -> Self {
        headers.clear();
        body.clear();
        wire.set_head_out(false);
        Self {
            sink: Sink::H1(wire),
            date,
            status: 200,
            headers,
            body,
            version,
            head_only,
            keep_alive,
            streaming: None,
            declared: None,
            left: 0,
            upgrade: None,
            trailers: Vec::new(),
        }
    }

    /// The status so far (200 unless set).
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Sets the status code. Codes outside 200..=999 are answered as 500:
    /// interim (1xx) responses are the server's business.
    pub fn set_status(&mut self, status: u16) {
        self.status = status;
    }

    /// Adds a header field.
    ///
    /// # Errors
    ///
    /// A 500 [`HttpError`] when `name` is not a token, `value` holds CR, LF
    /// or another control byte (either would let a client-supplied value
    /// split the response), the name is one the server sets itself
    /// (`Content-Length`, `Transfer-Encoding`, `Connection`, `Keep-Alive`,
    /// `Date`; to close the connection after this response, call
    /// [`close_connection`](Self::close_connection)), or the head was
    /// already sent by [`flush`](Self::flush).
    pub fn header(&mut self, name: &str, value: &[u8]) -> Result<(), HttpError> {
        if is_framing_field(name) {
            return Err(invalid("framing header is set by the server"));
        }
        if !chars::is_token(name.as_bytes()) {
            return Err(invalid("invalid response header"));
        }
        self.field(name.as_bytes(), value)
    }

    /// Adds a field whose name is known to be a valid, non-framing one.
    fn field(&mut self, name: &[u8], value: &[u8]) -> Result<(), HttpError> {
        if self.streaming.is_some() {
            return Err(invalid("header after the response head was sent"));
        }
        if !chars::is_field_value(value) {
            return Err(invalid("invalid response header"));
        }
        self.headers.reserve(name.len() + value.len() + 4);
        self.headers.extend_from_slice(name);
        self.headers.extend_from_slice(b": ");
        self.headers.extend_from_slice(value);
        self.headers.extend_from_slice(b"\r\n");
        Ok(())
    }

    /// Makes this the connection's last response: it carries
    /// `Connection: close`, and the server closes the connection once it is
    /// sent, without reading the rest of the request body or further
    /// pipelined requests (what the client still sends is read and dropped
    /// for a short while, so that it sees the answer rather than a reset).
    /// For a service that wants a client to reconnect, say to another
    /// instance, or that cannot trust what follows on this connection.
    ///
    /// # Errors
    ///
    /// A 500 [`HttpError`] once [`flush`](Self::flush) sent the head (which
    /// announced the connection kept); the connection is then kept.
    pub fn close_connection(&mut self) -> Result<(), HttpError> {
        if self.streaming.is_some() {
            return Err(invalid("connection close asked after the head was sent"));
        }
        self.keep_alive = false;
        Ok(())
    }

    /// Declares the whole body's length, for a body streamed with
    /// [`flush`](Self::flush): its head then carries `Content-Length`
    /// instead of chunked coding, so a client can show progress, and an
    /// HTTP/1.0 client keeps the connection. The server holds the service
    /// to it: a flush that would send bytes past it fails (the excess is
    /// not sent), and a body that ends with more or fewer bytes is a
    /// service error, which closes the connection (a client then sees the
    /// body incomplete). A response sent whole (written with
    /// [`write`](Self::write), no flush) must have a body of this length
    /// too, or is answered 500; [`send`](Self::send) replaces the length
    /// with its body's. A `HEAD` response carries the length and no body,
    /// whatever the service wrote.
    ///
    /// # Errors
    ///
    /// A 500 [`HttpError`] once [`flush`](Self::flush) sent the head.
    pub fn set_content_length(&mut self, len: u64) -> Result<(), HttpError> {
        if self.streaming.is_some() {
            return Err(invalid("content length declared after the head was sent"));
        }
        self.declared = Some(len);
        Ok(())
    }

    /// Accepts the request's upgrade to `protocol`: once the service
    /// returns `Ok`, the client gets `101 Switching Protocols` with
    /// `Upgrade: protocol`, `Connection: Upgrade` and the fields the
    /// service added (a WebSocket's `Sec-WebSocket-Accept`), and `then`
    /// runs the new protocol on the connection, in its task, with the
    /// bytes read past the request's head ([`Upgraded`]). On HTTP/2 (an
    /// extended CONNECT, RFC 8441) the client gets `200` with the fields
    /// the service added instead, and `then` runs on the stream, which
    /// stays open. The connection (or stream)
    /// ends when `then`'s future does; it is counted as open until then,
    /// and dropped at the server's drain deadline like any other (watch
    /// [`percore::shutdown_signal`] to end it sooner, as the WebSocket
    /// layer does).
    ///
    /// Only for a request whose
    /// [`upgrade_protocol`](super::Request::upgrade_protocol) is `Some`;
    /// any other, or a service that returns an error, gets the usual
    /// answer (a 500 for the misuse), and `then` is dropped. The body
    /// written is dropped: a 101 has none.
    ///
    /// # Errors
    ///
    /// A 500 [`HttpError`] when `protocol` is not a valid field value or
    /// [`flush`](Self::flush) already sent a head.
    pub fn upgrade<F, Fut>(&mut self, protocol: &str, then: F) -> Result<(), HttpError>
    where
        F: FnOnce(Upgraded) -> Fut + 'static,
        Fut: std::future::Future<Output = io::Result<()>> + 'static,
    {
        // RFC 9110 §7.8: `protocol-name ["/" protocol-version]`, tokens.
        if !protocol
            .split('/')
            .take(2)
            .all(|t| chars::is_token(t.as_bytes()))
            || protocol.matches('/').count() > 1
        {
            return Err(invalid("invalid upgrade protocol"));
        }
        self.field(b"Upgrade", protocol.as_bytes())?;
        self.status = 101;
        self.upgrade = Some(on_upgrade(then));
        Ok(())
    }

    /// Appends body bytes.
    pub fn write(&mut self, bytes: &[u8]) {
        self.body.extend_from_slice(bytes);
    }

    /// The body buffer itself, for code that formats into a `Vec<u8>`.
    pub fn body_mut(&mut self) -> &mut Vec<u8> {
        self.body
    }

    /// A whole response in one call: status, optional `Content-Type`, body
    /// (replacing any body written so far and any length declared, and
    /// with a content type, any `Content-Type` field added before).
    ///
    /// # Errors
    ///
    /// As [`header`](Self::header): an invalid content type, or the head
    /// was already sent by [`flush`](Self::flush) (then nothing changes).
    pub fn send(
        &mut self,
        status: u16,
        content_type: Option<&[u8]>,
        body: &[u8],
    ) -> Result<(), HttpError> {
        self.send_with(status, content_type, |out| {
            out.extend_from_slice(body);
            Ok(())
        })
    }

    /// As [`send`](Self::send), with the body written by `write` straight
    /// into the (emptied) body buffer: no copy. When `write` fails, the
    /// body is left empty, status and fields as they were.
    pub(crate) fn send_with(
        &mut self,
        status: u16,
        content_type: Option<&[u8]>,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), HttpError>,
    ) -> Result<(), HttpError> {
        if self.streaming.is_some() {
            return Err(invalid("response replaced after its head was sent"));
        }
        if content_type.is_some_and(|ct| !chars::is_field_value(ct)) {
            return Err(invalid("invalid response header"));
        }
        self.body.clear();
        if let Err(e) = write(self.body) {
            self.body.clear();
            return Err(e);
        }
        if let Some(ct) = content_type {
            if !self.headers.is_empty() {
                remove_field(self.headers, b"Content-Type");
            }
            self.field(b"Content-Type", ct)?;
        }
        self.status = status;
        self.declared = None;
        Ok(())
    }

    /// Sends the head and the body written so far, and streams the rest:
    /// later writes go out at the next `flush` or when the service returns.
    ///
    /// The body is chunked for HTTP/1.1 clients; an HTTP/1.0 client gets it
    /// delimited by the connection's close; with a length declared by
    /// [`set_content_length`](Self::set_content_length), both get that.
    /// For `HEAD` the server sends the head alone and drops what is
    /// written: a service that generates a long body may check
    /// [`Request::method`](super::Request::method) and skip it (without a
    /// flush, declaring the length with
    /// [`set_content_length`](Self::set_content_length) if it knows it: a
    /// `HEAD` response sent whole with no body and no declared length has
    /// no `Content-Length`). Once flushed, the status and
    /// headers are fixed, and an error (from the service or the request
    /// body) can only abort the connection, which the client sees as an
    /// incomplete response: a chunked body without its last chunk, or for
    /// HTTP/1.0, whose body ends with the close, a reset connection.
    ///
    /// # Errors
    ///
    /// The send error, `TimedOut` when the client stopped reading, or
    /// `InvalidInput` for a body longer than its declared length.
    pub async fn flush(&mut self) -> io::Result<()> {
        let wire = match &self.sink {
            Sink::H1(wire) => *wire,
            #[cfg(feature = "h2")]
            Sink::H2(_) => return self.flush_h2().await,
        };
        if wire.write_failed() {
            // Nothing more reaches this client: queue nothing.
            self.body.clear();
            return wire.flush().await;
        }
        if self
            .owed()
            .is_some_and(|owed| self.body.len() as u64 > owed)
        {
            // Before the head goes out, if it has not: the service's error
            // then gets a whole error answer.
            return Err(invalid("body longer than its declared Content-Length").into());
        }
        if self.streaming.is_none() {
            let status = effective_status(self.status);
            let (framing, streaming) = if no_body_status(status) || self.head_only {
                // A HEAD response keeps the framing the GET would have.
                let framing = match self.declared {
                    _ if no_body_status(status) => Framing::Empty,
                    Some(len) => Framing::Length(len),
                    None if self.version == 1 => Framing::Chunked,
                    None => Framing::Empty,
                };
                (framing, Streaming::NoBody)
            } else if let Some(len) = self.declared {
                self.left = len;
                (Framing::Length(len), Streaming::Length)
            } else if self.version == 1 {
                (Framing::Chunked, Streaming::Chunked)
            } else {
                (Framing::Empty, Streaming::UntilClose)
            };
            let keep_alive = self.keep_alive && streaming != Streaming::UntilClose;
            let head = ResponseHead {
                keep_alive,
                version: self.version,
                ..ResponseHead::new(status, framing)
            };
            let headers = &*self.headers;
            self.date
                .with(|date| wire.with_out(|out| head.encode_raw(date, headers, out)))
                .map_err(io::Error::other)?;
            self.streaming = Some(streaming);
            wire.set_head_out(true);
        }
        self.move_body();
        wire.flush().await
    }

    /// Moves written body bytes of a streamed response into the output
    /// (a declared length's worth at most).
    pub(crate) fn move_body(&mut self) {
        let body = &mut *self.body;
        let Some(wire) = self.sink.h1() else {
            return;
        };
        match self.streaming {
            Some(Streaming::Chunked) => wire.with_out(|out| encode_chunk(out, body)),
            Some(Streaming::UntilClose) => wire.with_out(|out| out.extend_from_slice(body)),
            Some(Streaming::Length) => {
                let fits = body
                    .len()
                    .min(usize::try_from(self.left).unwrap_or(usize::MAX));
                wire.with_out(|out| out.extend_from_slice(&body[..fits]));
                self.left -= fits as u64;
            }
            Some(Streaming::NoBody) | None => {}
        }
        body.clear();
    }

    /// A service error for a body that does not match its declared
    /// length, once the service returned: a streamed one that ends short
    /// or long, or a whole one of another length.
    pub(crate) fn length_mismatch(&self) -> Option<HttpError> {
        let owed = self.owed()?;
        (self.body.len() as u64 != owed)
            .then(|| invalid("body length differs from its declared Content-Length"))
    }

    /// The body bytes a declared length still expects from what is
    /// written but not sent: all of it before the head goes out (unless
    /// the response carries no body: HEAD, 204, 304), what is left after.
    fn owed(&self) -> Option<u64> {
        match self.streaming {
            None if !self.head_only && !no_body_status(effective_status(self.status)) => {
                self.declared
            }
            Some(Streaming::Length) => Some(self.left),
            _ => None,
        }
    }

    /// Whether the whole of a streamed response went out before the
    /// exchange failed: its head, when it carries no body (HEAD, 204,
    /// 304), or its declared length sent in full. The client then has a
    /// complete response, though the connection ends after it.
    pub(crate) fn went_out_whole(&self) -> bool {
        let body_out = match self.streaming {
            Some(Streaming::NoBody) => true,
            Some(Streaming::Length) => self.left == 0,
            _ => false,
        };
        body_out && !self.sink.write_failed()
    }

    /// The `Content-Length` of a response sent whole. For `HEAD`, the
    /// length declared, else that of the body written; `None` when the
    /// service wrote none (say, it skipped generating it): the length the
    /// `GET` would have is unknown, and RFC 9110 §9.3.2 lets the field be
    /// left out rather than claim an empty body.
    pub(crate) fn whole_length(&self) -> Option<u64> {
        match self.declared {
            Some(len) if self.head_only => Some(len),
            None if self.head_only && self.body.is_empty() => None,
            _ => Some(self.body.len() as u64),
        }
    }
}

impl<'r> Sink<'r> {
    /// The HTTP/1 wire, or `None` for an HTTP/2 stream.
    #[inline(always)]
    fn h1(&self) -> Option<&'r Wire> {
        match self {
            Sink::H1(wire) => Some(wire),
            #[cfg(feature = "h2")]
            Sink::H2(_) => None,
        }
    }

    /// Whether nothing more reaches the client.
    fn write_failed(&self) -> bool {
        match self {
            Sink::H1(wire) => wire.write_failed(),
            #[cfg(feature = "h2")]
            Sink::H2(out) => out.failed(),
        }
    }
}

impl std::fmt::Debug for Response<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("body_len", &self.body.len())
            .field("streaming", &self.streaming)
            .finish_non_exhaustive()
    }
}

/// The status actually sent for `status`: 1xx and out-of-range codes are
/// a service bug, answered as 500 rather than as a broken message.
pub(crate) fn effective_status(status: u16) -> u16 {
    if (200..=999).contains(&status) {
        status
    } else {
        500
    }
}

/// RFC 9110 §15.3.5, §15.4.5: 204 and 304 responses end after the head.
pub(crate) fn no_body_status(status: u16) -> bool {
    status == 204 || status == 304
}

/// Removes every `name` line (ASCII case-insensitive) from encoded
/// `Name: value\r\n` lines. Cold: out of line, it keeps `send` small
/// enough to be inlined into the connection loop.
#[cold]
#[inline(never)]
fn remove_field(headers: &mut Vec<u8>, name: &[u8]) {
    let mut start = 0;
    while let Some(len) = headers[start..].windows(2).position(|w| w == b"\r\n") {
        let end = start + len + 2;
        let line = &headers[start..end];
        let named =
            line.get(name.len()) == Some(&b':') && line[..name.len()].eq_ignore_ascii_case(name);
        if named {
            headers.drain(start..end);
        } else {
            start = end;
        }
    }
}

fn invalid(reason: &'static str) -> HttpError {
    HttpError::new(500, reason)
}

/// The fields the server sets itself (ASCII case-insensitive).
pub(crate) fn is_framing_field(name: &str) -> bool {
    match name.len() {
        4 => name.eq_ignore_ascii_case("date"),
        10 => name.eq_ignore_ascii_case("connection") || name.eq_ignore_ascii_case("keep-alive"),
        14 => name.eq_ignore_ascii_case("content-length"),
        17 => name.eq_ignore_ascii_case("transfer-encoding"),
        _ => false,
    }
}
