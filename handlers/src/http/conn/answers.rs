//! The HTTP layer's own answers, beside the service's: the count (and,
//! when on, the access-log line) of every response, the answers after a
//! panic or at a stop, and the log line of a failed service call.

use std::borrow::Cow;
use std::io;
use std::time::Duration;

use super::access::{self, Ending, Exchange, CLIENT_LEFT};
use super::state::Conn;
use super::unwind::Panic;
use crate::http::error::Chain;
use crate::http::proto::{
    chars, error_response_kept_if, error_text, reason_phrase, Framing, HttpError, ResponseHead,
    ERROR_TEXT_TYPE,
};
use crate::http::request::Request;
use crate::http::response::{effective_status, Response, Streaming};
use crate::http::service::Service;
use crate::http::stats::Reason;
use crate::log_limit::LeftOut;
use crate::one_line::OneLine;

impl<S: Service> Conn<'_, S> {
    /// Puts an error answer in the output, its body the service's
    /// [`Service::error_body`] (the default text if that panics or gives an
    /// empty or invalid content type). The caller closes the connection
    /// after it.
    pub(super) fn answer_error(&self, e: &HttpError, head_only: bool) {
        // The connection closes after it: not a steady state, so a fresh
        // buffer costs nothing that matters.
        self.put_error(e, head_only, None, &mut Vec::new());
    }

    /// As [`answer_error`](Self::answer_error), for an answer after which
    /// the connection is kept (a service's refusal of a request read to its
    /// end): the head says so, as the request's minor `version` needs. The
    /// body is made in `scratch`, the connection's response body buffer,
    /// whatever it holds: a client may be refused request after request on
    /// one connection, and a fresh buffer would then be allocations in
    /// steady state.
    pub(super) fn answer_error_kept(
        &self,
        e: &HttpError,
        head_only: bool,
        version: u8,
        scratch: &mut Vec<u8>,
    ) {
        self.put_error(e, head_only, Some(version), scratch);
    }

    /// The error answer, its body made in `body` (cleared first); `kept` is
    /// the request's minor version when the connection stays open after it.
    fn put_error(&self, e: &HttpError, head_only: bool, kept: Option<u8>, body: &mut Vec<u8>) {
        body.clear();
        let e = &with_phrase(e);
        // Any client can make the server answer an error: a service's bug here
        // must not cost the answer (the default is sent instead).
        let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.layer.service.error_body(e, body)
        }));
        let content_type = written.unwrap_or_else(|_| {
            body.clear();
            // A limit of its own: the service failure that often comes just
            // before must not hide it.
            if let Some(left_out) = self.layer.error_body_panics.admit(percore::time::now()) {
                let left_out = LeftOut {
                    count: left_out,
                    what: ("panic", "panics"),
                };
                tracing::error!(
                    status = e.status,
                    "Service::error_body panicked; sent the default error answer{left_out}"
                );
            }
            ""
        });
        let valid = !content_type.is_empty() && chars::is_field_value(content_type.as_bytes());
        if !valid {
            body.clear();
            error_text(e, body);
        }
        let content_type = if valid {
            content_type.as_bytes()
        } else {
            ERROR_TEXT_TYPE.as_bytes()
        };
        self.layer.date.with(|d| {
            self.wire.with_out(|out| {
                error_response_kept_if(out, e.status, content_type, body, head_only, d, kept);
            })
        });
    }

    /// A request shed because the core is overloaded (see
    /// `Config::shed_queue_delay`): 503 with `Retry-After: 1`; unless
    /// `keep`, the connection closes after it (its body, if any, is not
    /// read).
    pub(super) fn answer_overloaded(&self, head_only: bool, keep: bool) {
        const BODY: &[u8] = b"Service Unavailable: the server is overloaded\n";
        self.layer.date.with(|d| {
            self.wire.with_out(|out| {
                let head = ResponseHead {
                    content_type: Some(ERROR_TEXT_TYPE.as_bytes()),
                    keep_alive: keep,
                    extra: &[("Retry-After", b"1")],
                    ..ResponseHead::new(503, Framing::Length(BODY.len() as u64))
                };
                let encoded = head.encode(d, out);
                debug_assert!(encoded.is_ok(), "a fixed head with valid fields encodes");
                if !head_only {
                    out.extend_from_slice(BODY);
                }
            })
        });
        self.sent(None, 503, Some(Reason::Shed));
    }

    /// Counts a response the layer put in the output (and why it answered
    /// itself, if it did), and logs it when the access log is on.
    pub(super) fn sent(&self, exchange: Option<Exchange<'_>>, status: u16, reason: Option<Reason>) {
        self.count_and_log(exchange, status, reason, Ending::Whole);
    }

    /// As [`sent`](Self::sent), for a streamed response (its head out)
    /// whose exchange then failed: its access line says `incomplete=true`
    /// unless the whole response had gone out (see
    /// [`Response::went_out_whole`]).
    pub(super) fn sent_streamed(
        &self,
        exchange: Exchange<'_>,
        res: &Response<'_>,
        reason: Option<Reason>,
    ) {
        let ending = if res.went_out_whole() {
            Ending::Whole
        } else {
            Ending::Incomplete
        };
        let status = effective_status(res.status);
        self.count_and_log(Some(exchange), status, reason, ending);
    }

    /// Logs (when the access log is on) a request whose client closed the
    /// connection before any response went out: status 499, as nginx logs it.
    /// No response counts it.
    pub(super) fn client_left(&self, exchange: Exchange<'_>) {
        if self.layer.config.access_log {
            access::log(&self.wire.conn, Some(exchange), CLIENT_LEFT, Ending::Whole);
        }
    }

    fn count_and_log(
        &self,
        exchange: Option<Exchange<'_>>,
        status: u16,
        reason: Option<Reason>,
        ending: Ending,
    ) {
        match reason {
            Some(reason) => self.layer.counters.answered(status, reason),
            None => self.layer.counters.response(status),
        }
        if let Some(exchange) = &exchange {
            let took = std::time::Instant::now().saturating_duration_since(exchange.started);
            self.layer.counters.latency.record(took);
        }
        if self.layer.config.access_log {
            access::log(&self.wire.conn, exchange, status, ending);
        }
    }

    /// After the service panicked: a 500 (unless its head is out already),
    /// sent and closed as any error answer, then the panic goes on to the
    /// executor, which counts and logs it as for any handler.
    pub(super) async fn answer_panic(
        &self,
        exchange: Exchange<'_>,
        res: &Response<'_>,
        panic: Panic,
    ) -> io::Result<()> {
        let linger = self.mark_incomplete(res.streaming);
        let status = match res.streaming {
            Some(_) => effective_status(res.status),
            None => HttpError::internal().status,
        };
        // The request it served: the executor's line (with the panic's
        // message, once the answer is out) cannot say.
        tracing::error!(
            method = exchange.method,
            target = exchange.target,
            status,
            "service panicked"
        );
        if res.streaming.is_some() {
            self.sent_streamed(exchange, res, Some(Reason::ServiceError));
        } else {
            self.sent(Some(exchange), status, Some(Reason::ServiceError));
        }
        if res.streaming.is_none() {
            self.answer_error(&HttpError::internal(), res.head_only);
        }
        if linger {
            // Whatever ends the close, the panic is what this connection
            // reports.
            let _ = self.close().await;
        }
        std::panic::resume_unwind(panic)
    }

    /// After a stop cut the service off shortly before the drain deadline
    /// (see `cutoff.rs`): a 503 saying the server is stopping (unless the
    /// response head is out already; then the body ends incomplete), sent
    /// and closed as any error answer, while there is still time to.
    pub(super) async fn answer_stopping(
        &self,
        exchange: Exchange<'_>,
        res: &Response<'_>,
        slow_body: bool,
    ) -> io::Result<()> {
        if let Some(left_out) = self.layer.cut_off.admit(percore::time::now()) {
            let why = if slow_body {
                "the request's body was still arriving"
            } else {
                "the service had not answered"
            };
            let answer = if res.streaming.is_some() {
                "its response, already begun, ends incomplete"
            } else {
                "answered 503"
            };
            let left_out = LeftOut {
                count: left_out,
                what: ("call cut off", "calls cut off"),
            };
            tracing::warn!(
                method = exchange.method,
                target = exchange.target,
                "stopping: {why} near the drain deadline; {answer}{left_out}"
            );
        }
        if res.streaming.is_some() {
            self.sent_streamed(exchange, res, Some(Reason::CutOff));
            if !self.mark_incomplete(res.streaming) {
                return Ok(());
            }
            return self.close().await;
        }
        let e = HttpError::stopping();
        self.sent(Some(exchange), e.status, Some(Reason::CutOff));
        self.answer_error(&e, res.head_only);
        self.close().await
    }

    /// Logs a service's error: one answered with a 5xx (a failure of the
    /// service or what it depends on) at WARN, at most one line a second per
    /// core; one answered with a 4xx, or the client's doing (a bad request
    /// body, already answered, or a client that left or stopped reading), at
    /// debug.
    /// The error's message, then its causes (`a: b: c`), may quote the
    /// client (a decoded parameter): they are written on one line whatever
    /// they hold.
    pub(super) fn log_failure(&self, req: &Request<'_>, e: &io::Error, clients_doing: bool) {
        let (method, target) = (req.method(), req.target());
        let status = service_error(e).status;
        if clients_doing || status < 500 {
            let error = OneLine(Chain(e));
            tracing::debug!(method, target, status, error = %error, "service failed");
        } else if let Some(left_out) = self.layer.failures.admit(percore::time::now()) {
            let left_out = LeftOut {
                count: left_out,
                what: ("failure", "failures"),
            };
            let error = OneLine(Chain(e));
            tracing::warn!(method, target, status, error = %error, "service failed{left_out}");
        }
    }

    /// Makes the close of a connection whose response head is out, but whose
    /// body failed, say so; whether the close should still linger. A chunked
    /// body (or one under `Content-Length`) says it by lacking its last chunk
    /// (or bytes), and the close lingers as any other, so that the client's
    /// unread request bytes do not turn it into a reset on one backend and not
    /// the other. A body delimited by the close (HTTP/1.0) would look complete
    /// after a FIN, so that connection is reset instead. What the client has
    /// received stays readable before the reset on Linux.
    #[must_use]
    pub(super) fn mark_incomplete(&self, streaming: Option<Streaming>) -> bool {
        if streaming == Some(Streaming::UntilClose) {
            // The peer may be gone already; nothing else to tell it then.
            let _ = self.wire.conn.set_linger(Some(Duration::ZERO));
            return false;
        }
        true
    }
}

/// `e`, its reason the status's phrase if it has none: an error body made
/// from the reason (an API's JSON) then says what the status says.
fn with_phrase(e: &HttpError) -> Cow<'_, HttpError> {
    if e.reason.is_empty() {
        Cow::Owned(HttpError::new(e.status, reason_phrase(e.status)))
    } else {
        Cow::Borrowed(e)
    }
}

/// The error answer to a service's error: the `HttpError` it wraps, if it
/// has an error status (4xx or 5xx), else a 500. One place, so that the
/// answer, its log line and whether the connection may be kept agree.
pub(crate) fn service_error(e: &io::Error) -> HttpError {
    HttpError::of(e)
        .filter(|e| (400..=599).contains(&e.status))
        .unwrap_or(HttpError::internal())
}
