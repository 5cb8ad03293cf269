//! Server-layer settings: the protocol [`Limits`] plus the timeouts and
//! per-connection caps that bound how long and how much one client may hold.

use std::time::Duration;

use super::proto::Limits;

/// Settings of an [`HttpHandler`](super::HttpHandler). `Default` gives the
/// defaults each field names, chosen after nginx, h2o and hyper.
///
/// Every timeout is a *total* deadline for its phase, not a per-read idle
/// gap: a client that trickles one byte a second (slowloris, R.U.D.Y.)
/// would reset a per-read timer forever.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use percore_handlers::http::Config;
///
/// let mut config = Config::default();
/// config.idle_timeout = Duration::from_secs(5);
/// config.limits.max_body = 64 * 1024;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// Size limits of request heads and bodies (414, 431, 413).
    pub limits: Limits,
    /// Time to receive a whole request head, from its first byte. When it
    /// passes the client gets 408 and the connection closes. A new
    /// connection that sends nothing at all is closed silently after this
    /// long. Default 10 s (h2o; hyper uses 30 s).
    pub head_timeout: Duration,
    /// Time to receive a whole request body, from the moment the service
    /// first waits for it; then 408 and close. Default 30 s.
    pub body_timeout: Duration,
    /// How long a kept-alive connection may sit between requests before it
    /// is closed silently (no 408: HAProxy notes that browsers mishandle a
    /// 408 on an idle connection). Default 30 s.
    pub idle_timeout: Duration,
    /// Time a write of responses may go without progress (nginx's
    /// `send_timeout`): a client that stops reading is closed (reset)
    /// after it, one that reads slowly but steadily gets the whole answer,
    /// however long. Progress is seen as the kernel takes more of the
    /// answer, which on a socket with megabytes of buffer can be a second
    /// or more apart for a slow reader: keep it well above that. On
    /// io_uring a read's answers of up to 64 KiB are written behind the
    /// connection's next read: the timeout then runs from the moment the
    /// next answer, or the connection's end, must wait for them, so a
    /// client that neither reads nor sends is closed after the idle (or
    /// head) timeout and this one. Default 30 s.
    pub write_timeout: Duration,
    /// After a response with `Connection: close` (every error answer but
    /// a service's own 4xx on a connection it keeps), how long the server
    /// keeps reading and discarding input after shutting down its write
    /// side, so that unread client bytes do not turn the close into a reset
    /// that destroys the response in flight (nginx `lingering_time`, Go's
    /// `closeWriteAndWait`). Default 5 s.
    pub linger_timeout: Duration,
    /// Requests served on one connection; the last carries
    /// `Connection: close`. Default 1000 (nginx `keepalive_requests`).
    pub max_requests: u32,
    /// Age after which a connection gets `Connection: close` on its next
    /// response. Default 1 h (nginx `keepalive_time`).
    pub max_age: Duration,
    /// When the server begins to stop, how long a connection waiting
    /// between requests stays open for one more, answered with
    /// `Connection: close`. Closing it at once would fail a request that
    /// crossed the close on the wire, which a client may not retry (it
    /// cannot know whether a `POST` was acted on). A connection that sends
    /// nothing in that time is closed; never later than shortly before the
    /// drain deadline. Default 1 s; zero closes such connections at once.
    pub stop_grace: Duration,
    /// Logs one INFO line per response under the target
    /// `percore_handlers::http::access`: the client's address, method,
    /// target (with `"`, `\` and any byte outside printable ASCII
    /// percent-encoded, so a request cannot break or forge a line), status,
    /// and the microseconds from the read that brought the request to its
    /// response. A response cut short after its head adds
    /// `incomplete=true`; a request whose client left before any response
    /// gets a line with status 499 (nginx's convention). Default off: a
    /// line per request costs more than serving it.
    pub access_log: bool,
    /// Sheds load early: once the work the core runs has waited longer
    /// than this ([`percore::waited`]: since the current loop turn
    /// began, as the requests read with it wait for the ones served
    /// before them, or since an earlier turn whose ready tasks are still
    /// queued), a new request is answered `503 Service Unavailable` with
    /// `Retry-After: 1`, without calling the service, and counted in
    /// [`HttpStats::shed`](super::HttpStats::shed). A request without a
    /// body keeps its connection (as the client asked): a refusal costs
    /// a parse and a short write; one with a body closes it, unread. A
    /// client that asks again on that connection before the second of its
    /// `Retry-After` is over, and is refused again, gets that refusal when
    /// the second ends (counted in
    /// [`HttpStats::shed_held`](super::HttpStats::shed_held)), so a
    /// client that ignores the advice costs a refusal a second, not as
    /// many as it can send; a stop ends the wait. The
    /// requests at the head of each turn are served, so a core that
    /// cannot keep up spends its time on the requests it can still
    /// answer in time, instead of every request's latency growing
    /// without bound. While the core's turns run past the bound, it also
    /// accepts no new connection on this listener
    /// ([`Handler::overload_bound`](percore::Handler::overload_bound)):
    /// they wait in the listen queue, for ten bounds at most.
    /// Default off (`None`): measuring costs a clock read per loop turn
    /// and one per request, and the right bound depends on the service
    /// (a few times its usual turn under load).
    pub shed_queue_delay: Option<Duration>,
    /// Whether a refusal asked again too soon is held (see
    /// [`shed_queue_delay`](Self::shed_queue_delay)): a client refused
    /// again on the same connection within the second its `Retry-After`
    /// asked for gets that 503 when the second ends (and up to a second
    /// more, spread so that clients refused together come back apart).
    /// Default on. Turn it off behind a balancer that pools its
    /// connections to the server: it sends the next client's request on
    /// a connection that was just refused, and the hold would delay that
    /// client a second or two instead of letting the balancer retry
    /// elsewhere at once.
    pub shed_hold: bool,
    /// HTTP/2's own limits (feature `h2`).
    pub h2: H2Limits,
}

/// The limits of an HTTP/2 connection (feature `h2`). `Default` gives
/// each field's named default, close to nginx's and hyper's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct H2Limits {
    /// Streams a client may have open at once
    /// (`SETTINGS_MAX_CONCURRENT_STREAMS`). Default 128 (nginx).
    pub max_concurrent_streams: u32,
    /// Each stream's receive window: request body bytes a client may send
    /// ahead of the service's reads. Default 256 KiB.
    pub stream_window: u32,
    /// The connection's receive window, over all its streams. Default
    /// 1 MiB.
    pub connection_window: u32,
    /// Frames a connection's output may hold, waiting to be written,
    /// before its streams' senders wait for the socket: the bound on what
    /// a client that opens its windows but does not read can make the
    /// server keep. Default 256 KiB.
    pub send_buffer: usize,
    /// Streams a client may open and reset before the server has served
    /// them (rapid reset, CVE-2023-44487), open past the concurrency
    /// limit, or open with a malformed head, net of the streams answered;
    /// then GOAWAY `ENHANCE_YOUR_CALM`. Default 20.
    pub pending_resets: usize,
    /// Streams the server may reset for the client's errors (malformed
    /// heads, flow-control and stream-state errors) before it ends the
    /// connection with GOAWAY `ENHANCE_YOUR_CALM`. Default 1,024.
    pub error_resets: usize,
    /// Bytes of frames that carry no request or response (PING,
    /// SETTINGS, WINDOW_UPDATE, PRIORITY, empty DATA, unknown types) a
    /// client may send beyond the payload that flowed both ways; then
    /// GOAWAY `ENHANCE_YOUR_CALM`. Default 1 MiB.
    pub flood_allowance: u64,
    /// Whether the server offers extended CONNECT (RFC 8441,
    /// `SETTINGS_ENABLE_CONNECT_PROTOCOL`), by which a client opens a
    /// WebSocket (or another upgrade a route accepts) on an HTTP/2
    /// stream. Off, such clients use HTTP/1.1 for them. Default on.
    pub connect_protocol: bool,
}

impl Default for H2Limits {
    fn default() -> Self {
        Self {
            max_concurrent_streams: 128,
            stream_window: 256 * 1024,
            connection_window: 1024 * 1024,
            send_buffer: 256 * 1024,
            pending_resets: 20,
            error_resets: 1024,
            flood_allowance: 1024 * 1024,
            connect_protocol: true,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            head_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            linger_timeout: Duration::from_secs(5),
            max_requests: 1000,
            max_age: Duration::from_secs(3600),
            stop_grace: Duration::from_secs(1),
            access_log: false,
            shed_queue_delay: None,
            shed_hold: true,
            h2: H2Limits::default(),
        }
    }
}
