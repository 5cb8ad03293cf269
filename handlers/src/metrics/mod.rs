//! Metrics in Prometheus's text format, and the health checks a load
//! balancer asks: [`Metrics`] gathers a server's counters (the framework's
//! per core and per listener, the HTTP layer's with its latency
//! histograms, the fan-out proxy's) and the process's facts; [`Admin`]
//! serves them at `/metrics`, with `/healthz` and `/readyz`.
//!
//! A scrape never stalls a core: every counter has one writer, its core,
//! and the scrape reads them all with relaxed atomic loads on whichever
//! core (or thread) serves it. No lock is taken after start-up; each
//! core's readers are registered once, by the factory on that core.

mod admin;
mod process;
mod text;

use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime};

use percore::runtime::HistogramSnapshot;
use percore::{CoreContext, Readiness, StatsReader, StatsSnapshot};

use crate::http::{HttpStats, HttpStatsReader};
use crate::proxy::{ProxyStats, ProxyStatsReader};
pub use admin::Admin;
use text::{Kind, Text};

/// A server's metrics, shared (cheap to clone, `Send + Sync`) between the
/// factory that registers each core's readers and whatever renders them.
///
/// # Examples
///
/// ```no_run
/// use percore::{Readiness, Server};
/// use percore_handlers::http::{HttpEcho, HttpHandler};
/// use percore_handlers::metrics::{Admin, Metrics};
///
/// let readiness = Readiness::new();
/// let metrics = Metrics::new(readiness.clone());
/// let (registry, admin) = (metrics.clone(), metrics.clone());
/// let server = Server::builder()
///     .address("127.0.0.1:8080".parse().unwrap())
///     .readiness(readiness)
///     .add_listener("127.0.0.1:9100".parse::<std::net::SocketAddr>().unwrap(), move |_core| {
///         HttpHandler::new(Admin::new(admin.clone()))
///     })
///     .start(move |core| {
///         let handler = HttpHandler::new(HttpEcho);
///         registry.register_http(core, handler.stats_reader());
///         handler
///     })
///     .unwrap();
/// metrics.set_server(server.stats_reader());
/// # drop(server);
/// ```
#[derive(Debug, Clone)]
pub struct Metrics(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    readiness: Readiness,
    server: OnceLock<StatsReader>,
    http: CoreSlots<HttpStatsReader>,
    proxy: CoreSlots<ProxyStatsReader>,
    started: Instant,
    started_at: SystemTime,
}

/// One reader per core, by the core's index: sized by the first core to
/// register, set once per core (a second reader for the same core, from
/// another listener's factory, is ignored), then read without a lock.
#[derive(Debug)]
struct CoreSlots<R>(OnceLock<Box<[OnceLock<(usize, R)>]>>);

impl<R> Default for CoreSlots<R> {
    fn default() -> Self {
        Self(OnceLock::new())
    }
}

impl<R> CoreSlots<R> {
    fn register(&self, core: &CoreContext, reader: R) {
        let slots = self
            .0
            .get_or_init(|| (0..core.cores).map(|_| OnceLock::new()).collect());
        if let Some(slot) = slots.get(core.index) {
            let _ = slot.set((core.cpu, reader));
        }
    }

    /// Each registered core's CPU and reader.
    fn each(&self) -> impl Iterator<Item = &(usize, R)> {
        self.0
            .get()
            .into_iter()
            .flat_map(|s| s.iter().filter_map(OnceLock::get))
    }
}

impl Metrics {
    /// Metrics for a server whose readiness is `readiness` (the one given
    /// to [`ServerBuilder::readiness`](percore::ServerBuilder::readiness)).
    pub fn new(readiness: Readiness) -> Self {
        Self(Arc::new(Shared {
            readiness,
            server: OnceLock::new(),
            http: CoreSlots::default(),
            proxy: CoreSlots::default(),
            started: Instant::now(),
            started_at: SystemTime::now(),
        }))
    }

    /// The server's own counters, once it has started (until then a scrape
    /// has the HTTP and proxy counters only). Set once; later calls are
    /// ignored.
    pub fn set_server(&self, server: StatsReader) {
        let _ = self.0.server.set(server);
    }

    /// Registers a core's HTTP counters (from the factory, on the core).
    pub fn register_http(&self, core: &CoreContext, reader: HttpStatsReader) {
        self.0.http.register(core, reader);
    }

    /// Registers a core's fan-out proxy counters (from the factory).
    pub fn register_proxy(&self, core: &CoreContext, reader: ProxyStatsReader) {
        self.0.proxy.register(core, reader);
    }

    /// Whether the server wants traffic (`/readyz`).
    pub fn readiness(&self) -> &Readiness {
        &self.0.readiness
    }

    /// Every metric now, in Prometheus's text format, appended to `out`.
    pub fn render(&self, out: &mut Vec<u8>) {
        let mut text = Text(out);
        let shared = &self.0;
        text.family(
            "percore_ready",
            Kind::Gauge,
            "1 when the server wants traffic (/readyz), else 0.",
        );
        text.sample("percore_ready", &[], u8::from(shared.readiness.is_ready()));
        if let Some(server) = shared.server.get() {
            framework(&mut text, &server.snapshot());
            listeners(&mut text, server);
        }
        let http: Vec<(String, HttpStats, HistogramSnapshot)> = shared
            .http
            .each()
            .map(|(cpu, r)| (cpu.to_string(), r.snapshot(), r.latency()))
            .collect();
        if !http.is_empty() {
            http_families(&mut text, &http);
        }
        let proxy: Vec<(String, ProxyStats)> = shared
            .proxy
            .each()
            .map(|(cpu, r)| (cpu.to_string(), r.snapshot()))
            .collect();
        if !proxy.is_empty() {
            proxy_families(&mut text, &proxy);
        }
        process(&mut text, shared);
    }
}

/// A family with one sample per core: `(name, kind, help, value)`.
type PerCore<T> = (&'static str, Kind, &'static str, fn(&T) -> f64);

fn per_core<T>(text: &mut Text<'_>, rows: &[(String, T)], families: &[PerCore<T>]) {
    for &(name, kind, help, value) in families {
        text.family(name, kind, help);
        for (core, row) in rows {
            text.sample(name, &[("core", core)], value(row));
        }
    }
}

fn framework(text: &mut Text<'_>, cores: &[StatsSnapshot]) {
    text.family(
        "percore_core_info",
        Kind::Gauge,
        "A core's backend and io_uring set-up flags (none on epoll).",
    );
    for s in cores {
        let core = s.cpu.to_string();
        let backend = s.backend.to_string();
        let labels = [
            ("core", core.as_str()),
            ("backend", &backend),
            ("ring_flags", s.ring_flags.unwrap_or("none")),
        ];
        text.sample("percore_core_info", &labels, 1);
    }
    let rows: Vec<(String, StatsSnapshot)> = cores
        .iter()
        .map(|s| (s.cpu.to_string(), s.clone()))
        .collect();
    use Kind::{Counter as C, Gauge as G};
    let families: &[PerCore<StatsSnapshot>] = &[
        (
            "percore_connections_accepted_total",
            C,
            "Connections accepted.",
            |s| s.accepted as f64,
        ),
        ("percore_connections_active", G, "Connections open.", |s| {
            s.active as f64
        }),
        (
            "percore_requests_total",
            C,
            "Requests served (every listener's).",
            |s| s.requests as f64,
        ),
        ("percore_received_bytes_total", C, "Bytes received.", |s| {
            s.bytes_in as f64
        }),
        ("percore_sent_bytes_total", C, "Bytes sent.", |s| {
            s.bytes_out as f64
        }),
        (
            "percore_accept_errors_total",
            C,
            "Accept failures other than fd exhaustion.",
            |s| s.errors_accept as f64,
        ),
        (
            "percore_fd_limit_errors_total",
            C,
            "Accepts refused for lack of file descriptors.",
            |s| s.errors_fd_limit as f64,
        ),
        (
            "percore_io_errors_total",
            C,
            "Connections that ended with an I/O error.",
            |s| s.errors_io as f64,
        ),
        (
            "percore_driver_errors_total",
            C,
            "Failed io_uring_enter or epoll_wait calls.",
            |s| s.errors_driver as f64,
        ),
        (
            "percore_panics_total",
            C,
            "Panics caught in the core's tasks.",
            |s| s.panics as f64,
        ),
        (
            "percore_buffer_exhausted_total",
            C,
            "Receives that found the buffer ring empty.",
            |s| s.buffer_exhausted as f64,
        ),
        (
            "percore_read_pauses_total",
            C,
            "Multishot operations paused for a slow consumer.",
            |s| s.backpressure_pauses as f64,
        ),
        (
            "percore_multishot_rearms_total",
            C,
            "Multishot operations that ended and were re-armed.",
            |s| s.multishot_ended as f64,
        ),
        (
            "percore_bulk_reads_total",
            C,
            "Connections switched to single-shot reads (bulk streams).",
            |s| s.bulk_reads as f64,
        ),
        (
            "percore_accept_pauses_total",
            C,
            "Times accepting paused at the connection limit.",
            |s| s.accept_paused as f64,
        ),
        (
            "percore_closed_unserved_total",
            C,
            "Connections closed unserved at a stop (connection limit).",
            |s| s.closed_unserved as f64,
        ),
        (
            "percore_tls_handshakes_total",
            C,
            "TLS handshakes completed.",
            |s| s.tls_handshakes as f64,
        ),
        (
            "percore_tls_failures_total",
            C,
            "TLS handshakes failed or timed out.",
            |s| s.tls_failures as f64,
        ),
        (
            "percore_tls_handshake_cpu_seconds_total",
            C,
            "CPU time spent in TLS handshakes.",
            |s| s.tls_handshake_time.as_secs_f64(),
        ),
        (
            "percore_sqes_submitted_total",
            C,
            "io_uring submission queue entries submitted.",
            |s| s.submissions as f64,
        ),
        (
            "percore_enters_total",
            C,
            "io_uring_enter or epoll_wait calls.",
            |s| s.enters as f64,
        ),
        (
            "percore_batched_waits_total",
            C,
            "Waits that held out for a batch of completions.",
            |s| s.batched_waits as f64,
        ),
        (
            "percore_syscalls_total",
            C,
            "Other I/O syscalls made directly (epoll).",
            |s| s.syscalls as f64,
        ),
        (
            "percore_ops_in_flight",
            G,
            "io_uring operations in flight at the last loop turn.",
            |s| s.in_flight as f64,
        ),
        (
            "percore_ring_buffers_out",
            G,
            "Provided-ring buffers outside the ring at the last loop turn.",
            |s| s.ring_buffers_out as f64,
        ),
        (
            "percore_cpu_seconds_total",
            C,
            "CPU time the core's thread has used.",
            |s| s.cpu_time.as_secs_f64(),
        ),
    ];
    per_core(text, &rows, families);
}

fn listeners(text: &mut Text<'_>, server: &StatsReader) {
    let all = server.listeners();
    text.family(
        "percore_listener_connections_accepted_total",
        Kind::Counter,
        "Connections accepted, per listener (all cores).",
    );
    for l in &all {
        text.sample(
            "percore_listener_connections_accepted_total",
            &[("listener", &l.addr.to_string())],
            l.accepted,
        );
    }
    text.family(
        "percore_listener_connections_active",
        Kind::Gauge,
        "Connections open, per listener (all cores).",
    );
    for l in &all {
        text.sample(
            "percore_listener_connections_active",
            &[("listener", &l.addr.to_string())],
            l.active,
        );
    }
}

fn http_families(text: &mut Text<'_>, cores: &[(String, HttpStats, HistogramSnapshot)]) {
    let name = "percore_http_responses_total";
    text.family(name, Kind::Counter, "HTTP responses sent, by status class.");
    for (core, s, _) in cores {
        for (class, n) in [
            ("2xx", s.status_2xx),
            ("3xx", s.status_3xx),
            ("4xx", s.status_4xx),
            ("5xx", s.status_5xx),
        ] {
            text.sample(name, &[("core", core), ("class", class)], n);
        }
    }
    let rows: Vec<(String, HttpStats)> = cores.iter().map(|(c, s, _)| (c.clone(), *s)).collect();
    use Kind::Counter as C;
    let families: &[PerCore<HttpStats>] = &[
        (
            "percore_http_refused_total",
            C,
            "Requests the HTTP layer refused (400, 413, 414, 417, 431, 501, 505).",
            |s| s.refused as f64,
        ),
        (
            "percore_http_timeouts_total",
            C,
            "Request heads or bodies too slow (408).",
            |s| s.timeouts as f64,
        ),
        (
            "percore_http_service_errors_total",
            C,
            "Service calls that failed with a 5xx or panicked.",
            |s| s.service_errors as f64,
        ),
        (
            "percore_http_cut_off_total",
            C,
            "Service calls cut off by a stop (503).",
            |s| s.cut_off as f64,
        ),
    ];
    per_core(text, &rows, families);
    let name = "percore_http_request_duration_seconds";
    text.family(
        name,
        Kind::Histogram,
        "Time from the read that brought a request to its response in the output.",
    );
    for (core, _, latency) in cores {
        text.histogram(name, &[("core", core)], latency);
    }
}

fn proxy_families(text: &mut Text<'_>, rows: &[(String, ProxyStats)]) {
    use Kind::Counter as C;
    let families: &[PerCore<ProxyStats>] = &[
        (
            "percore_proxy_requests_total",
            C,
            "Fanned-out client requests.",
            |s| s.requests as f64,
        ),
        (
            "percore_proxy_failed_total",
            C,
            "Client requests answered 502 or 504.",
            |s| s.failed as f64,
        ),
        (
            "percore_proxy_failed_504_total",
            C,
            "Client requests answered 504.",
            |s| s.failed_504 as f64,
        ),
        (
            "percore_proxy_sub_requests_total",
            C,
            "Sub-requests sent, retries included.",
            |s| s.sub_requests as f64,
        ),
        (
            "percore_proxy_connects_total",
            C,
            "Upstream connections begun.",
            |s| s.connects as f64,
        ),
        (
            "percore_proxy_reuses_total",
            C,
            "Sub-requests sent on a pooled connection.",
            |s| s.reuses as f64,
        ),
        (
            "percore_proxy_retries_total",
            C,
            "Automatic retries.",
            |s| s.retries as f64,
        ),
        (
            "percore_proxy_connect_errors_total",
            C,
            "Upstream connect failures.",
            |s| s.errors_connect as f64,
        ),
        (
            "percore_proxy_exchange_errors_total",
            C,
            "Upstream exchanges that failed.",
            |s| s.errors_exchange as f64,
        ),
        (
            "percore_proxy_deadline_total",
            C,
            "Branches still running at the request deadline.",
            |s| s.deadline as f64,
        ),
        (
            "percore_proxy_cancelled_total",
            C,
            "Branches cancelled by a decided policy.",
            |s| s.cancelled as f64,
        ),
        (
            "percore_proxy_drained_total",
            C,
            "Cut-off branches drained and pooled again.",
            |s| s.drained as f64,
        ),
        (
            "percore_proxy_drain_closed_total",
            C,
            "Cut-off branches whose connection was closed.",
            |s| s.drain_closed as f64,
        ),
        (
            "percore_proxy_drain_workers_total",
            C,
            "Drain workers started.",
            |s| s.drain_workers as f64,
        ),
        (
            "percore_proxy_stopped_total",
            C,
            "Client requests cut off by a stop.",
            |s| s.stopped as f64,
        ),
        (
            "percore_proxy_loops_total",
            C,
            "Client requests answered 508 (a loop).",
            |s| s.loops as f64,
        ),
        (
            "percore_proxy_upstream_5xx_total",
            C,
            "Sub-requests answered with a 5xx.",
            |s| s.upstream_5xx as f64,
        ),
        (
            "percore_proxy_ejections_total",
            C,
            "Upstreams ejected.",
            |s| s.ejections as f64,
        ),
        (
            "percore_proxy_all_ejected_total",
            C,
            "Client requests answered 503, every upstream ejected.",
            |s| s.all_ejected as f64,
        ),
        (
            "percore_proxy_rejected_pending_total",
            C,
            "Client requests answered 503 by the pending-request breaker.",
            |s| s.rejected_pending as f64,
        ),
        (
            "percore_proxy_mirrored_total",
            C,
            "Mirror copies answered below 500.",
            |s| s.mirrored as f64,
        ),
        (
            "percore_proxy_mirror_failed_total",
            C,
            "Mirror copies that failed.",
            |s| s.mirror_failed as f64,
        ),
        (
            "percore_proxy_mirror_dropped_total",
            C,
            "Mirror copies not sent (too many pending).",
            |s| s.mirror_dropped as f64,
        ),
    ];
    per_core(text, rows, families);
}

fn process(text: &mut Text<'_>, shared: &Shared) {
    let p = process::Process::now();
    let facts = [
        ("process_open_fds", "Open file descriptors.", p.open_fds),
        (
            "process_max_fds",
            "The limit on open file descriptors.",
            p.max_fds,
        ),
        (
            "process_resident_memory_bytes",
            "Resident memory.",
            p.resident_bytes,
        ),
    ];
    for (name, help, value) in facts {
        if let Some(value) = value {
            text.family(name, Kind::Gauge, help);
            text.sample(name, &[], value);
        }
    }
    text.family(
        "process_start_time_seconds",
        Kind::Gauge,
        "When the process started, in seconds since the Unix epoch.",
    );
    text.sample(
        "process_start_time_seconds",
        &[],
        process::unix_seconds(shared.started_at),
    );
    text.family(
        "percore_uptime_seconds",
        Kind::Gauge,
        "Seconds since the metrics were set up (the server's start).",
    );
    text.sample(
        "percore_uptime_seconds",
        &[],
        shared.started.elapsed().as_secs_f64(),
    );
}
