//! The connection loop: reads, splits the input into requests, calls the
//! service for each, and writes the answers of one read in one send.
//!
//! # Buffers
//!
//! The input of a turn is the receive lease itself whenever the requests
//! in it are complete, so the common case copies nothing and an idle
//! connection holds no lease. Only when a request head spans reads are its
//! bytes copied into the connection's `carry` buffer (bounded by the head
//! limits, which [`parse_head`] enforces on partial input too). Bodies that
//! span reads are read by the [`BodyReader`] straight from the socket; what
//! it reads past the body is where the next request starts. Responses gather
//! in one output buffer that is written once per turn. All of these are
//! per-connection `Vec`s that keep their capacity (up to
//! [`KEEP_CAPACITY`]), so steady-state requests allocate nothing.

use std::io;
use std::pin::pin;
use std::time::Instant;

use percore::buf::RecvBuf;
use percore::Connection;

use super::access::Exchange;
use super::answers::{
    answer_error, answer_error_kept, answer_panic, answer_stopping, client_left, log_failure,
    mark_incomplete, sent, sent_streamed, service_error,
};
use super::close::{close, quiet};
use super::cutoff::{cut_at, Cutoff};
use super::proto::{
    encode_last_chunk, header_storage, max_head_len, parse_head, BodyKind, Framing, HeadRetry,
    HttpError, Limits, RequestHead, ResponseHead,
};
use super::request::{BodyEnd, BodyReader, Failure};
use super::response::{effective_status, no_body_status, Streaming};
use super::service::HttpHandler;
use super::stats::Reason;
use super::unwind::CatchUnwind;
use super::wire::{after, Waited, Wire, KEEP_CAPACITY};
use super::{Request, Response, Service};

/// Header storage per request. [`Limits::max_headers`](super::Limits)
/// above this is capped to it.
const HEADER_SLOTS: usize = 100;

/// Output above this is sent before more pipelined requests are processed,
/// which bounds the output of a connection that pipelines many requests.
const OUT_HIGH_WATER: usize = 32 * 1024;

/// Room reserved for a response's status line and the framing fields
/// percore adds (`Date`, `Content-Length` or `Transfer-Encoding`,
/// `Connection`), on top of the service's own fields.
const HEAD_RESERVE: usize = 128;

/// Where the bytes of this turn are.
enum Input {
    /// In a receive lease (the common case).
    Lease(RecvBuf),
    /// In the connection's `carry` buffer (a head spanned reads).
    Carry,
}

/// How one turn's requests ended.
enum Next {
    /// All input used: read more.
    Read,
    /// A head is incomplete: keep its bytes and read more.
    Partial,
    /// The last response closes the connection (it is in the output).
    Close,
    /// The connection is unusable: close without another byte.
    Abort,
}

/// How one exchange ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Keep,
    Close,
    Abort,
}

/// Serves HTTP/1.1 on `conn` until the client leaves, a timeout or an
/// error ends it, or the server stops.
pub(crate) async fn serve<S: Service>(h: &HttpHandler<S>, conn: Connection) -> io::Result<()> {
    let config = &h.config;
    let started = percore::time::now();
    let wire = Wire::new(
        conn,
        after(started, config.head_timeout),
        config.write_timeout,
    );
    let stop = h.stop.register();
    let mut carry: Vec<u8> = Vec::new();
    let mut gather: Vec<u8> = Vec::new();
    let mut res_headers: Vec<u8> = Vec::new();
    let mut res_body: Vec<u8> = Vec::new();
    let mut served: u32 = 0;
    // The last request starts before this.
    let retire_at = after(started, config.max_age);
    // A new connection that sends nothing is closed after the head timeout.
    let mut idle_deadline = after(started, config.head_timeout);
    // When the first byte of the incomplete head in `carry` arrived.
    let mut head_started: Option<Instant> = None;
    let mut retry = HeadRetry::default();
    let max_head = max_head_len(&config.limits);
    // A body's limit is the service's to choose per request (see
    // `body_limit`), so the parser does not check `Content-Length`.
    let parse_limits = Limits {
        max_body: u64::MAX,
        ..config.limits
    };
    // Set once the server's stop was seen while waiting for a request.
    let mut stopping = false;
    // Once stopping: see `stop_cut_off`.
    let mut head_cut: Option<Instant> = None;

    loop {
        // The one write of this turn's answers, then the next read.
        if let Err(e) = wire.flush().await {
            return quiet(e);
        }
        let watch = (!stopping).then_some(&stop);
        let deadline = match head_started {
            Some(t) => {
                let end = after(t, config.head_timeout);
                head_cut.map_or(end, |cut| end.min(cut))
            }
            None => idle_deadline,
        };
        let mut input = match wire.wait(wire.conn.read(), deadline, watch).await {
            Waited::Done(Ok(Some(buf))) => Input::Lease(buf),
            // End of stream: everything complete was answered; an
            // incomplete head can never be, so it is dropped.
            Waited::Done(Ok(None)) => return Ok(()),
            Waited::Done(Err(e)) => return Err(e),
            Waited::TimedOut if head_started.is_some() => {
                let e = HttpError::timeout("request head timed out");
                sent(h, &wire, None, e.status, Some(Reason::Timeout));
                answer_error(h, &wire, &e, names_head(&carry));
                return close(&wire, config, &stop).await;
            }
            // Idle: close without a word (no 408, see Config).
            Waited::TimedOut => return Ok(()),
            // A request may be on its way: wait a little for it (it is
            // answered with `Connection: close`) rather than close under it.
            // The read dropped loses nothing: a head begun stays in `carry`.
            Waited::Stopped => {
                stopping = true;
                head_cut = stop_cut_off();
                let grace_end = after(percore::time::now(), config.stop_grace);
                idle_deadline = idle_deadline.min(head_cut.map_or(grace_end, |c| c.min(grace_end)));
                continue;
            }
        };
        let mut pos = 0;
        let mut parse = true;
        if !carry.is_empty() {
            // The head in `carry` continues in this read.
            if let Input::Lease(lease) = &input {
                carry.extend_from_slice(lease);
            }
            input = Input::Carry;
            parse = retry.due(&carry, max_head);
        }

        let next = loop {
            if !parse {
                // Still incomplete: nothing in the new bytes can end it.
                break Next::Partial;
            }
            let bytes: &[u8] = match &input {
                Input::Lease(lease) => lease.get(pos..).unwrap_or_default(),
                Input::Carry => carry.get(pos..).unwrap_or_default(),
            };
            if bytes.is_empty() {
                break Next::Read;
            }
            let mut storage = header_storage::<HEADER_SLOTS>();
            let (head, max_body) = match parse_head(bytes, &mut storage, &parse_limits)
                .map_err(|e| (e, None))
                .and_then(|head| body_limit(h, head))
            {
                Ok(Some(limited)) => limited,
                Ok(None) => {
                    retry.tried(bytes.len());
                    break Next::Partial;
                }
                Err((e, parsed)) => {
                    tracing::debug!(error = %e, "bad request");
                    let exchange = parsed.map(|(method, target)| Exchange {
                        method,
                        target,
                        started: percore::time::now(),
                    });
                    sent(
                        h,
                        &wire,
                        exchange,
                        e.status,
                        Some(Reason::refusal(e.status)),
                    );
                    answer_error(h, &wire, &e, names_head(bytes));
                    break Next::Close;
                }
            };
            head_started = None;
            retry.reset();
            served = served.saturating_add(1);
            percore::count_requests(1);
            let now = percore::time::now();
            let keep_alive = head.keep_alive
                && served < config.max_requests
                && now < retire_at
                && !percore::is_shutting_down();
            let head_len = head.head_len;
            let version = head.version;
            let head_only = head.method == "HEAD";
            let rest = bytes.get(head_len..).unwrap_or_default();
            let exchange = Exchange {
                method: head.method,
                target: head.target,
                started: now,
            };

            let body = BodyReader::new(&wire, config, &head, max_body, rest, &mut gather);
            let mut req = Request::new(head, body);
            let mut res = Response::new(
                &wire,
                &h.date,
                &mut res_headers,
                &mut res_body,
                version,
                head_only,
                keep_alive,
            );
            let called = {
                let call = pin!(h.service.call(&mut req, &mut res));
                Cutoff::new(CatchUnwind(call), &stop).await
            };
            let result = match called {
                Some(Ok(Ok(()))) => match res.length_mismatch() {
                    Some(e) => Err(e.into()),
                    None => Ok(()),
                },
                Some(Ok(result)) => result,
                Some(Err(panic)) => {
                    return answer_panic(h, &wire, exchange, &res, &stop, panic).await
                }
                None => {
                    let slow_body = req.body.awaiting_client();
                    return answer_stopping(h, &wire, exchange, &res, &stop, slow_body).await;
                }
            };
            // `res.keep_alive`, not `keep_alive`: the service may have
            // closed the connection. A body left unread after a success or
            // a service's refusal (a 4xx) is read and dropped to keep the
            // connection; after a failure the connection closes anyway.
            let drain = (result.is_ok() || is_refusal(&result, &res))
                && res.keep_alive
                && res.streaming != Some(Streaming::UntilClose);
            // Answered before the rest of the body is read and dropped
            // (`first`), as nginx does: a client still uploading gets the
            // service's answer (a 401, a 404) now, not after its upload,
            // and the answer stands even if the upload then fails, which
            // only closes the connection.
            let mut first = false;
            let end = match req.body.end_now() {
                Some(end) => end,
                None if drain && req.body.rest_to_come() => {
                    first = true;
                    BodyEnd::unknown()
                }
                // The body ended (or failed) in what had come; or a rest
                // still to come is left, and the connection closes.
                None => req.body.finish(None).await,
            };
            if let Err(e) = &result {
                log_failure(h, &req, e, end.failure.is_some() || wire.write_failed());
            }
            let (failure, abandoned) = (end.failure, end.abandoned);
            let outcome = complete(h, &wire, exchange, &mut res, result, failure, abandoned);
            let (outcome, end) = if first {
                let discard = (outcome == Outcome::Keep).then_some(&stop);
                let end = req.body.finish(discard).await;
                (after_discard(outcome, &end), end)
            } else {
                (outcome, end)
            };
            // `res` and `req` end here, releasing the buffers they borrow.
            shrink(&mut res_body);
            shrink(&mut gather);

            match end.lease {
                Some((lease, used)) => {
                    // The body ran past this turn's input: the rest of the
                    // input was body, and the new lease is the input now.
                    input = Input::Lease(lease);
                    pos = used;
                    carry.clear();
                }
                None => pos += head_len + end.input_used,
            }
            match outcome {
                Outcome::Keep => {}
                Outcome::Close => break Next::Close,
                Outcome::Abort => break Next::Abort,
            }
            idle_deadline = after(percore::time::now(), config.idle_timeout);
            if wire.pending() >= OUT_HIGH_WATER {
                if let Err(e) = wire.flush().await {
                    return quiet(e);
                }
            }
        };

        match next {
            Next::Read => {
                if let Input::Carry = input {
                    carry.clear();
                    shrink(&mut carry);
                }
            }
            Next::Partial => {
                match &input {
                    Input::Lease(lease) => {
                        carry.extend_from_slice(lease.get(pos..).unwrap_or_default());
                    }
                    Input::Carry => {
                        carry.drain(..pos.min(carry.len()));
                    }
                }
                head_started.get_or_insert_with(percore::time::now);
            }
            Next::Close => {
                drop(input);
                return close(&wire, config, &stop).await;
            }
            Next::Abort => return Ok(()),
        }
    }
}

/// How an exchange answered before its body's rest was read ends, once
/// that rest was read and dropped (`end`): kept if it all came, else
/// closed (after the answer goes out), or aborted if the client left.
fn after_discard(outcome: Outcome, end: &BodyEnd) -> Outcome {
    match end.failure {
        _ if outcome != Outcome::Keep => outcome,
        Some(Failure::Gone) => Outcome::Abort,
        Some(Failure::Refused(e)) => {
            tracing::debug!(
                status = e.status,
                reason = e.reason,
                "request body refused after the answer; closing"
            );
            Outcome::Close
        }
        None if end.abandoned => Outcome::Close,
        None => Outcome::Keep,
    }
}

/// Puts the answer to one exchange in the output.
fn complete<S: Service>(
    h: &HttpHandler<S>,
    wire: &Wire,
    exchange: Exchange<'_>,
    res: &mut Response<'_>,
    result: io::Result<()>,
    failure: Option<Failure>,
    abandoned: bool,
) -> Outcome {
    if failure == Some(Failure::Gone) || wire.write_failed() {
        // Nothing more reaches a client that left or stopped reading,
        // whatever the service made of the failed write (and after a lost
        // write, nothing more may follow on this connection); but a head
        // already out was a response it got, if not a whole one.
        if res.streaming.is_some() {
            sent_streamed(h, wire, exchange, res, None);
        } else {
            client_left(h, wire, exchange);
        }
        return Outcome::Abort;
    }
    // The layer's refusal, or (`None`) the service's error.
    let failed = match (failure, &result) {
        (Some(Failure::Refused(e)), _) => Some((e, Some(Reason::refusal(e.status)))),
        // (`Gone` returned above.)
        (_, Err(e)) => Some((service_error(e), None)),
        (_, Ok(())) => None,
    };
    if let Some((e, refusal)) = failed {
        if res.streaming.is_some() {
            // The head is out: only an incomplete response can tell the
            // client something went wrong.
            sent_streamed(
                h,
                wire,
                exchange,
                res,
                Some(refusal.unwrap_or(Reason::ServiceError)),
            );
            return if mark_incomplete(wire, res.streaming) {
                Outcome::Close
            } else {
                Outcome::Abort
            };
        }
        // A service's own 4xx is its answer to the client's request,
        // counted by class only (its log line is at debug); a 5xx is its
        // failure.
        let reason = refusal.or((e.status >= 500).then_some(Reason::ServiceError));
        sent(h, wire, Some(exchange), e.status, reason);
        // After a service's 4xx the stream is sound when the request was
        // read to its end: the connection is kept, as after any answer.
        let kept = reason.is_none() && res.keep_alive && !abandoned && !percore::is_shutting_down();
        if kept {
            let (head_only, version) = (res.head_only, res.version);
            answer_error_kept(h, wire, &e, head_only, version, res.body);
            return Outcome::Keep;
        }
        answer_error(h, wire, &e, res.head_only);
        return Outcome::Close;
    }
    // The stop may have begun while the service ran (say, while it read a
    // slow body): this is then the last response.
    let close = !res.keep_alive
        || abandoned
        || res.streaming == Some(Streaming::UntilClose)
        || percore::is_shutting_down();
    match res.streaming {
        Some(streaming) => {
            sent(h, wire, Some(exchange), effective_status(res.status), None);
            res.move_body();
            if streaming == Streaming::Chunked {
                wire.with_out(encode_last_chunk);
            }
        }
        None => {
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
            let encoded = h.date.with(|d| {
                wire.with_out(|out| {
                    // Grow with headroom: a response a few bytes longer than
                    // any before it (a number with one more digit) must not
                    // grow the buffer again, an allocation in steady state.
                    let want =
                        HEAD_RESERVE + headers.len() + if send_body { body.len() } else { 0 };
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
            if encoded.is_err() {
                // Unreachable in practice: headers are checked as added.
                sent(h, wire, Some(exchange), 500, None);
                answer_error(h, wire, &HttpError::internal(), res.head_only);
                return Outcome::Close;
            }
            sent(h, wire, Some(exchange), status, None);
        }
    }
    if close {
        Outcome::Close
    } else {
        Outcome::Keep
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

/// A request refused on its head: why, and its method and target when the
/// head parsed.
type Refusal<'b> = (HttpError, Option<(&'b str, &'b str)>);

/// A parsed request with its body limit: the service's for it
/// ([`Service::body_limit`], asked only when the request has a body). A
/// `Content-Length` over the limit is refused here, before the service is
/// called, as the parser would with the configured limit.
/// The refusal carries the request's method and target, for the access log.
fn body_limit<'h, 'b, S: Service>(
    h: &HttpHandler<S>,
    head: Option<RequestHead<'h, 'b>>,
) -> Result<Option<(RequestHead<'h, 'b>, u64)>, Refusal<'b>> {
    let Some(head) = head else {
        return Ok(None);
    };
    let configured = h.config.limits.max_body;
    let max = match head.body {
        BodyKind::None | BodyKind::Length(0) => return Ok(Some((head, configured))),
        _ => h.service.body_limit(&head, configured),
    };
    match head.body {
        BodyKind::Length(n) if n > max => Err((
            HttpError::too_large("Content-Length over limit"),
            Some((head.method, head.target)),
        )),
        _ => Ok(Some((head, max))),
    }
}

/// For a connection that learns of the stop now, the cut-off before the
/// drain deadline (`None` when no drain bounds the stop): the end of its
/// grace at the latest, as a request after it would only be answered 503,
/// and when a head still arriving is answered 408 rather than cancelled
/// with its connection at the deadline, without a word.
fn stop_cut_off() -> Option<Instant> {
    percore::drain_deadline().map(|deadline| cut_at(deadline, percore::time::now()))
}

/// Whether a request, complete or not, is a `HEAD`: the answer to one
/// has no body, even when it refuses the request (RFC 9110 §9.3.2).
fn names_head(request: &[u8]) -> bool {
    request.starts_with(b"HEAD ")
}

/// Frees a buffer that grew past [`KEEP_CAPACITY`] for one large message,
/// so idle connections do not keep it.
fn shrink(buf: &mut Vec<u8>) {
    if buf.capacity() > KEEP_CAPACITY {
        *buf = Vec::new();
    }
}
