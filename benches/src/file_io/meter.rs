//! [`Meter`]: wall-clock and process CPU time around the timed parts of a
//! cell, and the [`Sample`] it gives.

use std::time::{Duration, Instant};

/// CPU time of the whole process so far: every thread, the ones a
/// runtime keeps for blocking calls included.
pub fn process_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "CLOCK_PROCESS_CPUTIME_ID is always there on Linux");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Sums wall-clock and CPU time over the stretches between
/// [`start`](Meter::start) and [`stop`](Meter::stop), and counts what they
/// did.
#[derive(Debug, Default)]
pub struct Meter {
    wall: Duration,
    cpu: Duration,
    started: Option<(Instant, Duration)>,
    ops: u64,
    bytes: u64,
    fallbacks: u64,
}

impl Meter {
    /// A meter with nothing measured.
    pub fn new() -> Meter {
        Meter::default()
    }

    /// Starts a timed stretch.
    pub fn start(&mut self) {
        debug_assert!(self.started.is_none(), "start twice");
        self.started = Some((Instant::now(), process_cpu()));
    }

    /// Ends the timed stretch, which did `ops` operations moving `bytes`.
    pub fn stop(&mut self, ops: u64, bytes: u64) {
        let cpu = process_cpu();
        let (wall, cpu0) = self.started.take().expect("stop after start");
        self.wall += wall.elapsed();
        self.cpu += cpu.saturating_sub(cpu0);
        self.ops += ops;
        self.bytes += bytes;
    }

    /// Counts `n` reads that a fast path could not serve.
    pub fn fallbacks(&mut self, n: u64) {
        self.fallbacks += n;
    }

    /// What was measured.
    pub fn sample(&self) -> Sample {
        Sample {
            wall: self.wall,
            cpu: self.cpu,
            ops: self.ops,
            bytes: self.bytes,
            fallbacks: self.fallbacks,
        }
    }
}

/// One run of one cell.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Wall-clock time of the timed stretches.
    pub wall: Duration,
    /// Process CPU time in them.
    pub cpu: Duration,
    /// Operations (calls, or opens with their closes).
    pub ops: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Reads of `uring+nowait` that `RWF_NOWAIT` could not serve and the
    /// ring did.
    pub fallbacks: u64,
}

impl Sample {
    /// MB/s (10^6 bytes) if `in_bytes`, else operations per second.
    pub fn rate(&self, in_bytes: bool) -> f64 {
        let secs = self.wall.as_secs_f64().max(1e-9);
        if in_bytes {
            self.bytes as f64 / 1e6 / secs
        } else {
            self.ops as f64 / secs
        }
    }

    /// Process CPU microseconds per operation.
    pub fn cpu_us_per_op(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.ops.max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_stretches() {
        let mut m = Meter::new();
        m.start();
        m.stop(2, 100);
        m.start();
        m.stop(3, 50);
        let s = m.sample();
        assert_eq!((s.ops, s.bytes), (5, 150));
        assert!(process_cpu() > Duration::ZERO);
    }
}
