//! [`Request`]: a parsed request head borrowed from the connection's input,
//! and its body, read on demand.

use std::io;
use std::net::SocketAddr;

pub(crate) use super::body_reader::{BodyEnd, BodyReader};
pub(crate) use super::failure::Failure;
use super::proto::{BodyKind, Header, RequestHead};

/// One request, as a [`Service`](super::Service) sees it.
///
/// The head (method, target, fields) borrows the bytes as received: no
/// copy, no allocation. The body is not read until the service asks for
/// it, with [`body`](Self::body) (all of it) or [`chunk`](Self::chunk)
/// (piece by piece, as it arrives); either way at most
/// [`Limits::max_body`](super::Limits::max_body) bytes of it (or the
/// service's own limit for the request, see
/// [`Service::body_limit`](super::Service::body_limit)), beyond which the
/// client gets 413. A client that sent
/// `Expect: 100-continue` gets its `100 Continue` only then; a body the
/// service never asks for is read and discarded when the service returns
/// (after its answer, if the rest is still to come; see the
/// [module docs](super)), or the connection is closed if the client is
/// still waiting for permission.
pub struct Request<'r> {
    head: RequestHead<'r, 'r>,
    pub(crate) body: Body<'r>,
}

/// Where a request's body comes from: the HTTP/1 wire, or an HTTP/2
/// stream. The connection loops reach their own kind through
/// [`Body::h1`] and the HTTP/2 stream's task. Not boxed: the HTTP/1
/// reader is the common case, and lives in the exchange's pooled future.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Body<'r> {
    H1(BodyReader<'r>),
    /// An HTTP/2 stream's body, and the `:protocol` of an extended
    /// CONNECT (RFC 8441), if the request is one.
    #[cfg(feature = "h2")]
    H2(&'r mut super::h2::StreamBody, Option<&'r [u8]>),
}

impl<'r> Body<'r> {
    /// The HTTP/1 reader. Only the HTTP/1 loop, which made it, asks.
    #[inline(always)]
    pub(crate) fn h1(&mut self) -> &mut BodyReader<'r> {
        match self {
            Body::H1(reader) => reader,
            #[cfg(feature = "h2")]
            Body::H2(..) => unreachable!("the HTTP/1 loop serves HTTP/1 requests only"),
        }
    }
}

impl<'r> Request<'r> {
    pub(crate) fn new(head: RequestHead<'r, 'r>, body: BodyReader<'r>) -> Self {
        Self {
            head,
            body: Body::H1(body),
        }
    }

    /// A request of an HTTP/2 stream; `protocol` is the `:protocol` of
    /// an extended CONNECT.
    #[cfg(feature = "h2")]
    pub(crate) fn new_h2(
        head: RequestHead<'r, 'r>,
        body: &'r mut super::h2::StreamBody,
        protocol: Option<&'r [u8]>,
    ) -> Self {
        Self {
            head,
            body: Body::H2(body, protocol),
        }
    }

    /// The method token, e.g. `GET` (case-sensitive).
    pub fn method(&self) -> &'r str {
        self.head.method
    }

    /// The request target as sent, e.g. `/search?q=1` (or in absolute
    /// form, `http://example.com/search?q=1`).
    pub fn target(&self) -> &'r str {
        self.head.target
    }

    /// The target's path, e.g. `/search` for `/search?q=1` and for
    /// `http://example.com/search?q=1` (`/` when the absolute form has
    /// none), as sent: not percent-decoded. `*` for `OPTIONS *`, and an
    /// authority-form target (`CONNECT host:port`) whole.
    pub fn path(&self) -> &'r str {
        self.head.path()
    }

    /// The target's query, without its `?` (`q=1` for `/search?q=1`), as
    /// sent: not percent-decoded. `None` when the target has no `?`.
    pub fn query(&self) -> Option<&'r str> {
        self.head.query()
    }

    /// The minor version, 0 for HTTP/1.0 and 1 for HTTP/1.1; or 2 for a
    /// request of an HTTP/2 stream.
    pub fn version(&self) -> u8 {
        self.head.version
    }

    /// The value of the first field named `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&'r [u8]> {
        self.head
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    }

    /// All header fields in the order received, names as sent.
    ///
    /// ```
    /// use percore_handlers::http::Header;
    ///
    /// /// Every `Cookie` field's value, say of `req.headers()`.
    /// fn cookies<'a>(headers: &'a [Header<'a>]) -> Vec<&'a [u8]> {
    ///     headers
    ///         .iter()
    ///         .filter(|h| h.name.eq_ignore_ascii_case("cookie"))
    ///         .map(|h| h.value)
    ///         .collect()
    /// }
    ///
    /// let headers = [
    ///     Header { name: "Host", value: b"example.com" },
    ///     Header { name: "cookie", value: b"a=1" },
    /// ];
    /// assert_eq!(cookies(&headers), [b"a=1"]);
    /// ```
    pub fn headers(&self) -> &'r [Header<'r>] {
        self.head.headers
    }

    /// The first `Content-Type` value, if any.
    pub fn content_type(&self) -> Option<&'r [u8]> {
        self.head.content_type
    }

    /// How the body is framed (none, `Content-Length`, chunked).
    pub fn body_kind(&self) -> BodyKind {
        self.head.body
    }

    /// The protocol the client asks to switch to, say `websocket`, when
    /// the request may be upgraded: on HTTP/1.1 its `Upgrade` field, with
    /// `upgrade` listed in `Connection`, one `Upgrade` field and no body;
    /// on HTTP/2 the `:protocol` of an extended CONNECT (RFC 8441, whose
    /// method is then `CONNECT` and whose path is the route's). `None`
    /// otherwise. A service that accepts answers with
    /// [`Response::upgrade`](super::Response::upgrade); one that does not
    /// answers as to any request, and the connection stays HTTP (on
    /// HTTP/2 the stream ends with the answer; a 2xx answer that accepts
    /// nothing is turned into a 501, which the client cannot mistake for
    /// an open tunnel).
    pub fn upgrade_protocol(&self) -> Option<&'r [u8]> {
        match &self.body {
            Body::H1(_) => super::upgrade::requested(&self.head),
            #[cfg(feature = "h2")]
            Body::H2(_, protocol) => *protocol,
        }
    }

    /// The whole parsed head, for anything the accessors above do not show.
    pub fn head(&self) -> &RequestHead<'r, 'r> {
        &self.head
    }

    /// The client's address.
    ///
    /// # Errors
    ///
    /// When the socket is no longer connected.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        match &self.body {
            Body::H1(reader) => reader.wire.conn.peer_addr(),
            #[cfg(feature = "h2")]
            Body::H2(body, _) => body.peer_addr(),
        }
    }

    /// The rest of the body, read to its end. Empty when there is none.
    ///
    /// When a `Content-Length` body arrived with the head it is returned in
    /// place, with no copy; otherwise it is gathered into a buffer the
    /// connection reuses. Calling it again returns the same bytes. After
    /// [`chunk`](Self::chunk) it returns only what `chunk` had not.
    ///
    /// # Errors
    ///
    /// The body is malformed (400) or over the limit (413), its deadline
    /// passed (408), or the client closed or reset the connection first.
    /// Return the error from the service: the server answers with the
    /// right status itself, whatever the service wrote, and closes.
    pub async fn body(&mut self) -> io::Result<&[u8]> {
        match &mut self.body {
            Body::H1(reader) => reader.collect().await,
            #[cfg(feature = "h2")]
            Body::H2(body, _) => body.collect().await,
        }
    }

    /// The next piece of the body as it arrives, or `None` at its end.
    /// Nothing is gathered, but the body as a whole is still bounded by
    /// [`Limits::max_body`](super::Limits::max_body), or by the service's
    /// [`body_limit`](super::Service::body_limit) for the request.
    ///
    /// # Errors
    ///
    /// As [`body`](Self::body).
    pub async fn chunk(&mut self) -> io::Result<Option<&[u8]>> {
        match &mut self.body {
            Body::H1(reader) => reader.chunk().await,
            #[cfg(feature = "h2")]
            Body::H2(body, _) => body.chunk().await,
        }
    }
}

impl Request<'_> {
    /// A trailer field the client sent after the body (HTTP/2), once the
    /// body was read to its end by [`body`](Self::body) or
    /// [`chunk`](Self::chunk); `None` before, or if it sent none. On
    /// HTTP/1.1 always `None`: a chunked body's trailer section is read
    /// and dropped (a trailer such as `Content-Length` could otherwise
    /// change what the head said).
    pub fn trailer(&self, name: &str) -> Option<&[u8]> {
        match &self.body {
            Body::H1(_) => {
                let _ = name;
                None
            }
            #[cfg(feature = "h2")]
            Body::H2(body, _) => body.trailer(name),
        }
    }
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.head.method)
            .field("target", &self.head.target)
            .field("version", &self.head.version)
            .field("body", &self.head.body)
            .finish_non_exhaustive()
    }
}
