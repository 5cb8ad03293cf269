//! Metrics in Prometheus's text format, and the health checks a load
//! balancer asks: [`Metrics`] gathers a server's counters (the framework's
//! per core and per listener, the HTTP layer's with its latency
//! histograms, the WebSocket layer's, the fan-out proxy's) and the process's facts; [`Admin`]
//! serves them at `/metrics`, with `/healthz` and `/readyz`.
//!
//! A scrape never stalls a core: every counter has one writer, its core,
//! and the scrape reads them all with relaxed atomic loads on whichever
//! core (or thread) serves it. No lock is taken after start-up; each
//! core's readers are registered once, by the factory on that core.

mod admin;
mod families;
mod process;
mod text;
mod ws;

use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime};

use percore::runtime::HistogramSnapshot;
use percore::{CoreContext, Readiness, StatsReader};

use crate::http::{HttpStats, HttpStatsReader};
use crate::proxy::{ProxyStats, ProxyStatsReader};
use crate::ws::{WsStats, WsStatsReader};
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
    ws: CoreSlots<WsStatsReader>,
    started: Instant,
    started_at: SystemTime,
    /// The shed requests of every core at the last `/readyz` answer.
    shed_seen: std::sync::atomic::AtomicU64,
}

/// One reader per core, by the core's index: sized by the first core to
/// register, set once per core (a second reader for the same core, from
/// another listener's factory, is ignored), then read without a lock.
#[derive(Debug)]
struct CoreSlots<R>(OnceLock<Box<[Slot<R>]>>);

/// A core's CPU and reader, once registered.
type Slot<R> = OnceLock<(usize, R)>;

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
            ws: CoreSlots::default(),
            started: Instant::now(),
            started_at: SystemTime::now(),
            shed_seen: std::sync::atomic::AtomicU64::new(0),
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

    /// Registers a core's WebSocket counters (from the factory, on the
    /// core: [`ws::stats_reader`](crate::ws::stats_reader) reads the
    /// core it is called on).
    pub fn register_ws(&self, core: &CoreContext, reader: WsStatsReader) {
        self.0.ws.register(core, reader);
    }

    /// Whether the server wants traffic (`/readyz`).
    pub fn readiness(&self) -> &Readiness {
        &self.0.readiness
    }

    /// Whether any core's HTTP layer shed requests (see
    /// [`Config::shed_queue_delay`](crate::http::Config::shed_queue_delay))
    /// since the last call: what `/readyz` answers `overloaded` for.
    pub fn shed_since_last_check(&self) -> bool {
        let shed: u64 = self.0.http.each().map(|(_, r)| r.snapshot().shed).sum();
        let seen = self
            .0
            .shed_seen
            .swap(shed, std::sync::atomic::Ordering::Relaxed);
        shed > seen
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
            families::framework(&mut text, &server.snapshot());
            families::listeners(&mut text, server);
            families::steering(&mut text, server);
        }
        let http: Vec<(String, HttpStats, HistogramSnapshot)> = shared
            .http
            .each()
            .map(|(cpu, r)| (cpu.to_string(), r.snapshot(), r.latency()))
            .collect();
        if !http.is_empty() {
            families::http(&mut text, &http);
        }
        let proxy: Vec<(String, ProxyStats)> = shared
            .proxy
            .each()
            .map(|(cpu, r)| (cpu.to_string(), r.snapshot()))
            .collect();
        if !proxy.is_empty() {
            families::proxy(&mut text, &proxy);
        }
        let ws: Vec<(String, WsStats)> = shared
            .ws
            .each()
            .map(|(cpu, r)| (cpu.to_string(), r.snapshot()))
            .collect();
        if !ws.is_empty() {
            ws::ws(&mut text, &ws);
        }
        process(&mut text, shared);
    }
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
