//! The measured window of one iteration: wall time, server CPU time and
//! process-wide allocations between `start` and `stop`.
//!
//! What it measures: exactly the span a client marks (after its connections
//! are set up and validated, until its last reply arrived). What it does
//! not: set-up cost, and CPU of server threads outside the one server under
//! test.

use std::io;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::alloc;

/// Reads the CPU seconds of the server under test.
pub type CpuReader<'a> = &'a dyn Fn() -> Option<f64>;

/// Marks the measured window of one iteration.
pub struct Probe<'a> {
    server_cpu: CpuReader<'a>,
    started: Option<(Instant, Option<f64>, u64)>,
    window: Option<Window>,
}

impl std::fmt::Debug for Probe<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe")
            .field("started", &self.started)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

/// What happened in a measured window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    /// Wall time between start and stop.
    pub elapsed: Duration,
    /// Server CPU time spent in the window, seconds (`sys::threads_cpu_seconds`).
    pub server_cpu_s: Option<f64>,
    /// Allocation calls of the whole process in the window.
    pub allocs: u64,
}

impl<'a> Probe<'a> {
    /// A probe reading server CPU with `server_cpu`.
    pub fn new(server_cpu: CpuReader<'a>) -> Probe<'a> {
        Probe {
            server_cpu,
            started: None,
            window: None,
        }
    }

    /// Opens the window. Reading /proc allocates, so the allocation counter
    /// is read after it and the clock last.
    pub fn start(&mut self) {
        let cpu = (self.server_cpu)();
        let allocs = alloc::allocations();
        self.started = Some((Instant::now(), cpu, allocs));
    }

    /// Closes the window (the clock first, /proc last).
    pub fn stop(&mut self) {
        self.stop_at(Instant::now());
    }

    /// Closes the window as of `end`, an instant already taken by the
    /// client (for instance when its last reply arrived).
    pub fn stop_at(&mut self, end: Instant) {
        let allocs = alloc::allocations();
        let cpu = (self.server_cpu)();
        if let Some((t0, cpu0, allocs0)) = self.started {
            self.window = Some(Window {
                elapsed: end.saturating_duration_since(t0),
                server_cpu_s: match (cpu0, cpu) {
                    (Some(a), Some(b)) => Some((b - a).max(0.0)),
                    _ => None,
                },
                allocs: allocs.saturating_sub(allocs0),
            });
        }
    }

    /// The closed window; an error if the client never opened or closed it.
    pub fn window(&self) -> io::Result<Window> {
        self.window
            .ok_or_else(|| io::Error::other("client did not mark its measured window"))
    }
}

/// What a client reports for one iteration.
#[derive(Debug, Default)]
pub struct Load {
    /// Operations completed (round trips, chunks, requests, connections).
    pub ops: u64,
    /// Payload bytes moved (as the workload defines them).
    pub bytes: u64,
    /// Per-request latencies in nanoseconds (open-loop runs only).
    pub latency_ns: Option<Histogram<u64>>,
    /// Requests that got no answer before the drain deadline.
    pub errors: u64,
}

/// One iteration: the client's load and the window around it.
#[derive(Debug)]
pub struct Sample {
    /// The client's report.
    pub load: Load,
    /// The measured window.
    pub window: Window,
}

impl Sample {
    /// Operations per wall-clock second.
    pub fn ops_per_s(&self) -> f64 {
        self.load.ops as f64 / self.window.elapsed.as_secs_f64().max(1e-9)
    }

    /// Bytes per wall-clock second, in MB/s (10⁶).
    pub fn mb_per_s(&self) -> f64 {
        self.load.bytes as f64 / 1e6 / self.window.elapsed.as_secs_f64().max(1e-9)
    }

    /// Mean wall time per operation, µs.
    pub fn us_per_op(&self) -> f64 {
        self.window.elapsed.as_secs_f64() * 1e6 / (self.load.ops.max(1) as f64)
    }

    /// A latency quantile (0..=1) in µs, for open-loop runs.
    pub fn latency_us(&self, q: f64) -> Option<f64> {
        let h = self.load.latency_ns.as_ref()?;
        (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1e3)
    }

    /// Server CPU µs per operation.
    pub fn server_cpu_us_per_op(&self) -> Option<f64> {
        let cpu = self.window.server_cpu_s?;
        (self.load.ops > 0).then(|| cpu * 1e6 / self.load.ops as f64)
    }
}
