//! What the process uses, read from `/proc`: open fds, resident memory,
//! CPU time; and [`wait_until`] for state that has no notification.

use std::time::{Duration, Instant};

/// Polls `cond` (every 2 ms) until it holds; panics with `what` and the
/// last observation after `limit`. For state that has no notification
/// (counters, fd tables), not as a way to wait for a reply.
pub fn wait_until<T: std::fmt::Debug>(
    limit: Duration,
    what: &str,
    mut observe: impl FnMut() -> T,
    cond: impl Fn(&T) -> bool,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let seen = observe();
        if cond(&seen) {
            return seen;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {limit:?} waiting for {what}; last seen: {seen:?}");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Open file descriptors of this process.
pub fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

/// Waits up to `limit` for the fd count to drop to `baseline`; returns
/// the last count (the caller asserts, with [`fd_table`] in the message).
pub fn settle_fds(baseline: usize, limit: Duration) -> usize {
    let deadline = Instant::now() + limit;
    loop {
        let n = fd_count();
        if n <= baseline || Instant::now() >= deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The open fds of this process, as `fd -> target`, for leak messages.
pub fn fd_table() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|e| e.ok())
        .map(|e| {
            let target = std::fs::read_link(e.path())
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            format!("{}->{}", e.file_name().to_string_lossy(), target)
        })
        .collect();
    out.sort();
    out
}

/// `VmRSS` of process `pid` (`"self"` for this one), in KiB.
pub fn vm_rss_kib(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line")
}

/// User + system CPU time of `/proc/<path>/stat` (a process or a task), in
/// clock ticks (10 ms on Linux).
pub fn cpu_ticks(path: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{path}/stat"))
        .unwrap_or_else(|e| panic!("/proc/{path}/stat: {e}"));
    // Fields after the command name (which may contain spaces) start at
    // field 3 (state); utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').expect("stat has a command name") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

/// CPU ticks (10 ms) used so far by the core thread pinned to `cpu` (the
/// thread named `percore-<cpu>`) of a server in this process.
pub fn core_thread_ticks(cpu: usize) -> u64 {
    let name = format!("percore-{cpu}");
    let task = std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .flatten()
        .find(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .unwrap_or_default()
                .trim()
                == name
        })
        .unwrap_or_else(|| panic!("no thread named {name}"));
    cpu_ticks(&format!("self/task/{}", task.file_name().to_string_lossy()))
}
