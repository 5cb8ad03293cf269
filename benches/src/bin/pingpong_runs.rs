//! `pingpong_runs`: how steady single-connection ping-pong is on each
//! executor. One blocking client on CPU 1 sends `--size` bytes to an echo
//! server on CPU 0 and waits for them back, for `--secs` seconds; every
//! round trip's time goes into a histogram. That is one run; `--runs` of
//! them are made per executor, the executors alternated within each
//! round so that the machine's drift touches all alike. Printed: each
//! run's mean, median and p99 (µs), then per executor the median across
//! runs of each, with their range, and the ratio of its median to epoll's
//! and to tokio's.
//!
//! ```text
//! pingpong_runs [--runs 10] [--secs 3] [--size 64] [--exec uring,epoll,tokio-ct]
//! ```

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use percore_benches::server::{self, Executor, Service, Supplies};
use percore_benches::stats::median;
use percore_benches::sys::pin_current_thread;

const SERVER_CPU: usize = 0;
const CLIENT_CPU: usize = 1;

struct Options {
    runs: usize,
    secs: u64,
    size: usize,
    executors: Vec<Executor>,
}

fn parse() -> Result<Options, String> {
    let mut o = Options {
        runs: 10,
        secs: 3,
        size: 64,
        executors: vec![Executor::Uring, Executor::Epoll, Executor::TokioCt],
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--runs" => o.runs = value()?.parse().map_err(|e| format!("--runs: {e}"))?,
            "--secs" => o.secs = value()?.parse().map_err(|e| format!("--secs: {e}"))?,
            "--size" => o.size = value()?.parse().map_err(|e| format!("--size: {e}"))?,
            "--exec" => {
                o.executors = value()?
                    .split(',')
                    .map(|n| Executor::from_name(n).ok_or(format!("--exec: no executor {n:?}")))
                    .collect::<Result<_, _>>()?
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if o.runs == 0 || o.size == 0 || o.executors.is_empty() {
        return Err("--runs, --size and --exec must not be empty".into());
    }
    Ok(o)
}

/// One run: the round trips' times, in nanoseconds.
fn run(addr: std::net::SocketAddr, size: usize, secs: u64) -> io::Result<Histogram<u64>> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    let out: Vec<u8> = (0..size).map(|i| i as u8).collect();
    let mut back = vec![0u8; size];
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .map_err(|e| io::Error::other(e.to_string()))?;
    // A few round trips first: the connection's first buffers and the
    // server's first task are not what is measured.
    for _ in 0..100 {
        s.write_all(&out)?;
        s.read_exact(&mut back)?;
    }
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let t = Instant::now();
        s.write_all(&out)?;
        s.read_exact(&mut back)?;
        let now = Instant::now();
        if back != out {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "echo returned other bytes",
            ));
        }
        h.record((now - t).as_nanos().max(1) as u64)
            .map_err(|e| io::Error::other(e.to_string()))?;
        if now >= end {
            return Ok(h);
        }
    }
}

#[derive(Clone, Copy)]
struct Run {
    mean: f64,
    p50: f64,
    p99: f64,
    /// Server CPU µs per round trip (user and system).
    cpu: f64,
}

fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("pingpong_runs: {e}");
            std::process::exit(2);
        }
    };
    let mut results: Vec<Vec<Run>> = vec![Vec::new(); o.executors.len()];
    println!("run  executor   mean µs  p50 µs  p99 µs  server CPU µs");
    for r in 0..o.runs {
        // Rotate the order each round: no executor always goes first.
        for k in 0..o.executors.len() {
            let i = (k + r) % o.executors.len();
            let e = o.executors[i];
            let started = server::start(e, Service::Echo, &[SERVER_CPU], &[], &Supplies::default());
            let srv = match started {
                Ok(s) => s,
                Err(why) => {
                    eprintln!("pingpong_runs: {} skipped: {why}", e.name());
                    continue;
                }
            };
            let addr = match srv.target().tcp() {
                Ok(a) => a,
                Err(err) => {
                    eprintln!("pingpong_runs: {}: {err}", e.name());
                    std::process::exit(1);
                }
            };
            // The client runs in a thread of its own, pinned: pinning this
            // one would keep the servers it starts off their CPU.
            let (size, secs) = (o.size, o.secs);
            let client = std::thread::spawn(move || {
                if !pin_current_thread(CLIENT_CPU) {
                    eprintln!("pingpong_runs: could not pin the client to CPU {CLIENT_CPU}");
                }
                run(addr, size, secs)
            });
            let cpu_before = srv.cpu_seconds();
            let h = match client
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("client panicked")))
            {
                Ok(h) => h,
                Err(err) => {
                    eprintln!("pingpong_runs: {} run {r}: {err}", e.name());
                    std::process::exit(1);
                }
            };
            let cpu = match (cpu_before, srv.cpu_seconds()) {
                (Some(a), Some(b)) => (b - a) * 1e6 / h.len().max(1) as f64,
                _ => f64::NAN,
            };
            if let Err(err) = srv.stop(Duration::from_secs(60)) {
                eprintln!("pingpong_runs: {} did not stop: {err}", e.name());
            }
            let one = Run {
                mean: h.mean() / 1e3,
                p50: h.value_at_quantile(0.5) as f64 / 1e3,
                p99: h.value_at_quantile(0.99) as f64 / 1e3,
                cpu,
            };
            println!(
                "{r:>3}  {:<9} {:>8.1} {:>7.1} {:>7.1} {:>8.2}",
                e.name(),
                one.mean,
                one.p50,
                one.p99,
                one.cpu
            );
            results[i].push(one);
        }
    }
    summarize(&o, &results);
}

fn summarize(o: &Options, results: &[Vec<Run>]) {
    let med = |i: usize, f: fn(&Run) -> f64| -> Option<f64> {
        median(&results[i].iter().map(f).collect::<Vec<_>>())
    };
    let range = |i: usize, f: fn(&Run) -> f64| -> (f64, f64) {
        let v: Vec<f64> = results[i].iter().map(f).collect();
        let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = v.iter().cloned().fold(0.0, f64::max);
        (lo, hi)
    };
    let find = |e: Executor| o.executors.iter().position(|x| *x == e);
    println!();
    println!(
        "{} runs of {} s, {} B, medians across runs (range):",
        o.runs, o.secs, o.size
    );
    println!(
        "executor   mean µs              p50 µs               p99 µs               server CPU µs"
    );
    for (i, e) in o.executors.iter().enumerate() {
        let cell = |f: fn(&Run) -> f64| {
            let (lo, hi) = range(i, f);
            med(i, f).map_or("-".into(), |m| format!("{m:>6.1} ({lo:.1}–{hi:.1})"))
        };
        println!(
            "{:<9}  {:<20} {:<20} {:<20} {:<20}",
            e.name(),
            cell(|r| r.mean),
            cell(|r| r.p50),
            cell(|r| r.p99),
            cell(|r| r.cpu)
        );
    }
    for base in [Executor::Epoll, Executor::TokioCt] {
        let Some(b) = find(base) else { continue };
        for (i, e) in o.executors.iter().enumerate() {
            if i == b {
                continue;
            }
            let ratio = |f: fn(&Run) -> f64| match (med(i, f), med(b, f)) {
                (Some(x), Some(y)) if y > 0.0 => format!("{:.3}", x / y),
                _ => "-".into(),
            };
            println!(
                "{} ÷ {}: mean {}, p50 {}, p99 {}, server CPU {}",
                e.name(),
                base.name(),
                ratio(|r| r.mean),
                ratio(|r| r.p50),
                ratio(|r| r.p99),
                ratio(|r| r.cpu)
            );
        }
    }
}
