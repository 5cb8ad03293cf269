//! percore-benches: the `cargo bench` harness that compares percore's
//! executors (io_uring and epoll) with tokio baselines on the same
//! workloads, alternated round-robin within one run, on one server CPU and
//! one client CPU of this machine.
//!
//! What it measures: echo latency and throughput over loopback TCP and over
//! a Unix socket file, streaming echo, HTTP keep-alive request rates
//! (closed loop and open loop with coordinated-omission-free latencies),
//! accept churn, fan-out through the proxy, HTTPS keep-alive requests and
//! full TLS handshakes, and a small JSON API (the `json_api` example
//! against its axum twin, `axum_api`); per cell the median,
//! its coefficient of variation, the ratio to tokio-ct with a noise verdict,
//! server CPU time and allocations per operation. What it does not: measure
//! real networks, multi-core scaling (one server CPU; see `benches/wrk.sh`
//! for wrk against the example servers), or produce marketing numbers — it
//! is a regression signal on a noisy VM.
//!
//! The library holds the reusable parts so they are unit-testable; the
//! bench target `benches/executors.rs` only parses arguments, runs and
//! writes the report.

pub mod alloc;
pub mod api_servers;
pub mod baseline_http;
pub mod chart;
pub mod cli;
pub mod client;
pub mod file_io;
pub mod h2_baseline;
pub mod harness;
pub mod http;
pub mod pair;
#[cfg(feature = "percore")]
pub mod percore_servers;
pub mod probe;
pub mod report;
pub mod scratch;
pub mod server;
pub mod signals;
pub mod stats;
pub mod summary;
pub mod sys;
pub mod target;
pub mod tls;
pub mod tokio_fanout;
pub mod tokio_servers;
mod tokio_unix;
