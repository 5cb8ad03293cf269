//! The workload catalogue: run modes (quick and full), the jobs of every
//! category with their metrics, and the constants that shape them.
//!
//! The `https` category runs HTTP over TLS on every executor (percore's
//! own TLS, tokio-rustls for the tokio baselines, the same rustls and
//! *ring* on both sides): `keepalive` measures requests over kept-alive
//! connections as `http_server/concurrent` does in the clear, `handshake`
//! full TLS 1.3 handshakes, one request per connection, and the server
//! CPU each one costs.
//!
//! The `h2_server` category runs HTTP/2 GETs in the clear (prior
//! knowledge) over N connections with M streams in flight on each:
//! percore's `HttpEcho` on uring and epoll, hyper's HTTP/2 server on the
//! tokio runtimes (`h2_baseline`).
//!
//! The `api` category loads a small JSON API, `GET /users/42` over 100
//! kept-alive connections: the `json_api` example on uring and epoll, its
//! axum twin `axum_api` in the tokio-ct column (see `api_servers`).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::client;
use crate::probe::{Load, Probe, Sample};
use crate::server::Service;
use crate::stats::Better;
use crate::target::Target;

/// Run lengths.
#[derive(Clone, Debug, PartialEq)]
pub struct Mode {
    /// `--quick`: every category briefly.
    pub quick: bool,
    /// Discarded rounds before the measured ones.
    pub warmup: usize,
    /// Measured rounds.
    pub iterations: usize,
    /// Length of one iteration's window (closed-loop workloads).
    pub window: Duration,
    /// Length of one open-loop iteration.
    pub open_loop_window: Duration,
    /// Open-loop request rates (requests/s).
    pub open_loop_rates: Vec<f64>,
    /// Connections of the open-loop client.
    pub open_loop_conns: usize,
    /// Whether the HTTP connection sweep (1/10/100/1000) runs.
    pub sweep: bool,
    /// Widths of the `fan_out/fork_join` workloads.
    pub fan_out_widths: Vec<usize>,
    /// Message sizes of `local_socket_latency`, bytes.
    pub local_messages: Vec<usize>,
    /// Chunk sizes of `local_socket_throughput`, bytes.
    pub local_chunks: Vec<usize>,
    /// Shapes of the `h2_server` workloads: (connections, streams in
    /// flight on each).
    pub h2_shapes: Vec<(usize, usize)>,
}

impl Mode {
    /// About 90 s on a 2-vCPU VM with four executors. The Unix-socket
    /// categories run their middle sizes only: quick mode checks that every
    /// kind of cell runs, and their TCP twins cover the extremes.
    pub fn quick() -> Mode {
        Mode {
            quick: true,
            warmup: 1,
            iterations: 5,
            window: Duration::from_millis(100),
            open_loop_window: Duration::from_millis(400),
            open_loop_rates: vec![10_000.0],
            open_loop_conns: 16,
            sweep: false,
            fan_out_widths: vec![1, 4, 16],
            local_messages: vec![64],
            local_chunks: vec![64 << 10],
            h2_shapes: vec![(1, 1), (16, 10)],
        }
    }

    /// Under 15 minutes on a 2-vCPU VM with four executors.
    pub fn full() -> Mode {
        Mode {
            quick: false,
            warmup: 1,
            iterations: 9,
            window: Duration::from_millis(350),
            open_loop_window: Duration::from_millis(1500),
            open_loop_rates: vec![10_000.0, 40_000.0],
            open_loop_conns: 32,
            sweep: true,
            fan_out_widths: vec![1, 4, 16, 64],
            local_messages: vec![1, 64, 1 << 10],
            local_chunks: vec![4 << 10, 64 << 10, 1 << 20],
            h2_shapes: vec![(1, 1), (1, 10), (16, 10), (100, 10)],
        }
    }

    /// One line for the report.
    pub fn describe(&self) -> String {
        let sizes = |v: &[usize]| {
            v.iter()
                .map(|&b| size_name(b))
                .collect::<Vec<_>>()
                .join("/")
        };
        format!(
            "{}: {} warm-up + {} measured rounds, {} ms per iteration, open loop {} ms at {} req/s over {} connections{}, fan-out widths {}, Unix-socket messages {} and chunks {}, HTTP/2 connections x streams {}",
            if self.quick { "quick" } else { "full" },
            self.warmup,
            self.iterations,
            self.window.as_millis(),
            self.open_loop_window.as_millis(),
            self.open_loop_rates
                .iter()
                .map(|r| format!("{r:.0}"))
                .collect::<Vec<_>>()
                .join("/"),
            self.open_loop_conns,
            if self.sweep { ", HTTP connection sweep" } else { "" },
            self.fan_out_widths
                .iter()
                .map(|w| w.to_string())
                .collect::<Vec<_>>()
                .join("/"),
            sizes(&self.local_messages),
            sizes(&self.local_chunks),
            self.h2_shapes
                .iter()
                .map(|(c, m)| format!("{c}x{m}"))
                .collect::<Vec<_>>()
                .join("/")
        )
    }
}

/// One reported number of a job.
#[derive(Debug)]
pub struct Metric {
    /// Appended to the workload name (`""` for the job's only metric).
    pub suffix: &'static str,
    /// Unit of the value.
    pub unit: &'static str,
    /// Direction of improvement.
    pub better: Better,
    /// Extracts the value from one iteration.
    pub value: fn(&Sample) -> Option<f64>,
}

/// A client run: connects to the server at the target and marks its
/// window on the probe.
pub type RunFn = Box<dyn Fn(&Target, &mut Probe<'_>) -> io::Result<Load>>;

/// A client that speaks TCP only, as a [`RunFn`]: against a server on a
/// Unix socket it fails (a job given the wrong service), never measures.
fn tcp(run: impl Fn(SocketAddr, &mut Probe<'_>) -> io::Result<Load> + 'static) -> RunFn {
    Box::new(move |target, probe| run(target.tcp()?, probe))
}

/// One workload.
pub struct Job {
    /// Category (`socket_latency`, …).
    pub category: &'static str,
    /// Workload name within the category.
    pub workload: String,
    /// Which server it needs.
    pub service: Service,
    /// The client.
    pub run: RunFn,
    /// What it reports.
    pub metrics: Vec<Metric>,
    /// Requests/s an open-loop job should reach (for a sanity warning).
    pub target_rate: Option<f64>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("category", &self.category)
            .field("workload", &self.workload)
            .field("service", &self.service)
            .field("metrics", &self.metrics)
            .field("target_rate", &self.target_rate)
            .finish_non_exhaustive()
    }
}

impl Job {
    /// `category/workload`, what the command-line filter matches.
    pub fn id(&self) -> String {
        format!("{}/{}", self.category, self.workload)
    }

    /// The cells it reports, as the table names them: the id, with the
    /// metric's suffix where it has one (`open_loop/http/10k_rps/p99`).
    pub fn cells(&self) -> Vec<String> {
        self.metrics
            .iter()
            .map(|m| {
                if m.suffix.is_empty() {
                    self.id()
                } else {
                    format!("{}/{}", self.id(), m.suffix)
                }
            })
            .collect()
    }
}

fn us_per_op(s: &Sample) -> Option<f64> {
    Some(s.us_per_op())
}
fn ops_per_s(s: &Sample) -> Option<f64> {
    Some(s.ops_per_s())
}
fn mb_per_s(s: &Sample) -> Option<f64> {
    Some(s.mb_per_s())
}
fn p50(s: &Sample) -> Option<f64> {
    s.latency_us(0.50)
}
fn p99(s: &Sample) -> Option<f64> {
    s.latency_us(0.99)
}
fn p999(s: &Sample) -> Option<f64> {
    s.latency_us(0.999)
}
fn cpu_per_op(s: &Sample) -> Option<f64> {
    s.server_cpu_us_per_op()
}

fn one(unit: &'static str, better: Better, value: fn(&Sample) -> Option<f64>) -> Vec<Metric> {
    vec![Metric {
        suffix: "",
        unit,
        better,
        value,
    }]
}

pub(super) fn size_name(b: usize) -> String {
    match b {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}KiB", b >> 10),
        b => format!("{b}B"),
    }
}

/// The workloads of a run, in report order (echo services first).
pub fn jobs(mode: &Mode) -> Vec<Job> {
    let w = mode.window;
    let mut v = Vec::new();
    let mut job = |category, workload: String, service, run: RunFn, metrics| {
        v.push(Job {
            category,
            workload,
            service,
            run,
            metrics,
            target_rate: None,
        })
    };
    for size in [1usize, 64, 1024] {
        job(
            "socket_latency",
            format!("pingpong/{}", size_name(size)),
            Service::Echo,
            Box::new(move |a, p| client::pingpong(a, size, w, p)),
            one("us", Better::Lower, us_per_op),
        );
    }
    for conns in [1usize, 4, 16] {
        job(
            "socket_latency",
            format!("concurrent/{conns}"),
            Service::Echo,
            Box::new(move |a, p| client::concurrent_pingpong(a, conns, 64, w, p)),
            one("ops/s", Better::Higher, ops_per_s),
        );
    }
    for chunk in [1usize << 10, 64 << 10, 1 << 20] {
        job(
            "socket_throughput",
            format!("unidirectional/{}", size_name(chunk)),
            Service::Echo,
            Box::new(move |a, p| client::chunk_roundtrip(a, chunk, w, p)),
            one("MB/s", Better::Higher, mb_per_s),
        );
    }
    job(
        "socket_throughput",
        "bidirectional/64KiB".to_string(),
        Service::Echo,
        Box::new(move |a, p| client::bidirectional(a, 64 << 10, w, p)),
        one("MB/s", Better::Higher, mb_per_s),
    );
    // corosio's local_socket_* categories over a Unix socket file, with the
    // clients of their TCP twins above: a cell and its twin differ by the
    // transport alone. One pair runs socket_latency's blocking `pingpong`
    // client (µs per round trip), 16 its `concurrent` one (round trips/s).
    for &size in &mode.local_messages {
        for pairs in LOCAL_PAIRS {
            let (run, metrics): (RunFn, _) = if pairs == 1 {
                (
                    Box::new(move |t, p| client::pingpong(t, size, w, p)),
                    one("us", Better::Lower, us_per_op),
                )
            } else {
                (
                    Box::new(move |t, p| client::concurrent_pingpong(t, pairs, size, w, p)),
                    one("ops/s", Better::Higher, ops_per_s),
                )
            };
            job(
                "local_socket_latency",
                format!("pingpong/{}/{pairs}", size_name(size)),
                Service::UnixEcho,
                run,
                metrics,
            );
        }
    }
    for &chunk in &mode.local_chunks {
        job(
            "local_socket_throughput",
            format!("unidirectional/{}", size_name(chunk)),
            Service::UnixEcho,
            Box::new(move |t, p| client::chunk_roundtrip(t, chunk, w, p)),
            one("MB/s", Better::Higher, mb_per_s),
        );
    }
    for &chunk in &mode.local_chunks {
        job(
            "local_socket_throughput",
            format!("bidirectional/{}", size_name(chunk)),
            Service::UnixEcho,
            Box::new(move |t, p| client::bidirectional(t, chunk, w, p)),
            one("MB/s", Better::Higher, mb_per_s),
        );
    }
    for chunk in [64usize, 512, 4 << 10, 16 << 10] {
        job(
            "streaming",
            size_name(chunk),
            Service::Echo,
            tcp(move |a, p| client::streaming(a, chunk, w, p)),
            one("MB/s", Better::Higher, mb_per_s),
        );
    }
    job(
        "accept_churn",
        "sequential".to_string(),
        Service::Echo,
        tcp(move |a, p| client::churn_sequential(a, w, p)),
        one("conn/s", Better::Higher, ops_per_s),
    );
    for burst in [10usize, 100] {
        job(
            "accept_churn",
            format!("burst/{burst}"),
            Service::Echo,
            tcp(move |a, p| client::churn_burst(a, burst, w, p)),
            one("conn/s", Better::Higher, ops_per_s),
        );
    }
    job(
        "http_server",
        "single_conn".to_string(),
        Service::Http,
        tcp(move |a, p| client::http_single(a, w, p)),
        one("req/s", Better::Higher, ops_per_s),
    );
    for conns in [1usize, 4, 16, 32] {
        job(
            "http_server",
            format!("concurrent/{conns}"),
            Service::Http,
            tcp(move |a, p| client::http_concurrent(a, conns, w, p)),
            one("req/s", Better::Higher, ops_per_s),
        );
    }
    if mode.sweep {
        for conns in [1usize, 10, 100, 1000] {
            job(
                "http_server",
                format!("connections/{conns}"),
                Service::Http,
                tcp(move |a, p| client::http_concurrent(a, conns, w, p)),
                one("req/s", Better::Higher, ops_per_s),
            );
        }
    }
    for &rate in &mode.open_loop_rates {
        let (ow, conns) = (mode.open_loop_window, mode.open_loop_conns);
        v.push(Job {
            category: "open_loop",
            workload: format!("http/{}k_rps", (rate / 1000.0).round()),
            service: Service::Http,
            run: tcp(move |a, p| client::open_loop(a, conns, rate, ow, p)),
            metrics: vec![
                Metric {
                    suffix: "p50",
                    unit: "us",
                    better: Better::Lower,
                    value: p50,
                },
                Metric {
                    suffix: "p99",
                    unit: "us",
                    better: Better::Lower,
                    value: p99,
                },
                Metric {
                    suffix: "p99.9",
                    unit: "us",
                    better: Better::Lower,
                    value: p999,
                },
                Metric {
                    suffix: "server_cpu_per_req",
                    unit: "us",
                    better: Better::Lower,
                    value: cpu_per_op,
                },
            ],
            target_rate: Some(rate),
        });
    }
    for &width in &mode.fan_out_widths {
        v.push(Job {
            category: "fan_out",
            workload: format!("fork_join/{width}"),
            service: Service::FanOut { width },
            run: tcp(move |a, p| client::fan_out_single(a, width, w, p)),
            metrics: one("req/s", Better::Higher, ops_per_s),
            target_rate: None,
        });
    }
    let (parents, width) = CONCURRENT_PARENTS;
    v.push(Job {
        category: "fan_out",
        workload: "concurrent_parents".to_string(),
        service: Service::FanOut { width },
        run: tcp(move |a, p| client::fan_out_concurrent(a, parents, width, w, p)),
        metrics: one("req/s", Better::Higher, ops_per_s),
        target_rate: None,
    });
    v.push(Job {
        category: "https",
        workload: "keepalive".to_string(),
        service: Service::Https,
        run: Box::new(move |t, p| client::https_keepalive(t, HTTPS_CONNECTIONS, w, p)),
        metrics: one("req/s", Better::Higher, ops_per_s),
        target_rate: None,
    });
    v.push(Job {
        category: "https",
        workload: "handshake".to_string(),
        service: Service::Https,
        run: Box::new(move |t, p| client::https_handshakes(t, HANDSHAKE_CLIENTS, w, p)),
        metrics: vec![
            Metric {
                suffix: "",
                unit: "hs/s",
                better: Better::Higher,
                value: ops_per_s,
            },
            // The client, not the server, sets the pace on one client CPU:
            // the server's cost of a handshake is the number to compare.
            Metric {
                suffix: "server_cpu_per_handshake",
                unit: "us",
                better: Better::Lower,
                value: cpu_per_op,
            },
        ],
        target_rate: None,
    });
    // HTTP/2 by prior knowledge: `HttpEcho` on percore, hyper's server on
    // the tokio runtimes; N connections × M streams in flight each.
    for &(conns, streams) in &mode.h2_shapes {
        v.push(Job {
            category: "h2_server",
            workload: format!("streams/{conns}x{streams}"),
            service: Service::H2,
            run: tcp(move |a, p| client::h2_concurrent(a, conns, streams, w, p)),
            metrics: one("req/s", Better::Higher, ops_per_s),
            target_rate: None,
        });
    }
    // The JSON API example against its axum twin, wrk-style: many
    // kept-alive connections, each with one request in flight.
    v.push(Job {
        category: "api",
        workload: "users".to_string(),
        service: Service::Api,
        run: tcp(move |a, p| client::api_concurrent(a, API_CONNECTIONS, w, p)),
        metrics: one("req/s", Better::Higher, ops_per_s),
        target_rate: None,
    });
    v
}

/// Concurrent connections of the `local_socket_latency` ping-pongs: one
/// (corosio's `pingpong`) and 16 (the largest of its `concurrent` pairs).
pub const LOCAL_PAIRS: [usize; 2] = [1, 16];

/// `fan_out/concurrent_parents`: client connections, and the width of each
/// of their fan-outs.
pub const CONCURRENT_PARENTS: (usize, usize) = (16, 4);

/// Kept-alive connections of `https/keepalive`, each with one request in
/// flight (as `http_server/concurrent/16`).
pub const HTTPS_CONNECTIONS: usize = 16;

/// Blocking client threads of `https/handshake`: enough that the server
/// finds the next handshake waiting while a client verifies the last one.
pub const HANDSHAKE_CLIENTS: usize = 4;

/// Kept-alive connections of `api/users`, each with one request in
/// flight (`wrk -c100`).
pub const API_CONNECTIONS: usize = 100;

/// How many `HttpEcho` upstreams the fan-out proxies send to (widths above
/// it send several sub-requests to each, round-robin).
pub const FAN_OUT_UPSTREAMS: usize = 4;
