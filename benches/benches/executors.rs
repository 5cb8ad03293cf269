//! `cargo bench -p percore-benches [-- --quick] [FILTER]`: every workload on
//! percore's uring and epoll executors and on the tokio-ct and tokio-mt
//! baselines, alternated round-robin in one run, servers on one CPU and
//! clients on another; over TCP, a Unix socket file, and TLS (the `https`
//! cells, with a certificate the `openssl` command makes for the run); and
//! the `api` cells, a JSON API served by child processes (the `json_api`
//! example against `axum_api`, in the tokio-ct column).
//!
//! What it measures: medians, CV, ratio to tokio-ct with a noise verdict,
//! server CPU and allocations per operation; results go to stdout and to
//! `<target>/percore-bench/` (results.csv, report.md, one SVG per category).
//! What it does not: compare across runs or machines (re-run side by side),
//! measure multi-core scaling, or hide a failure: a cell that cannot run is
//! printed as skipped or failed and left out, never filled in (the `https`
//! cells are skipped where `openssl` is not installed).

use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use percore_benches::alloc::{self, CountingAlloc};
use percore_benches::chart;
use percore_benches::harness::{self, Console, Mode};
use percore_benches::report::{self, ReportMeta};
use percore_benches::server::Executor;
use percore_benches::stats::Verdict;
use percore_benches::{cli, pair, summary, sys};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

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
    if cfg!(debug_assertions) {
        eprintln!("warning: debug assertions are on; numbers are not comparable (use cargo bench)");
    }

    // Before pinning: nproc counts the CPUs this process may use.
    let machine = sys::MachineInfo::detect();
    let mut notes: Vec<String> = Vec::new();
    let placement = sys::Placement::detect();
    if !placement.pinned {
        notes.push(format!("note: {}", placement.note));
    }
    if let Err(e) = sys::raise_fd_limit() {
        notes.push(format!("warning: could not raise RLIMIT_NOFILE: {e}"));
    }
    if sys::CpuClock::get() == sys::CpuClock::Ticks {
        notes.push(
            "warning: the kernel refused a thread's CPU-time clock: server CPU is read from \
             /proc in clock ticks (usually 10 ms), coarse for short windows"
                .into(),
        );
    }
    if !alloc::is_counting() {
        notes.push("warning: the counting allocator is not active; allocs/op are zero".into());
    }

    if args.quick {
        notes.push(
            "note: quick mode checks that every cell runs; its short rounds resolve only large \
             differences (to choose an executor, run the full mode, or benches/duel.sh for a \
             few percent)"
                .into(),
        );
    }
    let mode = if args.quick {
        Mode::quick()
    } else {
        Mode::full()
    };
    let all_jobs = harness::jobs(&mode);
    let (jobs, others): (Vec<_>, Vec<_>) = all_jobs
        .into_iter()
        .partition(|j| cli::selected(&args.filters, &j.id(), &j.cells()));
    if jobs.is_empty() && args.filters.iter().all(|f| f.starts_with("file_io")) {
        // The file_io target's workloads (`cargo bench -- file_io`).
        println!("executors: the filters name file_io workloads only; nothing to run here");
        return;
    }
    if jobs.is_empty() {
        // Status 2, like a bad option: a mistyped filter must not pass for
        // a run (the last report stays as it was).
        eprintln!(
            "error: no workload of the {} mode matches {:?}; the workloads are:",
            if args.quick { "quick" } else { "full" },
            args.filters
        );
        for j in &others {
            eprintln!("  {}", j.id());
        }
        std::process::exit(2);
    }
    if args.list {
        for j in &jobs {
            println!("{}", j.id());
        }
        return;
    }
    let machine_line = format!(
        "{}, {} CPUs, Linux {}",
        machine.cpu_model, machine.nproc, machine.kernel
    );
    println!("percore-benches: {machine_line}");
    println!("placement: {}", placement.note);
    println!("mode: {}", mode.describe());
    println!(
        "executors: {} (baseline {})",
        args.executors
            .iter()
            .map(|e| e.name())
            .collect::<Vec<_>>()
            .join(", "),
        Executor::BASELINE.name()
    );
    for n in &notes {
        println!("{n}");
    }
    println!("{} workloads; progress on stderr", jobs.len());

    let mut out = |l: &str| {
        println!("{l}");
        let _ = std::io::stdout().flush();
    };
    let mut progress = |l: &str| eprintln!("{l}");
    let outcome = harness::run(
        &jobs,
        &args.executors,
        &placement,
        &mode,
        &mut Console {
            out: &mut out,
            progress: &mut progress,
        },
    );
    notes.extend(outcome.notes);

    println!();
    print!("{}", report::format_table(&outcome.rows));
    println!();
    println!(
        "÷ {b}: speed relative to {b}'s, above 1 is better for every unit ({b}'s median ÷\n\
         this one's for us cells). verdict: faster or slower only beyond\n\
         2*sqrt(cv^2 + cv_{b}^2), else within noise. ops/cpu-s: operations per server\n\
         CPU-second. report.md explains every column.",
        b = Executor::BASELINE.name()
    );
    println!();
    let pairs = pair::uring_against_epoll(&outcome.rows);
    if !pairs.is_empty() {
        print!("{}", pair::summary(&pairs));
        println!();
    }
    let pivot = summary::pivot(&outcome.rows);
    if !pivot.lines.is_empty() {
        println!(
            "by cell: medians side by side. ÷ {b}: speed relative to {b}'s, above 1 is better\n\
             for every unit (µs cells inverted), with the verdict; ops/cpu-s: per server CPU-second.",
            b = Executor::BASELINE.name()
        );
        print!("{}", pivot.text());
        print!("{}", summary::Pivot::tally(&outcome.rows));
        println!();
    }
    let resolved = outcome
        .rows
        .iter()
        .any(|r| matches!(r.verdict, Some(Verdict::Faster | Verdict::Slower)))
        || pairs.iter().any(|p| p.winner.is_some());
    // Quick mode said so at the start, for every outcome.
    if !args.quick && !outcome.rows.is_empty() && !resolved {
        let hint = "note: every cell is within noise: this run cannot tell the executors apart; \
                    differences of a few percent need benches/duel.sh (HTTP) or \
                    benches/bulk_duel.sh (bulk transfers), which put two servers under the same \
                    load at once"
            .to_string();
        println!("{hint}\n");
        notes.push(hint);
    }

    let out_dir = sys::output_dir(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let user_args: Vec<&str> = raw
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "--bench")
        .collect();
    let command = if user_args.is_empty() {
        "cargo bench -p percore-benches".to_string()
    } else {
        format!("cargo bench -p percore-benches -- {}", user_args.join(" "))
    };
    match write_outputs(
        &out_dir,
        &outcome.rows,
        &args.executors,
        ReportMeta {
            machine: machine_line,
            date: sys::utc_now_string(),
            command,
            mode: mode.describe(),
            placement: placement.note.clone(),
            notes,
            charts: Vec::new(),
        },
    ) {
        Ok(files) => {
            println!("wrote {}", files.join(", "));
        }
        Err(e) => {
            eprintln!(
                "error: could not write the report to {}: {e}",
                out_dir.display()
            );
            std::process::exit(1);
        }
    }
    println!("total time {:.1} s", started.elapsed().as_secs_f64());
}

fn write_outputs(
    dir: &Path,
    rows: &[report::Row],
    executors: &[Executor],
    mut meta: ReportMeta,
) -> std::io::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    // Charts of an earlier run (another filter) would pass for this one's.
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "svg") {
            std::fs::remove_file(&path)?;
        }
    }
    let mut files = Vec::new();
    let names: Vec<&str> = executors.iter().map(|e| e.name()).collect();
    let mut categories: Vec<&str> = Vec::new();
    for r in rows {
        if !categories.contains(&r.category.as_str()) {
            categories.push(&r.category);
        }
    }
    // Every bar is relative to the baseline: without it a chart is empty.
    if !executors.contains(&Executor::BASELINE) {
        categories.clear();
    }
    for c in categories {
        let name = format!("{c}.svg");
        let path = dir.join(&name);
        std::fs::write(
            &path,
            chart::svg_chart(c, rows, &names, Executor::BASELINE.name()),
        )?;
        files.push(path.display().to_string());
        meta.charts.push(name);
    }
    let csv = dir.join("results.csv");
    std::fs::write(&csv, report::to_csv(rows))?;
    files.insert(0, csv.display().to_string());
    let md = dir.join("report.md");
    std::fs::write(&md, report::to_markdown(rows, &meta))?;
    files.insert(1, md.display().to_string());
    Ok(files)
}
