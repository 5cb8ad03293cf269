//! [`StreamBody`]: the body of an HTTP/2 stream's request, read by the
//! service through [`Request`](crate::http::Request).

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::Poll;
use std::time::Instant;

use percore_http2::frame::StreamId;

use super::shared::{Head, Received, Shared};
use crate::http::failure::{failure_error, Failure};
use crate::http::proto::HttpError;
use crate::http::wire::after;

/// The most of a request body read and dropped after its answer.
const DRAIN_MAX: u64 = 1024 * 1024;

/// The body of one stream's request, as the service reads it: what DATA
/// brought since the last read, its flow-control window given back as
/// it is read, so a client sends at most a window's worth ahead of the
/// service.
pub(crate) struct StreamBody {
    pub(super) shared: Rc<Shared>,
    pub(super) id: StreamId,
    pub(super) limit: u64,
    received: u64,
    /// The bytes lent by [`chunk`](Self::chunk), swapped with the
    /// stream's buffer at each read.
    current: Vec<u8>,
    gather: Vec<u8>,
    collected: bool,
    /// END_STREAM was read.
    ended: bool,
    pub(super) failure: Option<Failure>,
    peer: Option<SocketAddr>,
    timeout: std::time::Duration,
    deadline: Option<Instant>,
    /// The trailer fields that ended the body, once it was read to its end.
    trailers: Option<Head>,
}

impl StreamBody {
    pub(super) fn new(
        shared: Rc<Shared>,
        id: StreamId,
        ended: bool,
        peer: Option<SocketAddr>,
        timeout: std::time::Duration,
    ) -> Self {
        Self {
            shared,
            id,
            limit: u64::MAX,
            received: 0,
            current: Vec::new(),
            gather: Vec::new(),
            collected: false,
            ended,
            failure: None,
            peer,
            timeout,
            deadline: None,
            trailers: None,
        }
    }

    /// A trailer field of the request, once its body was read to the end.
    pub(crate) fn trailer(&self, name: &str) -> Option<&[u8]> {
        self.trailers.as_ref()?.get(name.as_bytes())
    }

    pub(crate) fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.peer
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))
    }

    /// Whether the whole body was read (or there was none).
    pub(super) fn is_end_stream(&self) -> bool {
        self.ended
    }

    /// Waits for what comes next: `true` with bytes in `current`,
    /// `false` at the body's end; `Err` when the stream is gone.
    async fn next(&mut self, deadline: Instant) -> Result<bool, Failure> {
        if self.ended {
            return Ok(false);
        }
        self.current.clear();
        let (shared, id) = (&*self.shared, self.id);
        let current = &mut self.current;
        let got = poll_fn(|cx| match shared.receive(id, current, cx) {
            Received::Wait => Poll::Pending,
            other => Poll::Ready(other),
        });
        match percore::time::timeout_at(deadline, got).await {
            Ok(Received::Data) => Ok(true),
            Ok(Received::End(trailers)) => {
                self.ended = true;
                self.trailers = trailers;
                Ok(false)
            }
            Ok(_) => Err(Failure::Gone),
            Err(_) => Err(Failure::Refused(HttpError::timeout(
                "request body timed out",
            ))),
        }
    }

    /// The next DATA bytes, `None` at the body's end. The whole body is
    /// bounded by the body limit and its deadline, as on HTTP/1.
    async fn read(&mut self) -> io::Result<Option<&[u8]>> {
        if let Some(f) = &self.failure {
            return Err(failure_error(f.clone()));
        }
        let deadline = *self
            .deadline
            .get_or_insert_with(|| after(percore::time::now(), self.timeout));
        let failure = match self.next(deadline).await {
            Ok(false) => return Ok(None),
            Ok(true) => {
                self.received = self.received.saturating_add(self.current.len() as u64);
                if self.received <= self.limit {
                    return Ok(Some(&self.current));
                }
                Failure::Refused(HttpError::too_large("request body over limit"))
            }
            Err(failure) => failure,
        };
        self.failure = Some(failure.clone());
        Err(failure_error(failure))
    }

    pub(crate) async fn chunk(&mut self) -> io::Result<Option<&[u8]>> {
        self.read().await
    }

    /// Reads and drops what the client still sends of a body the
    /// answer went out before (a refusal, a service that did not read it),
    /// for a while and up to a bound: ended unread, the stream would be
    /// reset, and some clients take that reset for a failed exchange,
    /// answer and all.
    pub(super) async fn drain(&mut self, linger: std::time::Duration) {
        if self.failure == Some(Failure::Gone) {
            return;
        }
        let until = after(percore::time::now(), linger);
        let mut left = DRAIN_MAX;
        while let Ok(true) = self.next(until).await {
            left = left.saturating_sub(self.current.len() as u64);
            if left == 0 {
                return;
            }
        }
    }

    pub(crate) async fn collect(&mut self) -> io::Result<&[u8]> {
        if !self.collected {
            self.gather.clear();
            while self.read().await?.is_some() {
                if self.gather.is_empty() {
                    // One read is the usual whole body: kept as it is,
                    // not copied.
                    std::mem::swap(&mut self.gather, &mut self.current);
                } else {
                    self.gather.extend_from_slice(&self.current);
                }
            }
            self.collected = true;
        }
        Ok(&self.gather)
    }
}
