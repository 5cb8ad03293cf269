//! One HTTP/2 stream: its request made a [`Request`] for the service, its
//! [`Response`] sent as frames, and the body readers and writers behind
//! them ([`StreamBody`], [`StreamOut`]).

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::time::Instant;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, HOST};

use crate::http::conn::access::{self, Ending, Exchange};
use crate::http::conn::answers::service_error;
use crate::http::conn::unwind::CatchUnwind;
use crate::http::date::SharedDate;
use crate::http::layer::Layer;
use crate::http::proto::{BodyKind, Header, HttpError, RequestHead};
use crate::http::request::{failure_error, Failure, Request};
use crate::http::response::Response;
use crate::http::service::Service;
use crate::http::stats::Reason;
use crate::http::wire::after;

/// Serves the request of one stream with the layer's service.
pub(super) async fn serve<S: Service>(
    layer: &Layer<S>,
    peer: Option<SocketAddr>,
    request: http::Request<RecvStream>,
    respond: SendResponse<Bytes>,
) {
    let started = percore::time::now();
    percore::count_requests(1);
    let (parts, recv) = request.into_parts();
    let method = parts.method.as_str();
    // The origin form, as HTTP/1 has it; `*` or the authority for the
    // forms that have no path.
    let target = match parts.uri.path_and_query() {
        Some(pq) => pq.as_str(),
        None => parts.uri.authority().map_or("/", |a| a.as_str()),
    };
    let exchange = Exchange {
        method,
        target,
        started,
    };
    let mut out = StreamOut::new(respond);
    let config = &layer.config;
    let mut body = StreamBody::new(recv, config.limits.max_body, peer, config.body_timeout);
    let mut fields = Vec::with_capacity(parts.headers.len() + 1);
    // `:authority` stands for `Host` (RFC 9113 §8.3.1): services read
    // `Host` on either version.
    if !parts.headers.contains_key(HOST) {
        if let Some(authority) = parts.uri.authority() {
            fields.push(Header {
                name: "host",
                value: authority.as_str().as_bytes(),
            });
        }
    }
    fields.extend(parts.headers.iter().map(|(name, value)| Header {
        name: name.as_str(),
        value: value.as_bytes(),
    }));
    let head_only = method == "HEAD";
    let answer = Answer {
        layer,
        peer,
        exchange,
        head_only,
    };
    if fields.len() > layer.config.limits.max_headers {
        let e = HttpError::new(431, "too many header fields");
        answer.refuse(&mut out, &e).await;
        return body.drain(config.linger_timeout).await;
    }
    let length = match parts.headers.get(CONTENT_LENGTH).map(content_length) {
        None => None,
        Some(Some(n)) => Some(n),
        Some(None) => {
            let e = HttpError::new(400, "invalid Content-Length");
            answer.refuse(&mut out, &e).await;
            return body.drain(config.linger_timeout).await;
        }
    };
    let kind = match length {
        _ if body.recv.is_end_stream() => BodyKind::None,
        Some(n) => BodyKind::Length(n),
        // HTTP/2 frames the body: its length is known at its end.
        None => BodyKind::Chunked,
    };
    let head = RequestHead {
        method,
        target,
        version: 2,
        head_len: 0,
        body: kind,
        keep_alive: true,
        expect_continue: false,
        content_type: parts.headers.get(CONTENT_TYPE).map(HeaderValue::as_bytes),
        headers: &fields,
    };
    let configured = config.limits.max_body;
    let max_body = match kind {
        BodyKind::None | BodyKind::Length(0) => configured,
        _ => layer.service.body_limit(&head, configured),
    };
    if matches!(kind, BodyKind::Length(n) if n > max_body) {
        let e = HttpError::too_large("Content-Length over limit");
        answer.refuse(&mut out, &e).await;
        return body.drain(config.linger_timeout).await;
    }
    body.limit = max_body;
    let (mut res_headers, mut res_body) = (Vec::new(), Vec::new());
    let mut req = Request::new_h2(head, &mut body);
    let mut res = Response::new_h2(
        &mut out,
        &layer.date,
        &mut res_headers,
        &mut res_body,
        head_only,
    );
    let called = {
        let call = pin!(layer.service.call(&mut req, &mut res));
        CatchUnwind(call).await
    };
    let result = match called {
        Ok(Ok(())) => match res.length_mismatch() {
            Some(e) => Err(e.into()),
            None => Ok(()),
        },
        Ok(Err(e)) => Err(e),
        Err(_panic) => {
            if let Some(left_out) = layer.failures.admit(percore::time::now()) {
                tracing::error!(method, target, left_out, "HTTP/2 service panicked");
            }
            Err(HttpError::internal().into())
        }
    };
    drop(req);
    let failure = body.failure.clone();
    let failed = match (failure, result) {
        (Some(Failure::Gone), _) => {
            answer.client_left();
            return;
        }
        (Some(Failure::Refused(e)), _) => Some((e.clone(), Some(Reason::refusal(e.status)))),
        (None, Err(e)) => {
            let e = service_error(&e);
            let reason = (e.status >= 500).then_some(Reason::ServiceError);
            Some((e, reason))
        }
        (None, Ok(())) => None,
    };
    if res.client_gone() {
        // The client reset the stream or left: nothing more reaches it.
        answer.client_left();
        return;
    }
    match failed {
        None => match res.finish_h2().await {
            Ok(status) => answer.sent(status, None, Ending::Whole),
            Err(_) => answer.client_left(),
        },
        Some((e, reason)) if res.head_sent() => {
            // Only a reset tells the client its response is incomplete.
            // (`res` is done with `out` here.)
            out.reset();
            answer.sent(
                e.status,
                reason.or(Some(Reason::ServiceError)),
                Ending::Incomplete,
            );
        }
        Some((e, reason)) => {
            answer.error(&mut out, &e, reason).await;
        }
    }
    body.drain(config.linger_timeout).await;
}

/// A `Content-Length` value: decimal digits only.
fn content_length(value: &HeaderValue) -> Option<u64> {
    let bytes = value.as_bytes();
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// What a stream's answers and its count and log line need.
struct Answer<'a, S> {
    layer: &'a Layer<S>,
    peer: Option<SocketAddr>,
    exchange: Exchange<'a>,
    head_only: bool,
}

impl<S: Service> Answer<'_, S> {
    /// Answers a request the layer refused before the service saw it.
    async fn refuse(&self, out: &mut StreamOut, e: &HttpError) {
        self.error(out, e, Some(Reason::refusal(e.status))).await;
    }

    /// Answers with `e`, its body the service's
    /// [`error_body`](Service::error_body).
    async fn error(&self, out: &mut StreamOut, e: &HttpError, reason: Option<Reason>) {
        let mut body = Vec::new();
        let service = &self.layer.service;
        let content_type = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            service.error_body(e, &mut body)
        }))
        .unwrap_or_else(|_| {
            body.clear();
            crate::http::proto::error_text(e, &mut body);
            crate::http::proto::ERROR_TEXT_TYPE
        });
        let mut fields = Vec::new();
        fields.extend_from_slice(b"Content-Type: ");
        fields.extend_from_slice(content_type.as_bytes());
        fields.extend_from_slice(b"\r\n");
        let send_body = !self.head_only;
        let sent = out
            .send_head(
                e.status,
                &fields,
                Some(body.len() as u64),
                &self.layer.date,
                !send_body,
            )
            .is_ok();
        let sent = sent && (!send_body || out.send_data(Bytes::from(body), true).await.is_ok());
        if sent {
            self.sent(e.status, reason, Ending::Whole);
        } else {
            self.client_left();
        }
    }

    fn sent(&self, status: u16, reason: Option<Reason>, ending: Ending) {
        let counters = &self.layer.counters;
        match reason {
            Some(reason) => counters.answered(status, reason),
            None => counters.response(status),
        }
        let took = Instant::now().saturating_duration_since(self.exchange.started);
        counters.latency.record(took);
        if self.layer.config.access_log {
            access::log_peer(self.peer, Some(self.exchange), status, ending);
        }
    }

    /// The client reset the stream or left before its answer.
    fn client_left(&self) {
        if self.layer.config.access_log {
            let status = access::CLIENT_LEFT;
            access::log_peer(self.peer, Some(self.exchange), status, Ending::Incomplete);
        }
    }
}

/// The most of a request body read and dropped after its answer.
const DRAIN_MAX: u64 = 1024 * 1024;

/// The body of one stream's request, as the service reads it: each DATA
/// frame as it comes, its flow-control window given back at once, so a
/// client sends at most a window's worth ahead of the service.
pub(crate) struct StreamBody {
    recv: RecvStream,
    limit: u64,
    received: u64,
    /// The last frame's data, lent by [`chunk`](Self::chunk).
    current: Bytes,
    gather: Vec<u8>,
    collected: bool,
    pub(super) failure: Option<Failure>,
    peer: Option<SocketAddr>,
    timeout: std::time::Duration,
    deadline: Option<Instant>,
}

impl StreamBody {
    fn new(
        recv: RecvStream,
        limit: u64,
        peer: Option<SocketAddr>,
        timeout: std::time::Duration,
    ) -> Self {
        Self {
            recv,
            limit,
            received: 0,
            current: Bytes::new(),
            gather: Vec::new(),
            collected: false,
            failure: None,
            peer,
            timeout,
            deadline: None,
        }
    }

    pub(crate) fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.peer
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))
    }

    /// The next DATA frame's bytes, `None` at the body's end. The whole
    /// body is bounded by the body limit and its deadline, as on HTTP/1.
    async fn next(&mut self) -> io::Result<Option<Bytes>> {
        if let Some(f) = &self.failure {
            return Err(failure_error(f.clone()));
        }
        let deadline = *self
            .deadline
            .get_or_insert_with(|| after(percore::time::now(), self.timeout));
        let failure = match percore::time::timeout_at(deadline, self.recv.data()).await {
            Ok(None) => return Ok(None),
            Ok(Some(Ok(data))) => {
                let _ = self.recv.flow_control().release_capacity(data.len());
                self.received = self.received.saturating_add(data.len() as u64);
                if self.received <= self.limit {
                    return Ok(Some(data));
                }
                Failure::Refused(HttpError::too_large("request body over limit"))
            }
            // A reset stream, a broken connection, a body longer than its
            // `Content-Length` (h2 checks it): nothing more comes.
            Ok(Some(Err(_))) => Failure::Gone,
            Err(_) => Failure::Refused(HttpError::timeout("request body timed out")),
        };
        self.failure = Some(failure.clone());
        Err(failure_error(failure))
    }

    pub(crate) async fn chunk(&mut self) -> io::Result<Option<&[u8]>> {
        loop {
            match self.next().await? {
                None => return Ok(None),
                Some(data) if data.is_empty() => {}
                Some(data) => {
                    self.current = data;
                    return Ok(Some(&self.current));
                }
            }
        }
    }

    /// Reads and drops what the client still sends of a body the
    /// answer went out before (a refusal, a service that did not read it),
    /// for a while and up to a bound: ended unread, the stream would be
    /// reset, and some clients take that reset for a failed exchange,
    /// answer and all.
    async fn drain(&mut self, linger: std::time::Duration) {
        if self.failure == Some(Failure::Gone) || self.recv.is_end_stream() {
            return;
        }
        let until = after(percore::time::now(), linger);
        let mut left = DRAIN_MAX;
        while let Ok(Some(Ok(data))) = percore::time::timeout_at(until, self.recv.data()).await {
            let _ = self.recv.flow_control().release_capacity(data.len());
            left = left.saturating_sub(data.len() as u64);
            if left == 0 {
                return;
            }
        }
    }

    pub(crate) async fn collect(&mut self) -> io::Result<&[u8]> {
        if !self.collected {
            self.gather.clear();
            while let Some(data) = self.next().await? {
                self.gather.extend_from_slice(&data);
            }
            self.collected = true;
        }
        Ok(&self.gather)
    }
}

/// The sending half of one stream: its HEADERS once, then DATA as the
/// flow-control windows allow.
pub(crate) struct StreamOut {
    respond: SendResponse<Bytes>,
    send: Option<SendStream<Bytes>>,
    failed: bool,
}

impl StreamOut {
    fn new(respond: SendResponse<Bytes>) -> Self {
        Self {
            respond,
            send: None,
            failed: false,
        }
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
        let headers = response.headers_mut();
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
        if let Some(len) = length {
            headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
        }
        date.with(|d| {
            if let Ok(value) = HeaderValue::from_bytes(d.as_bytes()) {
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
            let granted = match poll_fn(|cx| send.poll_capacity(cx)).await {
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

    /// Resets the stream: its response cannot be completed.
    pub(crate) fn reset(&mut self) {
        match self.send.as_mut() {
            Some(send) => send.send_reset(h2::Reason::INTERNAL_ERROR),
            None => self.respond.send_reset(h2::Reason::INTERNAL_ERROR),
        }
    }
}
