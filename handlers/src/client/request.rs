//! [`RequestBuilder`]: one request, built and sent. Sending resolves the
//! host (if it is a name), takes a pooled connection or makes one, writes
//! the request and reads the response head, each stage under its own
//! timeout, and retries once where that is safe.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use percore::net::{Endpoint, Stream};
use percore::time::{now, timeout};

use super::connect::{connect, TlsTo};
use super::error::{ClientError, ErrorKind, Op, Request};
use super::exchange::{Answer, Exchange, ExchangeError, Failure, IoFailure, ResponseLimits};
use super::response::ClientResponse;
use super::url::Url;
use super::Client;
use crate::http::proto::chars::{is_field_value, is_token};
use crate::http::proto::write_decimal;

/// Each stage's timeout for one request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    pub(crate) resolve: Duration,
    pub(crate) connect: Duration,
    pub(crate) write: Duration,
    pub(crate) head: Duration,
    pub(crate) body: Duration,
}

/// A request being built: made by [`Client::get`], [`Client::request`]
/// and the like, sent by [`send`](Self::send).
///
/// A method, URL, path segment or header that cannot be sent is reported
/// by `send` (as [`ErrorKind::InvalidUrl`], [`ErrorKind::InvalidRequest`]
/// or [`ErrorKind::InvalidSegment`]), so that the builder chains without
/// a `Result` at each step. Nothing that could split the request reaches
/// the wire: a URL, method or header holding CR, LF, NUL or another
/// control byte is refused, and a value given to
/// [`path_segment`](Self::path_segment) or
/// [`query_pair`](Self::query_pair) is percent-encoded.
#[derive(Debug)]
#[must_use = "a request does nothing until sent"]
pub struct RequestBuilder {
    pub(super) client: Client,
    pub(super) request: Rc<Request>,
    url: Result<Url, &'static str>,
    /// The header lines given so far, each ending in CRLF.
    pub(super) fields: Vec<u8>,
    /// A `Host` was given: it replaces the URL's.
    has_host: bool,
    pub(super) body: Option<Bytes>,
    pub(super) timeouts: Timeouts,
    pub(super) max_body: usize,
    /// HTTP/2 is offered to an `https://` origin.
    #[cfg(feature = "h2")]
    pub(super) http2: bool,
    /// HTTP/2 is spoken to an `http://` origin without asking.
    #[cfg(feature = "h2")]
    pub(super) prior_knowledge: bool,
    /// The first thing given that cannot be sent.
    invalid: Option<&'static str>,
    /// The first path segment that cannot be sent.
    invalid_segment: Option<&'static str>,
}

impl RequestBuilder {
    pub(crate) fn new(client: Client, method: &str, url: &str) -> Self {
        let config = client.config();
        let invalid = (!is_token(method.as_bytes())).then_some("the method is not a token");
        Self {
            timeouts: Timeouts {
                resolve: config.resolve_timeout,
                connect: config.connect_timeout,
                write: config.write_timeout,
                head: config.head_timeout,
                body: config.body_timeout,
            },
            max_body: config.max_body,
            #[cfg(feature = "h2")]
            http2: config.http2,
            #[cfg(feature = "h2")]
            prior_knowledge: config.http2_prior_knowledge,
            request: Rc::new(Request {
                method: method.to_owned(),
                url: url.to_owned(),
            }),
            url: Url::parse(url),
            fields: Vec::new(),
            has_host: false,
            body: None,
            invalid,
            invalid_segment: None,
            client,
        }
    }

    /// Appends `segment` to the URL's path as one segment: it is
    /// percent-encoded whole, `%`, `?`, `#`, `;`, controls (CR, LF, NUL)
    /// and non-ASCII bytes included, so that a value from elsewhere (a
    /// client's path parameter) can neither name another path on the
    /// server called nor split the request. Give it the value decoded
    /// ([`Routed::param_str`]), not as it was sent: its `%` is encoded
    /// too. A URL whose path ends with `/` has that empty last segment
    /// replaced.
    ///
    /// What no encoding keeps one segment on every server, `send`
    /// refuses with [`ErrorKind::InvalidSegment`]: an empty segment, `.`
    /// and `..` (servers take them for path steps, even encoded), and a
    /// value holding `/` or `\` (nginx, and routers that match the
    /// decoded path, take `%2F` for a separator: `../keys`, sent as
    /// `..%2Fkeys`, would reach `/keys` there). A service whose upstream
    /// is known to keep `%2F` as data writes that into the URL itself.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn f(client: percore_handlers::client::Client) -> Result<(), percore_handlers::client::ClientError> {
    /// let city = "..%2Fadmin?x"; // from a client
    /// // GET /v1/city/..%252Fadmin%3Fx?units=metric
    /// let answer = client
    ///     .get("http://127.0.0.1:8080/v1/city?units=metric")
    ///     .path_segment(city)
    ///     .send()
    ///     .await?;
    /// # let _ = answer; Ok(()) }
    /// ```
    ///
    /// [`Routed::param_str`]: crate::http::Routed::param_str
    pub fn path_segment(mut self, segment: &str) -> Self {
        if let Ok(url) = &mut self.url {
            match url.push_segment(segment) {
                Ok(()) => self.url_changed(),
                Err(why) => {
                    self.invalid_segment.get_or_insert(why);
                }
            }
        }
        self
    }

    /// Appends `name=value` to the URL's query, each encoded as a form
    /// encodes it (`&`, `=`, `#`, `%`, `+`, controls and non-ASCII bytes
    /// as `%XX`, a space as `+`), so that a value from elsewhere stays one
    /// value of one parameter.
    pub fn query_pair(mut self, name: &str, value: &str) -> Self {
        if let Ok(url) = &mut self.url {
            url.push_query_pair(name, value);
            self.url_changed();
        }
        self
    }

    /// Makes the errors name the URL with what was pushed on it.
    fn url_changed(&mut self) {
        if let (Ok(url), Some(request)) = (&self.url, Rc::get_mut(&mut self.request)) {
            request.url = url.to_text();
        }
    }

    /// Adds a header field. `Content-Length` and `Transfer-Encoding` are
    /// the client's to write (from [`body`](Self::body)); a `Host` given
    /// here replaces the one taken from the URL.
    pub fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        let value = value.as_ref();
        let refused = if !is_token(name.as_bytes()) {
            Some("a header name is not a token")
        } else if !is_field_value(value) {
            Some("a header value holds CR, LF or another control byte")
        } else if name.eq_ignore_ascii_case("content-length")
            || name.eq_ignore_ascii_case("transfer-encoding")
        {
            Some("the body's framing is the client's to write: give the body with body()")
        } else {
            None
        };
        if let Some(why) = refused {
            self.invalid.get_or_insert(why);
            return self;
        }
        self.has_host |= name.eq_ignore_ascii_case("host");
        self.fields.extend_from_slice(name.as_bytes());
        self.fields.extend_from_slice(b": ");
        self.fields.extend_from_slice(value);
        self.fields.extend_from_slice(b"\r\n");
        self
    }

    /// The request's body, sent with a `Content-Length`.
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Sets every stage's timeout (resolve, connect, write, read head,
    /// read each piece of the body) to `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeouts = Timeouts {
            resolve: timeout,
            connect: timeout,
            write: timeout,
            head: timeout,
            body: timeout,
        };
        self
    }

    /// Longest wait to connect (see [`Config::connect_timeout`]).
    ///
    /// [`Config::connect_timeout`]: super::Config::connect_timeout
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.timeouts.connect = timeout;
        self
    }

    /// Longest wait to write the request.
    pub fn write_timeout(mut self, timeout: Duration) -> Self {
        self.timeouts.write = timeout;
        self
    }

    /// Longest wait for the response head once the request is written.
    pub fn head_timeout(mut self, timeout: Duration) -> Self {
        self.timeouts.head = timeout;
        self
    }

    /// Longest wait for each piece of the response body.
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.timeouts.body = timeout;
        self
    }

    /// Most bytes [`ClientResponse::body`] gathers for this request.
    pub fn max_body(mut self, limit: usize) -> Self {
        self.max_body = limit;
        self
    }

    /// Whether to offer HTTP/2 to an `https://` origin by ALPN (see
    /// [`Config::http2`](super::Config::http2)). Off, the request goes
    /// over HTTP/1.1 on the origin's keep-alive pool.
    #[cfg(feature = "h2")]
    pub fn http2(mut self, offer: bool) -> Self {
        self.http2 = offer;
        self
    }

    /// Whether to speak HTTP/2 to an `http://` origin without asking
    /// first (see [`Config::http2_prior_knowledge`]). On, the request
    /// shares the origin's one HTTP/2 connection on this core with the
    /// others that go so.
    ///
    /// [`Config::http2_prior_knowledge`]: super::Config::http2_prior_knowledge
    #[cfg(feature = "h2")]
    pub fn http2_prior_knowledge(mut self, on: bool) -> Self {
        self.prior_knowledge = on;
        self
    }

    /// Sends the request and reads the response's head; the body is read
    /// from the [`ClientResponse`].
    ///
    /// An idempotent request (RFC 9110 §9.2.2: GET, HEAD, OPTIONS, TRACE,
    /// PUT, DELETE) that failed on a pooled connection before any byte of
    /// a response came is sent again once, on a new connection: the server
    /// closed the idle connection as it was reused, and cannot have acted
    /// on the request. Nothing else is retried.
    ///
    /// # Errors
    ///
    /// An invalid URL or request, a failed resolve, connect or exchange, a
    /// malformed response head, or a stage's timeout; see [`ErrorKind`].
    ///
    /// # Panics
    ///
    /// Polled outside a percore core: the client's pools and name cache
    /// run tasks on the core.
    pub async fn send(self) -> Result<ClientResponse, ClientError> {
        let request = Rc::clone(&self.request);
        let url = match &self.url {
            Ok(url) => url,
            Err(why) => return Err(ClientError::new(&request, ErrorKind::InvalidUrl(why))),
        };
        if let Some(why) = self.invalid {
            return Err(ClientError::new(&request, ErrorKind::InvalidRequest(why)));
        }
        if let Some(why) = self.invalid_segment {
            return Err(ClientError::new(&request, ErrorKind::InvalidSegment(why)));
        }
        let tls = match (url.tls, self.client.h1_tls()) {
            (false, _) => None,
            (true, Some(config)) => Some((config, url.host.as_str())),
            (true, None) => {
                let why = "https is not supported by this client without a TLS config \
                           (client::Config::tls)";
                return Err(ClientError::new(&request, ErrorKind::Unsupported(why)));
            }
        };
        let wire = self.wire(url);
        let method = request.method.as_str();
        let attempt = Attempt {
            wire,
            limits: ResponseLimits {
                max_head: self.client.config().max_head,
                // `body` and `chunk` keep their own counts.
                max_body: usize::MAX,
            },
            head_only: method == "HEAD",
            timeouts: self.timeouts,
        };
        let idempotent = matches!(
            method,
            "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE"
        );
        // A connection made for HTTP/2 whose ALPN chose HTTP/1.1.
        #[cfg(feature = "h2")]
        let mut handed = match self.send_h2(url, idempotent).await {
            std::ops::ControlFlow::Break(result) => return result,
            std::ops::ControlFlow::Continue(conn) => conn,
        };
        #[cfg(not(feature = "h2"))]
        let mut handed: Option<Stream> = None;
        let pool = self.client.pool(url);
        let mut addrs = None;
        let mut fresh_only = false;
        loop {
            let handed = handed.take();
            let pooled = if fresh_only || handed.is_some() {
                None
            } else {
                pool.checkout(now())
            };
            let reused = pooled.is_some();
            let conn = match handed.or(pooled) {
                Some(conn) => conn,
                None => {
                    let addrs = match &addrs {
                        Some(addrs) => addrs,
                        None => addrs.insert(self.resolve(url).await?),
                    };
                    connect_any(addrs, tls, self.timeouts.connect)
                        .await
                        .map_err(|f| ClientError::failure(&request, f, self.timeouts.connect))?
                }
            };
            match attempt.run(conn).await {
                Ok((exchange, answer)) => {
                    return ClientResponse::new(
                        exchange,
                        answer,
                        pool,
                        request,
                        self.timeouts.body,
                        self.max_body,
                    )
                }
                Err(Failed::Exchange(e))
                    if reused && !e.response_started && idempotent && !fresh_only =>
                {
                    fresh_only = true;
                }
                Err(Failed::Exchange(e)) => {
                    return Err(ClientError::failure(
                        &request,
                        e.failure,
                        self.timeouts.connect,
                    ))
                }
                Err(Failed::Timeout(op, after)) => {
                    return Err(ClientError::timeout(&request, op, after))
                }
            }
        }
    }

    /// The request's bytes: the request line, `Host`, the fields given,
    /// the framing and the body.
    fn wire(&self, url: &Url) -> Bytes {
        let method = self.request.method.as_bytes();
        let body = self.body.as_deref().unwrap_or_default();
        let mut out = Vec::with_capacity(64 + url.target.len() + self.fields.len() + body.len());
        out.extend_from_slice(method);
        out.push(b' ');
        out.extend_from_slice(url.target.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\n");
        if !self.has_host {
            out.extend_from_slice(b"Host: ");
            out.extend_from_slice(url.authority.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(&self.fields);
        // RFC 9110 §8.6: no Content-Length on a request without content
        // unless its method anticipates some.
        if self.body.is_some() || matches!(method, b"POST" | b"PUT" | b"PATCH") {
            out.extend_from_slice(b"Content-Length: ");
            write_decimal(&mut out, body.len() as u64);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body);
        out.into()
    }

    /// The addresses to try: the IP literal, or the name's.
    pub(super) async fn resolve(&self, url: &Url) -> Result<Rc<[SocketAddr]>, ClientError> {
        if let Some(ip) = url.ip {
            return Ok(Rc::new([SocketAddr::new(ip, url.port)]));
        }
        let resolver = self.client.resolver();
        let after = self.timeouts.resolve;
        match timeout(after, resolver.resolve(&url.host, url.port)).await {
            Ok(Ok(addrs)) => Ok(addrs),
            Ok(Err(why)) => Err(ClientError::resolve(&self.request, why.to_string())),
            Err(_) => Err(ClientError::timeout(&self.request, Op::Resolve, after)),
        }
    }
}

/// Why an attempt failed.
enum Failed {
    /// Sending or reading failed; retried if nothing of a response came.
    Exchange(ExchangeError),
    /// A stage's timeout passed: never retried, the server may be busy on
    /// the request.
    Timeout(Op, Duration),
}

/// What each attempt of a request sends and how it reads the answer.
struct Attempt {
    wire: Bytes,
    limits: ResponseLimits,
    head_only: bool,
    timeouts: Timeouts,
}

impl Attempt {
    /// Writes the request on `conn` and reads the response's head: the
    /// exchange, and the answer when the whole response came with it.
    async fn run(&self, conn: Stream) -> Result<(Exchange, Option<Answer>), Failed> {
        let write = self.timeouts.write;
        match timeout(write, conn.write_all(self.wire.clone())).await {
            Ok((Ok(()), _)) => {}
            Ok((Err(e), _)) => return Err(Failed::Exchange(ExchangeError::send_failed(&e))),
            Err(_) => return Err(Failed::Timeout(Op::Write, write)),
        }
        let mut exchange = Exchange::sent(conn, Vec::new(), self.limits, self.head_only);
        let head = self.timeouts.head;
        match timeout(head, poll_fn(|cx| poll_head(&mut exchange, cx))).await {
            Ok(Ok(answer)) => Ok((exchange, answer)),
            Ok(Err(e)) => Err(Failed::Exchange(e)),
            Err(_) => Err(Failed::Timeout(Op::ReadHead, head)),
        }
    }
}

/// Reads until the final response's head is in; the answer too when the
/// response is complete with it.
fn poll_head(
    exchange: &mut Exchange,
    cx: &mut Context<'_>,
) -> Poll<Result<Option<Answer>, ExchangeError>> {
    loop {
        if exchange.head().is_some() {
            return Poll::Ready(Ok(None));
        }
        if let Some(answer) = ready!(exchange.poll_step(cx))? {
            return Poll::Ready(Ok(Some(answer)));
        }
    }
}

/// A connection to the first of `addrs` that takes one, in their order,
/// all within `within`. A refused address moves on to the next; a timeout
/// or a failed TLS handshake ends it.
pub(super) async fn connect_any(
    addrs: &[SocketAddr],
    tls: Option<TlsTo<'_>>,
    within: Duration,
) -> Result<Stream, Failure> {
    let deadline = now().checked_add(within);
    let mut last = Failure::Connect(IoFailure::from(&std::io::Error::from(
        std::io::ErrorKind::AddrNotAvailable,
    )));
    for &addr in addrs {
        let left = deadline.map_or(within, |end| end.saturating_duration_since(now()));
        if left.is_zero() {
            return Err(Failure::ConnectTimeout);
        }
        match connect(&Endpoint::Tcp(addr), tls, left).await {
            Ok(conn) => return Ok(conn),
            Err(f @ (Failure::ConnectTimeout | Failure::Tls(_))) => return Err(f),
            Err(f) => last = f,
        }
    }
    Err(last)
}
