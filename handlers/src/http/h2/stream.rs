//! One HTTP/2 stream: its request made a [`Request`] for the service, and
//! its [`Response`] sent as frames.

use std::net::SocketAddr;
use std::pin::pin;
use std::rc::Rc;
use std::time::Instant;

use percore_http2::frame::StreamId;

use super::body::StreamBody;
use super::connect::{self, Verdict};
use super::out::{StreamOut, StreamRef};
use super::shared::{Head, Lent, Shared};

use crate::http::conn::access::{self, Ending, Exchange};
use crate::http::conn::answers::service_error;
use crate::http::conn::unwind::CatchUnwind;
use crate::http::failure::Failure;
use crate::http::layer::Layer;
use crate::http::proto::{BodyKind, Header, HttpError, RequestHead};
use crate::http::request::Request;
use crate::http::response::Response;
use crate::http::service::Service;
use crate::http::stats::Reason;

/// Serves the request of one stream with the layer's service.
pub(super) async fn serve<S: Service>(
    layer: &Layer<S>,
    peer: Option<SocketAddr>,
    shared: Rc<Shared>,
    id: StreamId,
    request: Head,
) {
    let started = percore::time::now();
    percore::count_requests(1);
    layer.counters.h2_streams.add(1);
    // Counted on every way out, so that the streams open are exact.
    let _ended = Ended(&layer.counters.h2_streams_ended);
    let config = &layer.config;
    let stream = StreamRef {
        shared: Rc::clone(&shared),
        id,
    };
    let mut out = StreamOut::new(stream, config.write_timeout);
    let mut body = StreamBody::new(shared, id, request.end_stream, peer, config.body_timeout);
    let pseudo = |name: &[u8]| request.get(name).and_then(|v| std::str::from_utf8(v).ok());
    let method = pseudo(b":method").unwrap_or("GET");
    let authority = pseudo(b":authority");
    // The origin form, as HTTP/1 has it; the authority for a CONNECT,
    // which has no path.
    let target = pseudo(b":path").or(authority).unwrap_or("/");
    let exchange = Exchange {
        method,
        target,
        started,
    };
    let mut fields = Vec::with_capacity(request.len());
    // `:authority` stands for `Host` (RFC 9113 §8.3.1): services read
    // `Host` on either version.
    if request.get(b"host").is_none() {
        if let Some(authority) = authority {
            fields.push(Header {
                name: "host",
                value: authority.as_bytes(),
            });
        }
    }
    fields.extend(request.iter().filter_map(|(name, value)| {
        let name = std::str::from_utf8(name).ok()?;
        (!name.starts_with(':')).then_some(Header { name, value })
    }));
    let head_only = method == "HEAD";
    let answer = Answer {
        layer,
        peer,
        exchange,
        head_only,
    };
    if request.too_large {
        let e = HttpError::new(431, "request header fields too large");
        answer.refuse(&mut out, &e).await;
        return body.drain(config.linger_timeout).await;
    }
    if fields.len() > layer.config.limits.max_headers {
        let e = HttpError::new(431, "too many header fields");
        answer.refuse(&mut out, &e).await;
        return body.drain(config.linger_timeout).await;
    }
    let length = match request.get(b"content-length").map(content_length) {
        None => None,
        Some(Some(n)) => Some(n),
        Some(None) => {
            let e = HttpError::new(400, "invalid Content-Length");
            answer.refuse(&mut out, &e).await;
            return body.drain(config.linger_timeout).await;
        }
    };
    let kind = match length {
        _ if body.is_end_stream() => BodyKind::None,
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
        content_type: request.get(b"content-type"),
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
    let (mut res_headers, mut res_body) = (Lent::take(), Lent::take());
    let protocol = request.get(b":protocol");
    let mut req = Request::new_h2(head, &mut body, protocol);
    let mut res = Response::new_h2(
        &mut out,
        &layer.date,
        &mut res_headers.0,
        &mut res_body.0,
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
    let failed = match failed {
        Some(failed) => Some(failed),
        None => match connect::verdict(&mut res, protocol, method == "CONNECT") {
            Verdict::Answer => None,
            Verdict::Refuse(e) => Some((e, Some(Reason::ServiceError))),
            Verdict::Tunnel(then) => {
                drop(res);
                let Some(upgraded) = connect::open(out, body, &res_headers.0, &layer.date) else {
                    return answer.client_left();
                };
                // The exchange is answered; the tunnel's life is the
                // stream's, counted open until it ends.
                answer.sent(200, None, Ending::Whole);
                // A panic ends this stream (reset as its handles drop),
                // not the connection's other streams.
                match CatchUnwind(then(upgraded)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::debug!(error = %e, "HTTP/2 upgraded stream failed"),
                    Err(_panic) => {
                        if let Some(left_out) = layer.failures.admit(percore::time::now()) {
                            tracing::error!(target, left_out, "HTTP/2 upgraded stream panicked");
                        }
                    }
                }
                return;
            }
        },
    };
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
fn content_length(bytes: &[u8]) -> Option<u64> {
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
        let sent = sent && (!send_body || out.send_data(&body, true).await.is_ok());
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
        self.layer.counters.h2_streams_reset.add(1);
        if self.layer.config.access_log {
            let status = access::CLIENT_LEFT;
            access::log_peer(self.peer, Some(self.exchange), status, Ending::Incomplete);
        }
    }
}

/// Adds one to its counter when dropped: a stream's end.
struct Ended<'a>(&'a percore::runtime::Counter);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        self.0.add(1);
    }
}
