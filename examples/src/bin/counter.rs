//! A counter sharded per core, summed across cores with `submit_to`.
//!
//! Each core counts in a plain `Cell` that only its own thread touches: no
//! atomics, no locks. `incr` adds one to the counter of the core that
//! serves the connection; `sum` asks every core for its count (a
//! cross-core call each, run on that core) and answers the total. With
//! `--stats`, each `sum` also prints the per-core counts it gathered.
//!
//! ```text
//! counter [--port 7001] [--cores 0,1] [--backend auto] [--stats]
//! printf 'incr\nincr\nsum\n' | nc -q1 127.0.0.1 7001    # ok, ok, 2
//! ```

use std::cell::Cell;
use std::io::{self, Write};

use clap::Parser;
use percore::{core_count, core_index, submit_to, Connection, Handler};
use percore_examples::{exit_with, init_logging, parse_args, run, CommonArgs};

thread_local! {
    /// This core's count: each core is one thread, so a thread-local is
    /// per-core state.
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

struct Counter {
    print_stats: bool,
}

impl Counter {
    async fn answer(&self, command: &str) -> String {
        match command {
            "incr" => {
                COUNT.with(|c| c.set(c.get() + 1));
                "ok\n".to_owned()
            }
            "sum" => {
                let mut counts = Vec::with_capacity(core_count());
                for core in 0..core_count() {
                    match submit_to(core, || async { COUNT.with(Cell::get) }).await {
                        Ok(n) => counts.push(n),
                        Err(e) => return format!("error: core {core}: {e}\n"),
                    }
                }
                let total: u64 = counts.iter().sum();
                if self.print_stats {
                    // Not `eprintln!`, which panics once stderr's reader is
                    // gone, and would cost this client its answer.
                    let _ = writeln!(
                        io::stderr(),
                        "counter: per-core {counts:?}, total {total} (asked by core {})",
                        core_index()
                    );
                }
                format!("{total}\n")
            }
            "" => String::new(),
            other => format!("error: unknown command {other:?} (incr or sum)\n"),
        }
    }
}

/// The longest line a client may send: a peer that never sends a newline
/// must not grow the buffer without bound.
const MAX_LINE: usize = 1024;

impl Handler for Counter {
    async fn serve(&self, conn: Connection) -> io::Result<()> {
        let mut pending = Vec::new();
        while let Some(buf) = conn.read().await? {
            pending.extend_from_slice(&buf);
            if let Some(end) = pending.iter().rposition(|&b| b == b'\n') {
                let lines: Vec<u8> = pending.drain(..=end).collect();
                let mut reply = String::new();
                for line in String::from_utf8_lossy(&lines).lines() {
                    reply.push_str(&self.answer(line.trim()).await);
                }
                if !reply.is_empty() {
                    conn.write_all(reply).await.0?;
                }
            }
            if pending.len() > MAX_LINE {
                let refusal = format!("error: line longer than {MAX_LINE} bytes\n");
                conn.write_all(refusal).await.0?;
                break;
            }
        }
        match conn.shutdown_write() {
            Err(e) if e.kind() != io::ErrorKind::NotConnected => Err(e),
            _ => Ok(()),
        }
    }
}

/// Per-core counters summed across cores with `submit_to`: `incr` adds
/// one to the serving core's count, `sum` answers the total (one command
/// per line).
#[derive(Debug, Parser)]
#[command(name = "counter")]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
}

fn main() {
    let Cli { common } = parse_args("7001");
    init_logging();
    let print_stats = common.stats;
    if let Err(e) = run("counter", &common, move |_core| Counter { print_stats }) {
        exit_with(1, &format!("counter: {e}"));
    }
}
