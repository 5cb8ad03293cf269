//! Command-line arguments of the bench binary.
//!
//! What it handles: what `cargo bench` passes (`--bench`), our own
//! `--quick`, `--exec LIST`, `--list` and `--help`, free-standing filter
//! strings, and the `file_io` target's `--big` and `--dir DIR` (cargo
//! bench passes the same arguments to every target), which it ignores.
//! What it does not: criterion's or libtest's other options (rejected with a
//! message rather than silently ignored).

use crate::server::Executor;

/// Parsed arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Args {
    /// `--quick`.
    pub quick: bool,
    /// Substrings of `category/workload`; a job runs if any matches (all
    /// run when empty).
    pub filters: Vec<String>,
    /// Executors to run, in table order.
    pub executors: Vec<Executor>,
    /// `--help`.
    pub help: bool,
    /// `--list`: print the workloads the filters select, run nothing.
    pub list: bool,
}

/// Usage text.
pub const USAGE: &str = "\
usage: cargo bench -p percore-benches -- [--quick] [--exec LIST] [--list] [FILTER...]

  --quick       every category briefly (about 90 s; the full run takes about 12 min)
  --exec LIST   comma-separated executors: uring,epoll,tokio-ct,tokio-mt
                (default: all; tokio-ct is the baseline of every ratio)
  --list        print the workloads that would run, and run nothing
  FILTER        run only workloads whose `category/workload` contains it,
                or that report the cell it names (`open_loop/http/10k_rps/p99`)
  --big, --dir  the file_io target's, ignored here (file I/O: std, tokio::fs
                and percore; `cargo bench --bench file_io -- --help`)

Results: the table on stdout, and results.csv, report.md (what each column
means) and one SVG chart per category in percore-bench/ of the target
directory ($CARGO_TARGET_DIR/percore-bench/ if set, else
target/percore-bench/), replaced on every run.
";

/// Parses a `--cores` value of the baseline servers: `0,1` (comma-separated
/// CPU numbers).
pub fn parse_cpu_list(list: &str) -> Result<Vec<usize>, String> {
    list.split(',')
        .map(|c| c.trim().parse().map_err(|e| format!("--cores {c:?}: {e}")))
        .collect()
}

/// Parses the arguments after the program name.
pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Args, String> {
    let mut a = Args {
        quick: false,
        filters: Vec::new(),
        executors: Executor::ALL.to_vec(),
        help: false,
        list: false,
    };
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--bench" => {}
            "--quick" => a.quick = true,
            "-h" | "--help" => a.help = true,
            "--list" => a.list = true,
            "--exec" => {
                let list = it.next().ok_or("--exec needs a list")?;
                a.executors = parse_executors(&list)?;
            }
            s if s.starts_with("--exec=") => a.executors = parse_executors(&s[7..])?,
            // The file_io target's options (cargo bench passes the same
            // arguments to every target): nothing to do here.
            "--big" => {}
            "--dir" => {
                it.next().ok_or("--dir needs a directory")?;
            }
            s if s.starts_with("--dir=") => {}
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s => a.filters.push(s.to_string()),
        }
    }
    Ok(a)
}

fn parse_executors(list: &str) -> Result<Vec<Executor>, String> {
    let mut v = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let e = Executor::from_name(name).ok_or_else(|| format!("unknown executor {name}"))?;
        if !v.contains(&e) {
            v.push(e);
        }
    }
    if v.is_empty() {
        return Err("--exec list is empty".to_string());
    }
    v.sort();
    Ok(v)
}

/// Whether a job passes the filters: a filter is a substring of its id, or
/// one of its `cells` as the table prints them (which run the whole job).
pub fn selected(filters: &[String], id: &str, cells: &[String]) -> bool {
    filters.is_empty()
        || filters
            .iter()
            .any(|f| id.contains(f.as_str()) || cells.contains(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &[&str]) -> Result<Args, String> {
        parse(s.iter().map(|s| s.to_string()))
    }

    #[test]
    fn cargo_bench_arguments() {
        let a = p(&["--bench", "--quick", "http"]).unwrap();
        assert!(a.quick);
        assert_eq!(a.filters, vec!["http"]);
        assert_eq!(a.executors, Executor::ALL.to_vec());
        let a = p(&["--bench"]).unwrap();
        assert!(!a.quick && !a.list && a.filters.is_empty());
        assert!(p(&["--list", "--quick"]).unwrap().list);
    }

    #[test]
    fn executor_lists() {
        let a = p(&["--exec", "tokio-mt,uring"]).unwrap();
        assert_eq!(a.executors, vec![Executor::Uring, Executor::TokioMt]);
        let a = p(&["--exec=tokio-ct"]).unwrap();
        assert_eq!(a.executors, vec![Executor::TokioCt]);
        assert!(p(&["--exec", "nope"]).is_err());
        assert!(p(&["--exec"]).is_err());
        assert!(p(&["--nocapture"]).is_err());
    }

    #[test]
    fn file_io_options_pass() {
        let a = p(&["--bench", "--quick", "--big", "--dir", "/x"]).unwrap();
        assert!(a.quick && a.filters.is_empty());
        assert!(p(&["--dir"]).is_err());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0"), Ok(vec![0]));
        assert_eq!(parse_cpu_list("0, 1"), Ok(vec![0, 1]));
        assert!(parse_cpu_list("0,x").is_err());
    }

    #[test]
    fn filters_match_substrings_and_cells() {
        let id = "socket_latency/pingpong/1B";
        let cells = [id.to_string()];
        assert!(selected(&[], id, &cells));
        assert!(selected(&["lat".into()], id, &cells));
        assert!(!selected(&["http".into()], id, &cells));
        let id = "open_loop/http/10k_rps";
        let cells = [format!("{id}/p50"), format!("{id}/p99")];
        assert!(selected(&["open_loop/http/10k_rps/p99".into()], id, &cells));
        assert!(!selected(&["open_loop/http/10k_rps/p9".into()], id, &cells));
    }
}
