//! [`StreamOut`]: the sending half of an HTTP/2 stream, where its
//! [`Response`](crate::http::Response) goes: HEADERS encoded straight
//! into the connection's output, then DATA as the flow-control windows
//! allow.

use std::future::poll_fn;
use std::io;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use percore_http2::frame::{ErrorCode, StreamId};
use percore_http2::hpack::Block;

use super::shared::Shared;
use crate::http::date::SharedDate;

/// A stream being served: the connection forgets it (and resets it, if
/// it is still open) when this is dropped.
pub(super) struct StreamRef {
    pub(super) shared: Rc<Shared>,
    pub(super) id: StreamId,
}

impl StreamRef {
    /// Sends `RST_STREAM` with `code`: the stream is given up.
    pub(super) fn reset(&self, code: ErrorCode) {
        self.shared.proto.borrow_mut().reset(self.id, code);
    }
}

impl Drop for StreamRef {
    fn drop(&mut self) {
        self.shared.close(self.id);
    }
}

/// The sending half of one stream: its HEADERS once, then DATA as the
/// flow-control windows allow.
pub(crate) struct StreamOut {
    pub(super) stream: StreamRef,
    head_sent: bool,
    failed: bool,
    /// How long a send may wait for the client's windows to open (the
    /// layer's `write_timeout`): a client that never reads, and so never
    /// opens them (FAULTS L4), holds its stream no longer.
    write_timeout: Duration,
}

impl StreamOut {
    pub(super) fn new(stream: StreamRef, write_timeout: Duration) -> Self {
        Self {
            stream,
            head_sent: false,
            failed: false,
            write_timeout,
        }
    }

    /// Whether the client reset the stream or the connection broke.
    pub(crate) fn failed(&self) -> bool {
        self.failed || self.stream.shared.failed(self.stream.id)
    }

    fn gone(&mut self) -> io::Error {
        self.failed = true;
        io::Error::new(io::ErrorKind::BrokenPipe, "HTTP/2 stream closed")
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
        if self.failed() {
            return Err(self.gone());
        }
        let sent =
            self.stream
                .shared
                .proto
                .borrow_mut()
                .send_headers(self.stream.id, end, |block| {
                    block.status(status);
                    append_fields(block, fields);
                    if let Some(len) = length {
                        let mut digits = [0; 20];
                        let len = percore_http1::decimal(len, &mut digits);
                        block.field(b"content-length", len, false);
                    }
                    date.with(|d| block.field(b"date", d.as_bytes(), false));
                });
        if sent.is_err() {
            return Err(self.gone());
        }
        self.head_sent = true;
        Ok(())
    }

    /// Sends `data` as the client's windows allow, then ends the stream
    /// if `end`.
    pub(crate) async fn send_data(&mut self, data: &[u8], end: bool) -> io::Result<()> {
        if !self.head_sent {
            return Err(io::Error::other("response body before its head"));
        }
        if data.is_empty() && !end {
            return Ok(());
        }
        let mut rest = data;
        loop {
            let (shared, id) = (&*self.stream.shared, self.stream.id);
            let wait = poll_fn(|cx| poll_send(shared, id, &mut rest, end, cx));
            match percore::time::timeout(self.write_timeout, wait).await {
                Ok(Ok(true)) => return Ok(()),
                Ok(Ok(false)) => {}
                Ok(Err(())) => return Err(self.gone()),
                Err(_) => {
                    // The stream is given up: CANCEL tells the client so.
                    shared.proto.borrow_mut().reset(id, ErrorCode::Cancel);
                    self.failed = true;
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client's HTTP/2 window stayed closed past the write timeout",
                    ));
                }
            }
        }
    }

    /// Ends the stream with the trailer fields `fields` (`Name: value\r\n`
    /// lines, already checked), after the body sent so far.
    pub(crate) fn send_trailers(&mut self, fields: &[u8]) -> io::Result<()> {
        if !self.head_sent {
            return Err(io::Error::other("trailers before the response head"));
        }
        let sent =
            self.stream
                .shared
                .proto
                .borrow_mut()
                .send_headers(self.stream.id, true, |block| append_fields(block, fields));
        sent.map_err(|_| self.gone())
    }

    /// Resets the stream: its response cannot be completed.
    pub(crate) fn reset(&mut self) {
        self.stream.reset(ErrorCode::InternalError);
    }
}

/// Sends what the windows and the output bound let go of `rest`:
/// `Ready(Ok(true))` once all of it is sent (and the stream ended, with
/// `end`), `Ready(Ok(false))` after some went out, `Pending` while
/// nothing can, `Ready(Err)` when the stream is gone.
pub(super) fn poll_send(
    shared: &Shared,
    id: StreamId,
    rest: &mut &[u8],
    end: bool,
    cx: &mut Context<'_>,
) -> Poll<Result<bool, ()>> {
    if shared.failed(id) {
        return Poll::Ready(Err(()));
    }
    if shared.output_full(cx) {
        return Poll::Pending;
    }
    let sent = shared.proto.borrow_mut().send_data(id, rest, end);
    match sent {
        Ok(n) if n == rest.len() => {
            *rest = &[];
            Poll::Ready(Ok(true))
        }
        Ok(0) => {
            shared.wait_capacity(id, cx);
            Poll::Pending
        }
        Ok(n) => {
            *rest = &rest[n..];
            Poll::Ready(Ok(false))
        }
        Err(_) => Poll::Ready(Err(())),
    }
}

/// Appends the `Name: value\r\n` lines of `fields` (already checked) to
/// `block`, names lowercased (RFC 9113 §8.2.1), leaving out what HTTP/2
/// has no place for.
fn append_fields(block: &mut Block<'_>, fields: &[u8]) {
    let mut lower = [0u8; 64];
    for line in fields.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        let value = value.strip_prefix(b" ").unwrap_or(value);
        if name.is_empty() {
            continue;
        }
        let owned;
        let name = if name.len() <= lower.len() {
            let lower = &mut lower[..name.len()];
            lower.copy_from_slice(name);
            lower.make_ascii_lowercase();
            &*lower
        } else {
            owned = name.to_ascii_lowercase();
            &owned[..]
        };
        // HTTP/2 has no connection-specific fields (RFC 9113 §8.2.2);
        // the server's own framing ones are refused as they are added.
        if matches!(
            name,
            b"connection"
                | b"keep-alive"
                | b"transfer-encoding"
                | b"upgrade"
                | b"proxy-connection"
                | b"te"
        ) {
            continue;
        }
        block.field(name, value, false);
    }
}

#[cfg(test)]
mod tests {
    use percore_http2::hpack::{Decoder, Encoder};

    #[test]
    fn fields_are_lowercased_and_connection_ones_left_out() {
        let long = format!("X-{}: v\r\n", "N".repeat(80));
        let fields =
            format!("Content-Type: text/plain\r\nConnection: close\r\nTE: trailers\r\n{long}");
        let mut out = Vec::new();
        super::append_fields(&mut Encoder::new().block(&mut out), fields.as_bytes());
        let mut seen = Vec::new();
        Decoder::new()
            .decode(&out, |n, v, _| seen.push((n.to_vec(), v.to_vec())))
            .unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0], (b"content-type".to_vec(), b"text/plain".to_vec()));
        assert_eq!(seen[1].0, format!("x-{}", "n".repeat(80)).into_bytes());
    }
}
