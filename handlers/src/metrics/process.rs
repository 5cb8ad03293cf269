//! The process's own facts for the metrics: open file descriptors,
//! resident memory, start time, read from `/proc/self` at each scrape
//! (a few small files: the scrape's cost, not the cores').

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a scrape reports about the process.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Process {
    pub(super) open_fds: Option<u64>,
    pub(super) max_fds: Option<u64>,
    pub(super) resident_bytes: Option<u64>,
}

impl Process {
    pub(super) fn now() -> Self {
        Self {
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|dir| dir.count() as u64),
            max_fds: max_fds(),
            resident_bytes: resident_bytes(),
        }
    }
}

/// The soft limit on open files (`RLIMIT_NOFILE`), from `/proc/self/limits`.
fn max_fds() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// The resident set, from `/proc/self/status` (`VmRSS`, in KiB).
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Seconds since the Unix epoch of `at` (the start, for
/// `process_start_time_seconds`).
pub(super) fn unix_seconds(at: SystemTime) -> f64 {
    at.duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs_f64()
}
