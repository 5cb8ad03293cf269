//! [`ClientResponse`]: a response whose head is in, and its body, read
//! whole ([`body`](ClientResponse::body)) or piece by piece
//! ([`chunk`](ClientResponse::chunk)).
//!
//! The connection goes back to its origin's pool the moment the response
//! is complete, if it ended cleanly and allows reuse ([`Answer::reusable`]:
//! HTTP/1.1 without `Connection: close`, a body of known length, nothing
//! after it). A response dropped before that closes its connection: a
//! pooled connection never holds part of a response.

use std::future::poll_fn;
use std::ops::Range;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use percore::time::{now, timeout};
use percore_http1::response::head::MAX_FIELDS;

use super::error::{ClientError, ErrorKind, Op, Request};
use super::exchange::{Answer, Exchange};
use super::pool::Pool;

/// A response: its status and header fields, and its body to read.
#[derive(Debug)]
pub struct ClientResponse {
    status: u16,
    /// The head's bytes, which `fields` index into.
    head: Box<[u8]>,
    fields: Vec<(Range<usize>, Range<usize>)>,
    body: Body,
    pool: Rc<Pool>,
    request: Rc<Request>,
    body_timeout: Duration,
    max_body: usize,
    /// The trailer fields, once the body was read to its end.
    trailers: Vec<(Box<str>, Box<[u8]>)>,
}

/// Where the body is.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "most responses spend their life reading; boxing the exchange would allocate for each"
)]
enum Body {
    /// Still coming on the connection.
    Reading(Exchange),
    /// All in: `buf[rest]` is what was not handed out yet; the
    /// connection has gone back to its pool or been closed.
    Done { buf: Vec<u8>, rest: Range<usize> },
    /// It failed, or was read to its end: nothing more comes.
    Over,
    /// Still coming on an HTTP/2 stream.
    #[cfg(feature = "h2")]
    H2(super::h2::H2Body),
}

impl ClientResponse {
    /// The response whose head `exchange` has read, complete when `answer`
    /// is given.
    pub(crate) fn new(
        exchange: Exchange,
        answer: Option<Answer>,
        pool: Rc<Pool>,
        request: Rc<Request>,
        body_timeout: Duration,
        max_body: usize,
    ) -> Result<Self, ClientError> {
        let bad = |why| ClientError::new(&request, ErrorKind::BadResponse(why));
        let head: Box<[u8]> = exchange.head().ok_or_else(|| bad("no head"))?.into();
        let mut storage = [httparse::EMPTY_HEADER; MAX_FIELDS];
        let mut parsed = httparse::Response::new(&mut storage);
        // The scanner that accepted the head accepts what httparse does.
        let status = match parsed.parse(&head) {
            Ok(httparse::Status::Complete(_)) => parsed.code.unwrap_or_default(),
            _ => return Err(bad("the head does not parse")),
        };
        let at = |part: &[u8]| {
            let start = part.as_ptr() as usize - head.as_ptr() as usize;
            start..start + part.len()
        };
        let fields = parsed
            .headers
            .iter()
            .map(|h| (at(h.name.as_bytes()), at(h.value)))
            .collect();
        let mut response = Self {
            status,
            fields,
            head,
            body: Body::Reading(exchange),
            pool,
            request,
            body_timeout,
            max_body,
            trailers: Vec::new(),
        };
        if let Some(answer) = answer {
            response.complete(answer);
        }
        Ok(response)
    }

    /// The response whose head came on an HTTP/2 stream.
    #[cfg(feature = "h2")]
    pub(crate) fn from_h2(
        response: http::Response<super::h2::H2Body>,
        pool: Rc<Pool>,
        request: Rc<Request>,
        body_timeout: Duration,
        max_body: usize,
    ) -> Self {
        let (parts, body) = response.into_parts();
        let mut head = Vec::new();
        let mut fields = Vec::with_capacity(parts.headers.len());
        for (name, value) in &parts.headers {
            let start = head.len();
            head.extend_from_slice(name.as_str().as_bytes());
            let middle = head.len();
            head.extend_from_slice(value.as_bytes());
            fields.push((start..middle, middle..head.len()));
        }
        Self {
            status: parts.status.as_u16(),
            head: head.into(),
            fields,
            body: Body::H2(body),
            pool,
            request,
            body_timeout,
            max_body,
            trailers: Vec::new(),
        }
    }

    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The value of the first header field named `name` (in any case).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, value)| value)
    }

    /// Every header field, in the order received.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> + '_ {
        self.fields.iter().map(|(name, value)| {
            // Field names are tokens (checked by the parser): ASCII.
            let name = std::str::from_utf8(&self.head[name.clone()]).unwrap_or_default();
            (name, &self.head[value.clone()])
        })
    }

    /// The value of the first trailer field named `name` (in any case),
    /// once the body was read to its end ([`body`](Self::body), or
    /// [`chunk`](Self::chunk) until `None`).
    ///
    /// HTTP/2 trailers are kept (gRPC's `grpc-status` is one). Over
    /// HTTP/1.1 a chunked body's trailer section is checked and dropped,
    /// as percore's server does: none is ever seen here.
    pub fn trailer(&self, name: &str) -> Option<&[u8]> {
        self.trailers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, value)| value)
    }

    /// Every trailer field, in the order received; none before the body
    /// was read to its end. See [`trailer`](Self::trailer).
    pub fn trailers(&self) -> impl Iterator<Item = (&str, &[u8])> + '_ {
        self.trailers.iter().map(|(n, v)| (&n[..], &v[..]))
    }

    /// The whole body (the rest of it, after pieces taken with
    /// [`chunk`](Self::chunk)); empty once it was all read.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::TooLarge`] past [`Config::max_body`] (or the request's
    /// [`max_body`]), told at once from a `Content-Length`; the server
    /// closing inside the body ([`ErrorKind::Truncated`]), a malformed
    /// body, a failed connection, and the body timeout
    /// ([`Op::ReadBody`]).
    ///
    /// [`Config::max_body`]: super::Config::max_body
    /// [`max_body`]: super::RequestBuilder::max_body
    pub async fn body(&mut self) -> Result<Bytes, ClientError> {
        let declared = self
            .header("content-length")
            .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<u64>().ok());
        // Only while reading: a HEAD's or a 304's length is not its body's.
        let reading = matches!(self.body, Body::Reading(_));
        if reading && declared.is_some_and(|n| n > self.max_body as u64) {
            return Err(self.fail(ClientError::too_large(&self.request, self.max_body)));
        }
        #[cfg(feature = "h2")]
        if matches!(self.body, Body::H2(_)) {
            // A HEAD's, a 204's and a 304's length is not their body's.
            let bodied = self.request.method != "HEAD" && !matches!(self.status, 204 | 304);
            if bodied && declared.is_some_and(|n| n > self.max_body as u64) {
                return Err(self.fail(ClientError::too_large(&self.request, self.max_body)));
            }
            let mut all = Vec::new();
            while let Some(piece) = self.h2_piece().await? {
                if all.len() + piece.len() > self.max_body {
                    return Err(self.fail(ClientError::too_large(&self.request, self.max_body)));
                }
                all.extend_from_slice(&piece);
            }
            return Ok(all.into());
        }
        loop {
            match &mut self.body {
                Body::Reading(exchange) => {
                    if exchange.body_so_far().len() > self.max_body {
                        return Err(self.fail(ClientError::too_large(&self.request, self.max_body)));
                    }
                    self.step().await?;
                }
                Body::Done { buf, rest } => {
                    if rest.len() > self.max_body {
                        return Err(self.fail(ClientError::too_large(&self.request, self.max_body)));
                    }
                    let body = Bytes::copy_from_slice(buf.get(rest.clone()).unwrap_or_default());
                    self.body = Body::Over;
                    return Ok(body);
                }
                Body::Over => return Ok(Bytes::new()),
                // Read whole above.
                #[cfg(feature = "h2")]
                Body::H2(_) => return Ok(Bytes::new()),
            }
        }
    }

    /// The next piece of the body as it arrives, `None` after the last.
    /// Pieces are as the reads give them (de-chunked), not as the server
    /// cut its chunks. No limit applies: the caller keeps what it wants.
    ///
    /// # Errors
    ///
    /// As [`body`](Self::body), but never [`ErrorKind::TooLarge`].
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, ClientError> {
        loop {
            match &mut self.body {
                Body::Reading(exchange) => {
                    let piece = exchange.body_so_far();
                    if !piece.is_empty() {
                        let piece = Bytes::copy_from_slice(piece);
                        exchange.take_body();
                        return Ok(Some(piece));
                    }
                    self.step().await?;
                }
                Body::Done { buf, rest } => {
                    let piece = buf.get(rest.clone()).unwrap_or_default();
                    let piece = (!piece.is_empty()).then(|| Bytes::copy_from_slice(piece));
                    self.body = Body::Over;
                    if piece.is_some() {
                        return Ok(piece);
                    }
                }
                Body::Over => return Ok(None),
                #[cfg(feature = "h2")]
                Body::H2(_) => return self.h2_piece().await,
            }
        }
    }

    /// One read of the body, under the body timeout; the connection goes
    /// back to its pool if the response completed and allows it.
    async fn step(&mut self) -> Result<(), ClientError> {
        let Body::Reading(exchange) = &mut self.body else {
            return Ok(());
        };
        let after = self.body_timeout;
        match timeout(after, poll_fn(|cx| exchange.poll_step(cx))).await {
            Ok(Ok(Some(answer))) => {
                self.complete(answer);
                Ok(())
            }
            Ok(Ok(None)) => Ok(()),
            Ok(Err(e)) => {
                let error = ClientError::failure(&self.request, e.failure, after);
                Err(self.fail(error))
            }
            Err(_) => Err(self.fail(ClientError::timeout(&self.request, Op::ReadBody, after))),
        }
    }

    /// The next piece of an HTTP/2 body; the body is over after the last
    /// or an error.
    #[cfg(feature = "h2")]
    async fn h2_piece(&mut self) -> Result<Option<Bytes>, ClientError> {
        let Body::H2(body) = &mut self.body else {
            return Ok(None);
        };
        let end = match body.next(&self.request, self.body_timeout).await {
            Ok(Some(piece)) => return Ok(Some(piece)),
            Ok(None) => body.trailers(&self.request, self.body_timeout).await,
            Err(e) => Err(e),
        };
        self.body = Body::Over;
        let fields = end?.unwrap_or_default();
        self.trailers = fields
            .iter()
            .map(|(name, value)| (name.as_str().into(), value.as_bytes().into()))
            .collect();
        Ok(None)
    }

    /// The response is complete: its connection is pooled or closed, its
    /// body (what is left of it) kept.
    fn complete(&mut self, answer: Answer) {
        if let Body::Reading(exchange) = std::mem::replace(&mut self.body, Body::Over) {
            let (conn, buf) = exchange.into_parts();
            if answer.reusable {
                self.pool.release(conn, now());
            }
            self.body = Body::Done {
                buf,
                rest: answer.body,
            };
        }
    }

    /// Ends the body with `error`: its connection, in an unknown state,
    /// is closed.
    fn fail(&mut self, error: ClientError) -> ClientError {
        self.body = Body::Over;
        error
    }
}
