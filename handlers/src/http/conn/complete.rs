//! The end of an exchange, once the service returned: its answer in the
//! output, and whether the connection is kept after it.
//!
//! Nothing here waits. The reads of the body's rest stay in the loop of
//! [`serve`](super::serve), which calls these steps between them.

use std::io;

use super::access::Exchange;
use super::answers::service_error;
use super::state::Conn;
use crate::http::proto::{encode_last_chunk, Framing, HttpError, ResponseHead};
use crate::http::request::{BodyEnd, Failure, Request};
use crate::http::response::{effective_status, no_body_status, Response, Streaming};
use crate::http::service::Service;
use crate::http::stats::Reason;

/// Room reserved for a response's status line and the framing fields
/// percore adds (`Date`, `Content-Length` or `Transfer-Encoding`,
/// `Connection`), on top of the service's own fields.
const HEAD_RESERVE: usize = 128;

/// How one exchange ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The connection serves the next request.
    Keep,
    /// The answer is the connection's last: it goes out, then the close.
    Close,
    /// The client left or stopped reading: close without another byte.
    Abort,
}

impl<S: Service> Conn<'_, S> {
    /// After the service returned `result` and its body ended as `end`
    /// says: logs a failure and puts the answer in the output.
    #[inline]
    pub(super) fn settle(
        &self,
        exchange: Exchange<'_>,
        req: &Request<'_>,
        res: &mut Response<'_>,
        result: io::Result<()>,
        end: &BodyEnd,
    ) -> Outcome {
        if let Err(e) = &result {
            let clients_doing = end.failure.is_some() || self.wire.write_failed();
            self.log_failure(req, e, clients_doing);
        }
        self.complete(exchange, res, result, end.failure.clone(), end.abandoned)
    }

    /// Puts the answer to one exchange in the output.
    fn complete(
        &self,
        exchange: Exchange<'_>,
        res: &mut Response<'_>,
        result: io::Result<()>,
        failure: Option<Failure>,
        abandoned: bool,
    ) -> Outcome {
        if failure == Some(Failure::Gone) || self.wire.write_failed() {
            // Nothing more reaches a client that left or stopped reading,
            // whatever the service made of the failed write. After a lost
            // write, nothing more may follow on this connection. But a
            // head already out was a response it got, if not a whole one.
            if res.streaming.is_some() {
                self.sent_streamed(exchange, res, None);
            } else {
                self.client_left(exchange);
            }
            return Outcome::Abort;
        }
        // The layer's refusal, or (`None`) the service's error.
        let failed = match (failure, &result) {
            (Some(Failure::Refused(e)), _) => {
                let reason = Reason::refusal(e.status);
                Some((e, Some(reason)))
            }
            // (`Gone` returned above.)
            (_, Err(e)) => Some((service_error(e), None)),
            (_, Ok(())) => None,
        };
        if let Some((e, refusal)) = failed {
            return self.complete_failed(exchange, res, &e, refusal, abandoned);
        }
        // The stop may have begun while the service ran (say, while it
        // read a slow body): this is then the last response.
        let close = !res.keep_alive
            || abandoned
            || res.streaming == Some(Streaming::UntilClose)
            || percore::is_shutting_down();
        match res.streaming {
            Some(streaming) => {
                self.sent(Some(exchange), effective_status(res.status), None);
                res.move_body();
                if streaming == Streaming::Chunked {
                    self.wire.with_out(encode_last_chunk);
                }
            }
            None => match self.put_whole(res, close) {
                Ok(status) => self.sent(Some(exchange), status, None),
                Err(e) => {
                    // Unreachable in practice: headers are checked as added.
                    self.sent(Some(exchange), e.status, None);
                    self.answer_error(&e, res.head_only);
                    return Outcome::Close;
                }
            },
        }
        if close {
            Outcome::Close
        } else {
            Outcome::Keep
        }
    }

    /// As [`complete`](Self::complete), for an exchange that failed with
    /// `e`: the layer's `refusal` (with why), or the service's error.
    fn complete_failed(
        &self,
        exchange: Exchange<'_>,
        res: &mut Response<'_>,
        e: &HttpError,
        refusal: Option<Reason>,
        abandoned: bool,
    ) -> Outcome {
        if res.streaming.is_some() {
            // The head is out: only an incomplete response can tell the
            // client something went wrong.
            let reason = refusal.unwrap_or(Reason::ServiceError);
            self.sent_streamed(exchange, res, Some(reason));
            return if self.mark_incomplete(res.streaming) {
                Outcome::Close
            } else {
                Outcome::Abort
            };
        }
        // A service's own 4xx is its answer to the client's request,
        // counted by class only (its log line is at debug). A 5xx is its
        // failure.
        let reason = refusal.or((e.status >= 500).then_some(Reason::ServiceError));
        self.sent(Some(exchange), e.status, reason);
        // After a service's 4xx the stream is sound when the request was
        // read to its end: the connection is kept, as after any answer.
        let kept = reason.is_none() && res.keep_alive && !abandoned && !percore::is_shutting_down();
        if kept {
            let (head_only, version) = (res.head_only, res.version);
            self.answer_error_kept(e, head_only, version, res.body);
            return Outcome::Keep;
        }
        self.answer_error(e, res.head_only);
        Outcome::Close
    }

    /// Puts a whole (not streamed) response in the output, its head saying
    /// whether the connection `close`s after it; its status.
    ///
    /// # Errors
    ///
    /// A 500 if a header field is invalid, which [`Response::header`]
    /// checks as it is added, so not in practice.
    fn put_whole(&self, res: &Response<'_>, close: bool) -> Result<u16, HttpError> {
        let status = effective_status(res.status);
        let bodyless = no_body_status(status);
        let framing = match res.whole_length() {
            Some(len) if !bodyless => Framing::Length(len),
            _ => Framing::Empty,
        };
        let head = ResponseHead {
            keep_alive: !close,
            version: res.version,
            ..ResponseHead::new(status, framing)
        };
        let (headers, body) = (&*res.headers, &*res.body);
        let send_body = !res.head_only && !bodyless;
        let encoded = self.layer.date.with(|d| {
            self.wire.with_out(|out| {
                // Grow with headroom: a response a few bytes longer than
                // any before it (a number with one more digit) must not
                // grow the buffer again, an allocation in steady state.
                let want = HEAD_RESERVE + headers.len() + if send_body { body.len() } else { 0 };
                if out.capacity() - out.len() < want {
                    out.reserve(want + want / 4);
                }
                head.encode_raw(d, headers, out)?;
                if send_body {
                    out.extend_from_slice(body);
                }
                Ok::<(), HttpError>(())
            })
        });
        match encoded {
            Ok(()) => Ok(status),
            Err(_) => Err(HttpError::internal()),
        }
    }
}

/// Whether a body the service left unread is read and dropped, so that
/// the connection is kept: after a success or a service's refusal (a
/// 4xx). After a failure the connection closes anyway.
/// `res.keep_alive`, as the service may have closed the connection.
#[inline]
pub(super) fn drains(result: &io::Result<()>, res: &Response<'_>) -> bool {
    (result.is_ok() || is_refusal(result, res))
        && res.keep_alive
        && res.streaming != Some(Streaming::UntilClose)
}

/// How an exchange answered before its body's rest was read ends, once
/// that rest was read and dropped (`end`): kept if it all came, else
/// closed (after the answer goes out), or aborted if the client left.
pub(super) fn after_discard(outcome: Outcome, end: &BodyEnd) -> Outcome {
    match &end.failure {
        _ if outcome != Outcome::Keep => outcome,
        Some(Failure::Gone) => Outcome::Abort,
        Some(Failure::Refused(e)) => {
            tracing::debug!(
                status = e.status,
                reason = %e.reason,
                "request body refused after the answer; closing"
            );
            Outcome::Close
        }
        None if end.abandoned => Outcome::Close,
        None => Outcome::Keep,
    }
}

/// Whether the service refused the request with a 4xx [`HttpError`]
/// before its response's head went out.
fn is_refusal(result: &io::Result<()>, res: &Response<'_>) -> bool {
    res.streaming.is_none()
        && result
            .as_ref()
            .is_err_and(|e| (400..500).contains(&service_error(e).status))
}
