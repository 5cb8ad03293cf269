//! Per-core counters of the HTTP layer: the responses it sent, by status
//! class, and why it answered requests itself. Written by their core,
//! readable from any thread (a periodic stats line, a test, a metrics
//! exporter), and logged once when the core's handler is dropped at the
//! server's stop.
//!
//! Each counter has one writer, its core: they are the framework's
//! single-writer [`Counter`](percore::runtime::Counter)s, as cheap as a
//! plain add, one or two per request.

use std::fmt;
use std::sync::Arc;

use percore::runtime::{Counter, Histogram, HistogramSnapshot};

/// A copy of one core's HTTP counters (see
/// [`HttpHandler::stats`](super::HttpHandler::stats) and
/// [`HttpStatsReader`]).
///
/// Every response the layer sends is counted once, by the class of its
/// status (`100 Continue` is not a response): the service's own, and those
/// the layer sends instead (a refused request, a timeout, a failed or
/// panicked service, a stop). The other fields say why the layer answered
/// itself; requests are counted in the core's [`percore::StatsSnapshot`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpStats {
    /// Responses with a 2xx status.
    pub status_2xx: u64,
    /// Responses with a 3xx status.
    pub status_3xx: u64,
    /// Responses with a 4xx status.
    pub status_4xx: u64,
    /// Responses with a 5xx status.
    pub status_5xx: u64,
    /// Requests refused by the layer before or instead of the service:
    /// malformed or ambiguous (400), over a limit (413, 414, 431), with an
    /// expectation it does not meet (417), or of a coding or version it
    /// does not serve (501, 505).
    pub refused: u64,
    /// Request heads or bodies that did not arrive in time (408).
    pub timeouts: u64,
    /// Service calls that failed: an error answered with a 5xx (its
    /// [`HttpError`](super::HttpError)'s status, else 500), a panic, or
    /// an error after the response's head was out. An `HttpError` with a
    /// 4xx status before that is the service refusing the request: it
    /// counts in `status_4xx` only (and is logged at debug, not WARN).
    /// Not the error of a write to a client that left or stopped reading,
    /// passed on by the service: that is the client's doing (a response
    /// whose head was out counts by its status).
    pub service_errors: u64,
    /// Service calls cut off near the drain deadline of a stop (503).
    pub cut_off: u64,
    /// Requests shed, answered 503 with `Retry-After` without calling the
    /// service, because the core was overloaded (see
    /// [`Config::shed_queue_delay`](super::Config::shed_queue_delay)).
    pub shed: u64,
    /// Refusals held until the `Retry-After` of the one before had
    /// passed, the client having asked again sooner (each is also in
    /// `shed`).
    pub shed_held: u64,
    /// Connections served with HTTP/2 (feature `h2`).
    pub h2_connections: u64,
    /// HTTP/2 connections the server ended with GOAWAY for the client's
    /// abuse: a flood of frames that carry nothing, streams reset faster
    /// than they are served (rapid reset), or a protocol error.
    pub h2_cut: u64,
    /// Requests served over HTTP/2 (one a stream); the rest of the
    /// core's requests came over HTTP/1.
    pub h2_streams: u64,
    /// HTTP/2 streams whose service call has ended: `h2_streams` less
    /// this is the streams open now.
    pub h2_streams_ended: u64,
    /// HTTP/2 streams the client reset (or lost with its connection)
    /// before their answer was out.
    pub h2_streams_reset: u64,
    /// GOAWAY frames sent: at the server's stop, to idle connections, and
    /// for abuse.
    pub h2_goaways: u64,
}

impl fmt::Display for HttpStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "2xx={} 3xx={} 4xx={} 5xx={} refused={} timeouts={} service_errors={} cut_off={} shed={} shed_held={} h2_connections={} h2_cut={} h2_streams={} h2_open={} h2_reset={} h2_goaways={}",
            self.status_2xx,
            self.status_3xx,
            self.status_4xx,
            self.status_5xx,
            self.refused,
            self.timeouts,
            self.service_errors,
            self.cut_off,
            self.shed,
            self.shed_held,
            self.h2_connections,
            self.h2_cut,
            self.h2_streams,
            self.h2_streams.saturating_sub(self.h2_streams_ended),
            self.h2_streams_reset,
            self.h2_goaways
        )
    }
}

/// Reads one core's HTTP counters from any thread: `Send`, `Sync`, cheap to
/// clone, and still readable after the handler is gone (its last values).
/// Get one from [`HttpHandler::stats_reader`](super::HttpHandler::stats_reader)
/// in the server's factory, which runs on the core.
///
/// # Examples
///
/// ```no_run
/// use std::sync::{Arc, Mutex};
/// use percore_handlers::http::{HttpEcho, HttpHandler, HttpStatsReader};
///
/// let readers: Arc<Mutex<Vec<HttpStatsReader>>> = Arc::default();
/// let registry = readers.clone();
/// let server = percore::Server::builder()
///     .address("127.0.0.1:8080".parse().unwrap())
///     .start(move |_core| {
///         let handler = HttpHandler::new(HttpEcho);
///         registry.lock().unwrap().push(handler.stats_reader());
///         handler
///     })
///     .unwrap();
/// for reader in readers.lock().unwrap().iter() {
///     println!("{}", reader.snapshot());
/// }
/// # drop(server);
/// ```
#[derive(Debug, Clone)]
pub struct HttpStatsReader(Arc<Counters>);

impl HttpStatsReader {
    /// The core's counters now (each one exact; taken one after another,
    /// so counters that move together may be a response apart).
    pub fn snapshot(&self) -> HttpStats {
        self.0.snapshot()
    }

    /// The core's request latencies now: for each response counted, the
    /// time from the read that brought its request to the response in the
    /// output (as the access log's `micros`).
    pub fn latency(&self) -> HistogramSnapshot {
        self.0.latency.snapshot()
    }
}

/// Why the layer answered a request itself, beside the status it sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    Refused,
    Timeout,
    ServiceError,
    CutOff,
    Shed,
}

impl Reason {
    /// A request the layer would not serve, answered with `status`: a
    /// head or body too slow (408), else refused.
    pub(crate) fn refusal(status: u16) -> Self {
        if status == 408 {
            Reason::Timeout
        } else {
            Reason::Refused
        }
    }
}

/// The live counters of one core, shared (`Arc`) between the core's
/// handler and any [`HttpStatsReader`]; only the core writes.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    status_2xx: Counter,
    status_3xx: Counter,
    status_4xx: Counter,
    status_5xx: Counter,
    refused: Counter,
    timeouts: Counter,
    service_errors: Counter,
    cut_off: Counter,
    shed: Counter,
    shed_held: Counter,
    h2_connections: Counter,
    h2_cut: Counter,
    pub(crate) h2_streams: Counter,
    pub(crate) h2_streams_ended: Counter,
    pub(crate) h2_streams_reset: Counter,
    pub(crate) h2_goaways: Counter,
    /// Each response's latency, from the read that brought its request.
    pub(crate) latency: Histogram,
}

impl Counters {
    /// A response with `status` went into the output. Statuses outside
    /// 200–599 (which a service may set, up to 999) count as their
    /// nearest class, so that every response is counted.
    pub(crate) fn response(&self, status: u16) {
        let class = match status {
            ..=299 => &self.status_2xx,
            300..=399 => &self.status_3xx,
            400..=499 => &self.status_4xx,
            _ => &self.status_5xx,
        };
        class.add(1);
    }

    /// The layer answered a request itself with `status`, for `reason`.
    pub(crate) fn answered(&self, status: u16, reason: Reason) {
        self.response(status);
        self.reason(reason);
    }

    /// The layer answered a request itself, for `reason`.
    pub(crate) fn reason(&self, reason: Reason) {
        let counter = match reason {
            Reason::Refused => &self.refused,
            Reason::Timeout => &self.timeouts,
            Reason::ServiceError => &self.service_errors,
            Reason::CutOff => &self.cut_off,
            Reason::Shed => &self.shed,
        };
        counter.add(1);
    }

    /// A refusal was held for its client's `Retry-After`.
    pub(crate) fn shed_held(&self) {
        self.shed_held.add(1);
    }

    /// A connection began HTTP/2.
    #[cfg(feature = "h2")]
    pub(crate) fn h2_connection(&self) {
        self.h2_connections.add(1);
    }

    /// An HTTP/2 connection was ended for the client's abuse.
    #[cfg(feature = "h2")]
    pub(crate) fn h2_cut(&self) {
        self.h2_cut.add(1);
    }

    pub(crate) fn snapshot(&self) -> HttpStats {
        HttpStats {
            status_2xx: self.status_2xx.get(),
            status_3xx: self.status_3xx.get(),
            status_4xx: self.status_4xx.get(),
            status_5xx: self.status_5xx.get(),
            refused: self.refused.get(),
            timeouts: self.timeouts.get(),
            service_errors: self.service_errors.get(),
            cut_off: self.cut_off.get(),
            shed: self.shed.get(),
            shed_held: self.shed_held.get(),
            h2_connections: self.h2_connections.get(),
            h2_cut: self.h2_cut.get(),
            h2_streams: self.h2_streams.get(),
            h2_streams_ended: self.h2_streams_ended.get(),
            h2_streams_reset: self.h2_streams_reset.get(),
            h2_goaways: self.h2_goaways.get(),
        }
    }

    /// A reader of these counters for other threads.
    pub(crate) fn reader(self: &Arc<Self>) -> HttpStatsReader {
        HttpStatsReader(self.clone())
    }
}
