//! Operating-system helpers of the harness: CPU pinning, per-thread CPU time,
//! machine information, the date and the output directory.
//!
//! What it measures: CPU time of selected threads of this process (or of a
//! whole server process the harness started), from each thread's (each
//! process's) CPU-time clock (nanoseconds), or where the kernel refuses it,
//! from `/proc/self/task/<tid>/stat` (utime + stime in clock ticks, usually
//! 10 ms: too coarse for a window of a few hundred milliseconds). What it does not: CPU spent by the kernel on
//! behalf of a thread outside its own accounting (softirq work for loopback
//! traffic is charged to whichever thread happened to be running), nor time
//! of threads that already exited.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Where servers and clients run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// CPU ids the servers use (one server thread per CPU).
    pub server_cpus: Vec<usize>,
    /// Every CPU this process could use at start-up.
    pub all_cpus: Vec<usize>,
    /// CPU the client threads are pinned to, if pinning is possible.
    pub client_cpu: Option<usize>,
    /// Whether pinning is done at all.
    pub pinned: bool,
    /// Human-readable description for the report.
    pub note: String,
}

impl Placement {
    /// Servers on the first available CPU, clients on the second. With a
    /// single CPU nothing is pinned and the note says so; the percore servers
    /// still need a CPU list and get that one CPU.
    pub fn detect() -> Placement {
        let ids: Vec<usize> = core_affinity::get_core_ids()
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.id)
            .collect();
        match ids.as_slice() {
            [server, client, ..] => Placement {
                server_cpus: vec![*server],
                all_cpus: ids.clone(),
                client_cpu: Some(*client),
                pinned: true,
                note: format!("servers pinned to CPU {server}, clients pinned to CPU {client}"),
            },
            [only] => Placement {
                server_cpus: vec![*only],
                all_cpus: ids.clone(),
                client_cpu: None,
                pinned: false,
                note: format!(
                    "only one CPU available ({only}): servers and clients share it, nothing pinned \
                     by the harness"
                ),
            },
            [] => Placement {
                server_cpus: vec![0],
                all_cpus: Vec::new(),
                client_cpu: None,
                pinned: false,
                note: "CPU list unavailable: nothing pinned".to_string(),
            },
        }
    }
}

impl Placement {
    /// Pins the calling thread where clients run (no-op without pinning).
    pub fn pin_client(&self) -> bool {
        self.client_cpu.is_none_or(pin_current_thread)
    }

    /// Lets the calling thread run on every CPU again, for starting servers:
    /// percore checks its CPU list against the caller's affinity, and
    /// threads inherit it.
    pub fn unpin(&self) -> bool {
        pin_current_thread_to(&self.all_cpus)
    }
}

/// Pins the calling thread to `cpu`; returns whether it worked.
pub fn pin_current_thread(cpu: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: cpu })
}

/// Restricts the calling thread to the CPUs in `cpus` (all of them, not
/// one); an empty list leaves the thread unpinned. Returns whether it worked.
pub fn pin_current_thread_to(cpus: &[usize]) -> bool {
    match cpus {
        [] => true,
        [one] => pin_current_thread(*one),
        many => {
            // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            for &cpu in many {
                // SAFETY: CPU_SET only writes inside `set`, bounds-checked by libc.
                unsafe { libc::CPU_SET(cpu, &mut set) };
            }
            // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is
            // the calling thread.
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 }
        }
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (the connection sweep
/// needs ~2 000 descriptors in this process). Returns the new soft limit.
pub fn raise_fd_limit() -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `lim` is a valid rlimit read just above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(lim.rlim_cur)
}

/// One line of `/proc/<pid>/task/<tid>/stat`, the fields the harness needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskStat {
    /// Thread name (`comm`, at most 15 bytes).
    pub comm: String,
    /// User time in clock ticks.
    pub utime: u64,
    /// System time in clock ticks.
    pub stime: u64,
}

/// Parses a `stat` line. `comm` may hold spaces and parentheses, so it is
/// everything between the first `(` and the last `)`; utime and stime are
/// fields 14 and 15 (1-based) of the line.
pub fn parse_task_stat(line: &str) -> Option<TaskStat> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let comm = line.get(open + 1..close)?.to_string();
    // After ")" come fields 3.. : state(3) ppid(4) ... utime(14) stime(15).
    let mut rest = line.get(close + 1..)?.split_ascii_whitespace();
    let utime = rest.nth(11)?.parse().ok()?;
    let stime = rest.next()?.parse().ok()?;
    Some(TaskStat { comm, utime, stime })
}

/// Thread ids of this process whose name starts with `prefix`.
pub fn threads_named(prefix: &str) -> io::Result<Vec<u32>> {
    threads_matching(&|name| name.starts_with(prefix))
}

/// Thread ids of this process whose name satisfies `pred`.
pub fn threads_matching(pred: &dyn Fn(&str) -> bool) -> io::Result<Vec<u32>> {
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc/self/task")? {
        let entry = entry?;
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        // A thread may exit between read_dir and read: skip it.
        let Ok(comm) = fs::read_to_string(entry.path().join("comm")) else {
            continue;
        };
        if pred(comm.trim_end()) {
            out.push(tid);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
pub fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Where [`threads_cpu_seconds`] reads a thread's CPU time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuClock {
    /// The thread's CPU-time clock (`clock_gettime`), nanoseconds.
    Thread,
    /// `stat`'s utime + stime, clock ticks.
    Ticks,
}

impl CpuClock {
    /// The thread clock if this kernel answers it, else ticks; decided
    /// once, so that a window never mixes the two.
    pub fn get() -> CpuClock {
        static CLOCK: std::sync::OnceLock<CpuClock> = std::sync::OnceLock::new();
        *CLOCK.get_or_init(|| {
            let me = fs::read_link("/proc/thread-self")
                .ok()
                .and_then(|p| p.file_name()?.to_str()?.parse::<u32>().ok());
            if me.and_then(thread_cpu_ns).is_some() {
                CpuClock::Thread
            } else {
                CpuClock::Ticks
            }
        })
    }
}

/// CPU time of thread `tid` of this process, in nanoseconds, from its
/// CPU-time clock: exact and current even while the thread runs, where
/// `schedstat` lags by up to a scheduler tick and `stat` counts whole
/// clock ticks. `None` if the thread exited or the kernel refuses.
pub fn thread_cpu_ns(tid: u32) -> Option<u64> {
    // The clock id of a thread's CPU time, as glibc's pthread_getcpuclockid
    // builds it: the tid inverted, shifted past the clock type bits, with
    // CPUCLOCK_SCHED (2) and the per-thread flag (4).
    let clock: libc::clockid_t = (!(tid as libc::clockid_t) << 3) | 6;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the
    // call; an unknown clock id is an error return, not undefined behaviour.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// CPU time, in seconds, of the given threads of this process (see
/// [`CpuClock`]). Threads that exited are silently left out, so read this
/// before stopping a server. `None` when `tids` is empty (nothing to
/// measure).
pub fn threads_cpu_seconds(tids: &[u32]) -> Option<f64> {
    if tids.is_empty() {
        return None;
    }
    let clock = CpuClock::get();
    let mut total = 0u64;
    for &tid in tids {
        total += match clock {
            CpuClock::Thread => thread_cpu_ns(tid),
            CpuClock::Ticks => fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
                .ok()
                .and_then(|l| parse_task_stat(&l))
                .map(|st| st.utime + st.stime),
        }
        .unwrap_or(0);
    }
    Some(match clock {
        CpuClock::Thread => total as f64 / 1e9,
        CpuClock::Ticks => total as f64 / clock_ticks_per_second(),
    })
}

/// CPU time, in seconds, of every thread of process `pid` (a server
/// binary the harness started), read the way [`CpuClock`] reads threads:
/// from the process's CPU-time clock, which the kernel lets any process
/// read, or from `/proc/<pid>/stat` in clock ticks. `None` once the process
/// is gone.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    match CpuClock::get() {
        CpuClock::Thread => {
            // As glibc's clock_getcpuclockid builds it: the pid inverted,
            // shifted past the clock type bits, with CPUCLOCK_SCHED (2).
            let clock: libc::clockid_t = (!(pid as libc::clockid_t) << 3) | 2;
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is a valid, writable timespec for the duration
            // of the call; an unknown clock id is an error return.
            if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
                return None;
            }
            Some(ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9)
        }
        CpuClock::Ticks => fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|l| parse_task_stat(&l))
            .map(|st| (st.utime + st.stime) as f64 / clock_ticks_per_second()),
    }
}

/// Machine description for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineInfo {
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: String,
    /// Number of CPUs available to this process.
    pub nproc: usize,
    /// `uname -r`.
    pub kernel: String,
}

impl MachineInfo {
    /// Reads /proc; unknown fields become "unknown".
    pub fn detect() -> MachineInfo {
        let cpu_model = fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".to_string());
        let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
        let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".to_string());
        MachineInfo {
            cpu_model,
            nproc,
            kernel,
        }
    }
}

/// Civil date (year, month, day) of a count of days since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Current UTC time as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_now_string() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        sod / 3600,
        (sod % 3600) / 60
    )
}

/// Output directory `<target>/percore-bench`, from the bench target's
/// `CARGO_TARGET_TMPDIR` (`<target>/tmp`): cargo sets it when it builds a
/// bench, to the target directory it builds in, however that was chosen
/// (`CARGO_TARGET_DIR`, `--target-dir`, a config file).
pub fn output_dir(target_tmpdir: &Path) -> PathBuf {
    target_tmpdir
        .parent()
        .unwrap_or(target_tmpdir)
        .join("percore-bench")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_comm() {
        let line = "1234 (tokio ct) x) S 1 1234 1234 0 -1 4194368 100 0 0 0 \
                    57 13 0 0 20 0 1 0 100 0 0";
        let st = parse_task_stat(line).unwrap();
        assert_eq!(st.comm, "tokio ct) x");
        assert_eq!(st.utime, 57);
        assert_eq!(st.stime, 13);
        assert!(parse_task_stat("garbage").is_none());
    }

    #[test]
    fn reads_own_threads() {
        let st = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        assert!(parse_task_stat(&st).is_some());
        let me = threads_named("").unwrap();
        assert!(!me.is_empty());
        assert!(threads_cpu_seconds(&me).is_some());
        assert!(threads_cpu_seconds(&[]).is_none());
    }

    #[test]
    fn cpu_time_has_sub_tick_resolution() {
        assert_eq!(CpuClock::get(), CpuClock::Thread);
        let link = fs::read_link("/proc/thread-self").unwrap();
        let tid: u32 = link.file_name().unwrap().to_str().unwrap().parse().unwrap();
        for _ in 0..5 {
            let before = threads_cpu_seconds(&[tid]).unwrap();
            // 2 ms of work: a fifth of a clock tick, which ticks could miss.
            let t0 = std::time::Instant::now();
            let mut x = 0u64;
            while t0.elapsed() < std::time::Duration::from_millis(2) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            let spent = threads_cpu_seconds(&[tid]).unwrap() - before;
            assert!(spent > 0.0 && spent < 0.5, "{spent}");
        }
        assert_eq!(thread_cpu_ns(u32::MAX >> 4), None, "no such thread");
    }

    #[test]
    fn reads_a_child_process_cpu_time() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"])
            .spawn()
            .expect("sh");
        let mut last = 0.0;
        while child.try_wait().expect("wait").is_none() {
            if let Some(s) = process_cpu_seconds(child.id()) {
                assert!(s >= last, "{s} < {last}");
                last = s;
            }
        }
        // Clock ticks may round a short run down to nothing.
        if CpuClock::get() == CpuClock::Thread {
            assert!(last > 0.0, "no CPU time read while the child ran");
        }
        assert_eq!(process_cpu_seconds(child.id()), None, "reaped: gone");
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_422), (2025, 11, 30));
    }

    #[test]
    fn output_dir_is_beside_the_target_tmpdir() {
        assert_eq!(
            output_dir(Path::new("/w/target/tmp")),
            PathBuf::from("/w/target/percore-bench")
        );
    }
}
