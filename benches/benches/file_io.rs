//! `cargo bench -p percore-benches --bench file_io [-- --quick] [--big]
//! [--dir DIR] [FILTER]`: file I/O on synchronous `std`, on `tokio::fs`
//! (current-thread runtime) and on `percore::fs` (io_uring, epoll),
//! alternated round-robin in one run: sequential and vectored writes,
//! vectored reads warm and cold, opening and closing small files at three
//! directory depths, random 4 KiB reads at QD1 and QD32, and warm 4 KiB
//! reads through the ring against `RWF_NOWAIT` on the core.
//!
//! What it measures: per cell, the median of the rounds' MB/s or
//! operations per second and of the process CPU time per operation, and
//! the ratios to `std` and `tokio::fs`; the table goes to stdout and to
//! `<target>/percore-bench/file_io.md`. What it does not: the disk itself
//! (writes are flushed after the clock stops), more than one core, or
//! numbers to compare across runs or machines. A cell that cannot run is
//! printed as skipped or failed, never filled in. See
//! `percore_benches::file_io` for each workload.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use percore_benches::file_io::fixture::{Fixture, DEFAULT_PARENT};
use percore_benches::file_io::plan::Plan;
use percore_benches::file_io::table::{self, Cell, CellResult};
use percore_benches::file_io::{cli, std_io, tokio_io, Impl, Outcome, Workload};
use percore_benches::sys;

fn main() {
    let started = Instant::now();
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let args = match cli::parse(raw.clone()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}\n{}", cli::USAGE);
            std::process::exit(2);
        }
    };
    if args.help {
        print!("{}", cli::USAGE);
        return;
    }
    let plan = if args.quick {
        Plan::quick()
    } else {
        Plan::full(args.big)
    };
    let workloads: Vec<Workload> = plan
        .workloads()
        .into_iter()
        .filter(|w| cli::selected(&args.filters, &format!("file_io/{w}")))
        .collect();
    if workloads.is_empty() {
        // The filter is the executors target's (cargo bench passes the
        // same arguments to both): nothing of ours to run.
        println!(
            "file_io: no workload matches {:?}; nothing to run",
            args.filters
        );
        return;
    }
    if args.list {
        for w in &workloads {
            println!("file_io/{w}");
        }
        return;
    }
    if cfg!(debug_assertions) {
        eprintln!("warning: debug assertions are on; numbers are not comparable (use cargo bench)");
    }

    let parent = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_PARENT));
    let fx = match Fixture::new(&parent, &plan) {
        Ok(fx) => Arc::new(fx),
        Err(e) => {
            eprintln!(
                "error: could not make the files in {}: {e}",
                parent.display()
            );
            std::process::exit(1);
        }
    };
    let machine = sys::MachineInfo::detect();
    let mut header = vec![
        format!(
            "percore-benches file_io: {}, {} CPUs, Linux {}",
            machine.cpu_model, machine.nproc, machine.kernel
        ),
        format!("files: {} ({})", fx.dir.display(), fx.fs_type),
        format!("mode: {}", plan.describe()),
        format!("date: {}", sys::utc_now_string()),
        format!(
            "load average at the start (1, 5, 15 min): {}",
            std::fs::read_to_string("/proc/loadavg")
                .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
                .unwrap_or_else(|_| "unknown".into())
        ),
    ];
    if fx.fs_type == "tmpfs" {
        header.push("warning: tmpfs has no device: cold reads are warm".into());
    }
    #[cfg(feature = "percore")]
    header.push(
        percore_benches::file_io::percore_io::fixed_buffers()
            .unwrap_or_else(|e| format!("uring fixed: io_uring did not start: {e}")),
    );
    #[cfg(not(feature = "percore"))]
    header.push("note: built without the percore feature: its columns are skipped".into());
    for h in &header {
        println!("{h}");
    }
    println!(
        "{} workloads, {} rounds; progress on stderr",
        workloads.len(),
        plan.rounds
    );

    let mut cells = Vec::new();
    for w in &workloads {
        cells.extend(run_workload(*w, &fx, &plan));
    }
    let rows = table::rows(&cells);
    let text = table::text(&rows);
    println!();
    print!("{text}");
    println!();
    print!("{}", table::LEGEND);

    let command = {
        let user: Vec<&str> = raw
            .iter()
            .map(String::as_str)
            .filter(|a| *a != "--bench")
            .collect();
        let base = "cargo bench -p percore-benches --bench file_io";
        if user.is_empty() {
            base.to_string()
        } else {
            format!("{base} -- {}", user.join(" "))
        }
    };
    let md = format!(
        "# file_io\n\n```\n{command}\n```\n\n{}\n\n{}\n```\n{}```\n",
        header.join("  \n"),
        table::markdown(&rows),
        table::LEGEND
    );
    let out = sys::output_dir(Path::new(env!("CARGO_TARGET_TMPDIR"))).join("file_io.md");
    match std::fs::create_dir_all(out.parent().unwrap_or(Path::new(".")))
        .and_then(|()| std::fs::write(&out, md))
    {
        Ok(()) => println!("wrote {}", out.display()),
        Err(e) => {
            eprintln!("error: could not write {}: {e}", out.display());
            std::process::exit(1);
        }
    }
    drop(fx);
    println!("total time {:.1} s", started.elapsed().as_secs_f64());
}

/// Every implementation of `w` once per round, in turn.
fn run_workload(w: Workload, fx: &Arc<Fixture>, plan: &Plan) -> Vec<Cell> {
    let mut cells: Vec<Cell> = w
        .impls()
        .iter()
        .map(|&imp| Cell {
            workload: w,
            imp,
            result: CellResult::Ran(Vec::new()),
        })
        .collect();
    for round in 0..plan.rounds {
        for cell in &mut cells {
            let CellResult::Ran(samples) = &mut cell.result else {
                continue;
            };
            let t = Instant::now();
            let outcome = run_cell(cell.imp, w, fx, plan);
            eprintln!(
                "file_io/{w} {} round {}: {:.2} s",
                cell.imp.name(),
                round + 1,
                t.elapsed().as_secs_f64()
            );
            match outcome {
                Ok(Outcome::Ran(s)) => samples.push(s),
                Ok(Outcome::Skipped(why)) => cell.result = CellResult::Skipped(why),
                Err(e) => cell.result = CellResult::Failed(e.to_string()),
            }
        }
    }
    cells
}

fn run_cell(imp: Impl, w: Workload, fx: &Arc<Fixture>, plan: &Plan) -> std::io::Result<Outcome> {
    match imp {
        Impl::Std => std_io::run(w, fx, plan).map(Outcome::Ran),
        Impl::Tokio => tokio_io::run(w, fx, plan).map(Outcome::Ran),
        #[cfg(feature = "percore")]
        _ => percore_benches::file_io::percore_io::run(imp, w, fx, plan),
        #[cfg(not(feature = "percore"))]
        _ => Ok(Outcome::Skipped("built without the percore feature".into())),
    }
}
