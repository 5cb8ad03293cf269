//! One request on an origin's HTTP/2 connection: its head and body
//! sent as the stream's flow control allows, its response's head read,
//! and its body read piece by piece ([`H2Body`]), each stage under its
//! own timeout as over HTTP/1.

use std::future::poll_fn;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use h2::client::ResponseFuture;
use h2::{Reason, RecvStream, SendStream};
use percore::time::timeout;

use super::live::{InFlight, Live};
use crate::client::error::{ClientError, ErrorKind, Op, Request};
use crate::client::exchange::IoFailure;

/// A request as HTTP/2 sends it.
#[derive(Debug)]
pub(crate) struct H2Request {
    pub(crate) head: http::Request<()>,
    pub(crate) body: Bytes,
}

/// How an attempt ended.
pub(crate) enum Outcome {
    /// The response, its head read.
    Answered(http::Response<H2Body>),
    /// The server did not take the request (GOAWAY past its stream,
    /// `REFUSED_STREAM`), or the reused connection failed before any
    /// answer on an idempotent request: it may be sent again, on a new
    /// connection (RFC 9113 §8.7), or the same one for a refused stream.
    Retry(ClientError, Again),
    /// It failed for good.
    Failed(ClientError),
}

/// Whether a request that failed may be sent again, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Again {
    /// Not at all.
    No,
    /// On the same connection: it refused the stream alone.
    Same,
    /// On a new connection: this one is going away or failed.
    New,
}

/// A response's body still coming on its stream, with the count of the
/// connection's requests in flight that it is one of.
#[derive(Debug)]
pub(crate) struct H2Body {
    recv: RecvStream,
    _in_flight: InFlight,
}

impl H2Body {
    /// The next piece of the body (never empty), `None` after the last;
    /// each piece waits at most `within`.
    pub(crate) async fn next(
        &mut self,
        request: &Rc<Request>,
        within: Duration,
    ) -> Result<Option<Bytes>, ClientError> {
        loop {
            let piece = match timeout(within, poll_fn(|cx| self.recv.poll_data(cx))).await {
                Ok(piece) => piece,
                Err(_) => return Err(ClientError::timeout(request, Op::ReadBody, within)),
            };
            match piece {
                None => return Ok(None),
                Some(Ok(bytes)) => {
                    // Taken: the server may send as much again.
                    let _ = self.recv.flow_control().release_capacity(bytes.len());
                    if !bytes.is_empty() {
                        return Ok(Some(bytes));
                    }
                }
                Some(Err(e)) => return Err(failure(request, &e, true)),
            }
        }
    }

    /// The trailer fields that ended the stream, once [`next`](Self::next)
    /// said the body is over (none when the server sent none), waiting
    /// at most `within`.
    pub(crate) async fn trailers(
        &mut self,
        request: &Rc<Request>,
        within: Duration,
    ) -> Result<Option<http::HeaderMap>, ClientError> {
        match timeout(within, poll_fn(|cx| self.recv.poll_trailers(cx))).await {
            Ok(Ok(trailers)) => Ok(trailers),
            Ok(Err(e)) => Err(failure(request, &e, true)),
            Err(_) => Err(ClientError::timeout(request, Op::ReadBody, within)),
        }
    }
}

/// Sends `req` on `live` and reads the response's head: the request's
/// head when the connection has room for another stream (the server's
/// `SETTINGS_MAX_CONCURRENT_STREAMS`: `h2` queues streams past it, one
/// request at a time, and this waits on that queue), its body within
/// `write`, the response head within `head`.
pub(crate) async fn exchange(
    live: &Live,
    req: H2Request,
    request: &Rc<Request>,
    idempotent: bool,
    write: Duration,
    head: Duration,
) -> Outcome {
    let reused = live.reused();
    let in_flight = InFlight::new(&live.usage);
    let not_taken = |e: h2::Error| {
        let error = failure(request, &e, false);
        match again(&e, reused, idempotent) {
            Again::No => Outcome::Failed(error),
            again => Outcome::Retry(error, again),
        }
    };
    let ready = timeout(write, live.send.clone().ready()).await;
    let mut send = match ready {
        Ok(Ok(send)) => send,
        Ok(Err(e)) => return not_taken(e),
        Err(_) => return Outcome::Failed(ClientError::timeout(request, Op::Write, write)),
    };
    let H2Request { head: h, body } = req;
    let (response, stream) = match send.send_request(h, body.is_empty()) {
        Ok(pair) => pair,
        Err(e) => return not_taken(e),
    };
    if !body.is_empty() {
        match timeout(write, send_body(stream, body)).await {
            Ok(Ok(())) => {}
            // The server ended the stream as the body went: its answer
            // (an early 413, a reset) says why.
            Ok(Err(_)) => {}
            Err(_) => return Outcome::Failed(ClientError::timeout(request, Op::Write, write)),
        }
    }
    match timeout(head, response_head(response)).await {
        Ok(Ok(response)) => Outcome::Answered(response.map(|recv| H2Body {
            recv,
            _in_flight: in_flight,
        })),
        Ok(Err(e)) => not_taken(e),
        Err(_) => Outcome::Failed(ClientError::timeout(request, Op::ReadHead, head)),
    }
}

async fn response_head(response: ResponseFuture) -> Result<http::Response<RecvStream>, h2::Error> {
    response.await
}

/// Sends `body` as the stream's windows open, ending the stream with it.
async fn send_body(mut stream: SendStream<Bytes>, mut body: Bytes) -> Result<(), h2::Error> {
    while !body.is_empty() {
        stream.reserve_capacity(body.len());
        let room = match poll_fn(|cx| stream.poll_capacity(cx)).await {
            Some(room) => room?,
            // The stream was reset: the response says how.
            None => return Ok(()),
        };
        if room == 0 {
            continue;
        }
        let piece = body.split_to(room.min(body.len()));
        stream.send_data(piece, body.is_empty())?;
    }
    Ok(())
}

/// Whether a request that failed with `e` may be sent again, and
/// where: the server says it did nothing with it (a GOAWAY whose last
/// stream is before it, `REFUSED_STREAM`), or, for an idempotent request
/// on a reused connection, the connection failed before any answer (the
/// server closed it as it was reused, as over HTTP/1).
fn again(e: &h2::Error, reused: bool, idempotent: bool) -> Again {
    if e.is_reset() && e.is_remote() && e.reason() == Some(Reason::REFUSED_STREAM) {
        Again::Same
    } else if (e.is_go_away() && e.is_remote()) || (e.is_io() && reused && idempotent) {
        Again::New
    } else {
        Again::No
    }
}

/// `e` as the client says it; `answering` once the response's head came.
pub(crate) fn failure(request: &Rc<Request>, e: &h2::Error, answering: bool) -> ClientError {
    if let Some(io) = e.get_io() {
        // `h2` tells a connection that ended under its streams as a
        // broken pipe: the server closed it.
        let kind = match (io.kind(), answering) {
            (std::io::ErrorKind::BrokenPipe, true) => ErrorKind::Truncated,
            (std::io::ErrorKind::BrokenPipe, false) => ErrorKind::Closed,
            _ => {
                let io = IoFailure::from(io);
                return ClientError::io(request, io);
            }
        };
        return ClientError::new(request, kind);
    }
    let reason = e
        .reason()
        .map_or_else(|| e.to_string(), |r| format!("{r:?}"));
    let kind = if e.is_go_away() && e.is_remote() {
        ErrorKind::GoAway
    } else if e.is_reset() && e.is_remote() {
        ErrorKind::Reset
    } else {
        return ClientError::with_detail(request, ErrorKind::Protocol, e.to_string());
    };
    ClientError::with_detail(request, kind, reason)
}
