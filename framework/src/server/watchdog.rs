//! The stall watchdog: one thread per server that notices when a core
//! keeps running one loop turn longer than the stall threshold (a
//! handler that blocks, spins, or waits on a lock), and reports it once,
//! with how long it lasted, the task being polled (and its label, such
//! as an HTTP route, when it has one: `runtime::labeled`) and a backtrace
//! of the core's thread taken during the stall.
//!
//! The cores publish when their turn began (`core::watch`); the watchdog
//! wakes every half threshold, so a stall is seen between one and one and
//! a half thresholds after its turn began. Its end is the next turn's
//! start, or, when the core parked in between, the watchdog's next look:
//! then the reported duration can be half a threshold too long.

use std::fmt::Write as _;
use std::io;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use crate::core::shared::CoreShared;
use crate::executor::task::TaskKey;
use crate::net::Endpoint;
use crate::sys::stack_sample;

/// How long a stall may last before it is logged while still under way
/// (or four thresholds, if longer): a core stuck for good must not wait
/// for its end to be reported.
const STILL_STALLED: Duration = Duration::from_secs(1);

/// How long the watchdog waits for a stalled thread to answer the
/// sampling signal: generous, since a loaded machine may not run it at
/// once, and the watchdog has nothing more urgent to do.
const SAMPLE_WAIT: Duration = Duration::from_secs(1);

/// A running watchdog; [`stop`](Self::stop) ends it, and so does dropping
/// it (its thread sees the channel close).
pub(super) struct Watchdog {
    stop: mpsc::Sender<()>,
    thread: thread::JoinHandle<()>,
}

impl Watchdog {
    /// Starts watching `cores` for turns longer than `threshold`; its
    /// lines name the server by `addr`, as its cores' lines do.
    pub(super) fn start(
        cores: Vec<Arc<CoreShared>>,
        threshold: Duration,
        addr: Endpoint,
    ) -> io::Result<Watchdog> {
        let (stop, stopped) = mpsc::channel();
        let thread = thread::Builder::new()
            .name("percore-watchdog".into())
            .spawn(move || {
                let _span = tracing::info_span!("watchdog", %addr).entered();
                run(&cores, threshold, &stopped)
            })?;
        Ok(Watchdog { stop, thread })
    }

    /// Stops the watchdog and waits for its thread (which reports a stall
    /// still under way first).
    pub(super) fn stop(self) {
        drop(self.stop);
        let _ = self.thread.join();
    }
}

/// A stall under way on one core.
struct Stall {
    /// The stalled turn's start tick.
    began: u64,
    /// The task being polled when the stall was seen.
    task: TaskKey,
    /// Its label (`runtime::labeled`), if it had one.
    label: Option<String>,
    /// The return addresses sampled during the stall, symbolized only when
    /// reported (the first symbolization reads the debug information, which
    /// can take a second: the next look must not wait for it), or why
    /// there are none.
    backtrace: Result<Vec<usize>, String>,
    /// Logged already, as still under way.
    logged: bool,
}

fn run(cores: &[Arc<CoreShared>], threshold: Duration, stopped: &mpsc::Receiver<()>) {
    if let Err(why) = stack_sample::install() {
        tracing::info!(why, "stall reports will carry no backtrace");
    }
    let period = (threshold / 2).max(Duration::from_millis(1));
    let threshold_ms = threshold.as_millis().max(1) as u64;
    let mut stalls: Vec<Option<Stall>> = cores.iter().map(|_| None).collect();
    while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(period) {
        for (core, stall) in cores.iter().zip(&mut stalls) {
            check(core, stall, threshold_ms);
        }
    }
    for (core, stall) in cores.iter().zip(&mut stalls) {
        if let Some(stall) = stall.take() {
            let lasted = core.watch.now_tick().saturating_sub(stall.began);
            if stall.logged {
                let at = "core stall still under way at the stop";
                tracing::info!(cpu = core.cpu, stalled_ms = lasted, "{at}");
            } else {
                report(core, &stall, lasted, "still under way at the stop");
            }
        }
    }
}

/// One look at one core.
fn check(core: &CoreShared, stall: &mut Option<Stall>, threshold_ms: u64) {
    let now = core.watch.now_tick();
    let turn = core.watch.turn();
    if let Some(current) = stall {
        if turn == Some(current.began) {
            let lasted = now.saturating_sub(current.began);
            // Never sooner than a few thresholds, so that a large one
            // still gets one line per stall, at its end.
            let long = (STILL_STALLED.as_millis() as u64).max(4 * threshold_ms);
            if !current.logged && lasted >= long {
                report(core, current, lasted, "still under way");
                current.logged = true;
            }
            return;
        }
        let Some(ended) = stall.take() else { return };
        // The next turn began after the stall ended; a core that parked
        // in between ended it before this look.
        let end = turn.map_or(now, |t| t.min(now)).max(ended.began);
        let lasted = end - ended.began;
        core.stats.stall_time.record(Duration::from_millis(lasted));
        if ended.logged {
            tracing::info!(cpu = core.cpu, stalled_ms = lasted, "core stall ended");
        } else {
            report(core, &ended, lasted, "ended");
        }
        return;
    }
    let Some(began) = turn else { return };
    if now.saturating_sub(began) < threshold_ms {
        return;
    }
    core.stats.stalls.add(1);
    let task = core.owner.polled();
    let label = core.watch.label();
    let backtrace = match core.watch.thread() {
        Some(tid) => match stack_sample::sample(tid, SAMPLE_WAIT) {
            Ok(frames) if core.watch.turn() == Some(began) => Ok(frames),
            Ok(_) => Err("the stall ended before the sample".to_owned()),
            Err(e) => Err(e.to_string()),
        },
        None => Err("the core's thread is not known".to_owned()),
    };
    *stall = Some(Stall {
        began,
        task,
        label,
        backtrace,
        logged: false,
    });
}

/// The one WARN line of a stall; the backtrace, its last field, begins
/// on the next line.
fn report(core: &CoreShared, stall: &Stall, lasted_ms: u64, state: &str) {
    let task = format!("{}.{}", stall.task.index, stall.task.generation);
    tracing::warn!(
        cpu = core.cpu,
        stalled_ms = lasted_ms,
        task,
        label = stall.label.as_deref().unwrap_or("none"),
        backtrace = %match &stall.backtrace {
            Ok(frames) => format!("\n{}", symbolize(frames)),
            Err(why) => format!("none ({why})"),
        },
        "core stalled for {lasted_ms} ms ({state}): one loop turn kept the core \
         and its other connections waited",
    );
}

/// The captured return addresses as named frames, without the sampling
/// handler's own (which come first, down to the signal trampoline).
fn symbolize(frames: &[usize]) -> String {
    let named: Vec<(usize, Vec<String>)> = frames
        .iter()
        .map(|&ip| {
            let mut names = Vec::new();
            backtrace::resolve(ip as *mut std::ffi::c_void, |symbol| {
                let name = symbol
                    .name()
                    .map_or_else(|| "<unknown>".to_owned(), |n| n.to_string());
                let place = match (symbol.filename(), symbol.lineno()) {
                    (Some(file), Some(line)) => format!("\n        at {}:{line}", file.display()),
                    _ => String::new(),
                };
                names.push(format!("{name}{place}"));
            });
            (ip, names)
        })
        .collect();
    // Skip the handler and the trampoline it returns to.
    let skip = named
        .iter()
        .rposition(|(_, names)| {
            names
                .iter()
                .any(|n| n.starts_with("on_signal") || n.contains("stack_sample::on_signal"))
        })
        .map_or(0, |i| i + 2);
    // The parsed debug information is tens of MiB: given back now, and
    // read again for the next report (stalls are rare, memory is not free).
    backtrace::clear_symbol_cache();
    let mut out = String::new();
    for (i, (ip, names)) in named.iter().skip(skip).enumerate() {
        if names.is_empty() {
            let _ = writeln!(out, "  {i:>2}: {ip:#x}");
        }
        for name in names {
            let _ = writeln!(out, "  {i:>2}: {name}");
        }
    }
    out
}
