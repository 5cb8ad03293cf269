//! [`StreamBody`]: the body of an HTTP/2 stream's request, read by the
//! service through [`Request`](crate::http::Request).

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use h2::RecvStream;

use crate::http::failure::{failure_error, Failure};
use crate::http::proto::HttpError;
use crate::http::wire::after;

/// The most of a request body read and dropped after its answer.
const DRAIN_MAX: u64 = 1024 * 1024;

/// The body of one stream's request, as the service reads it: each DATA
/// frame as it comes, its flow-control window given back at once, so a
/// client sends at most a window's worth ahead of the service.
pub(crate) struct StreamBody {
    pub(super) recv: RecvStream,
    pub(super) limit: u64,
    received: u64,
    /// The last frame's data, lent by [`chunk`](Self::chunk).
    current: Bytes,
    gather: Vec<u8>,
    collected: bool,
    pub(super) failure: Option<Failure>,
    peer: Option<SocketAddr>,
    timeout: std::time::Duration,
    deadline: Option<Instant>,
    /// The trailer fields that ended the body, once it was read to its end.
    trailers: Option<http::HeaderMap>,
}

impl StreamBody {
    pub(super) fn new(
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
            trailers: None,
        }
    }

    /// A trailer field of the request, once its body was read to the end.
    pub(crate) fn trailer(&self, name: &str) -> Option<&[u8]> {
        Some(self.trailers.as_ref()?.get(name)?.as_bytes())
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
            // The end: a HEADERS frame may have ended the stream, with the
            // trailer fields, which come with no more waiting.
            Ok(None) => match percore::time::timeout_at(deadline, self.recv.trailers()).await {
                Ok(Ok(trailers)) => {
                    self.trailers = trailers;
                    return Ok(None);
                }
                Ok(Err(_)) => Failure::Gone,
                Err(_) => Failure::Refused(HttpError::timeout("request trailers timed out")),
            },
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
    pub(super) async fn drain(&mut self, linger: std::time::Duration) {
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
