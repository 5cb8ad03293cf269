//! Command-line arguments of the `file_io` bench.
//!
//! `cargo bench -- ARGS` passes the same arguments to every bench target,
//! so this one takes the executors target's options too: it ignores
//! `--exec`, and a filter that names none of its workloads runs nothing.

use std::path::PathBuf;

/// Parsed arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Args {
    /// `--quick`: every cell once, tiny sizes.
    pub quick: bool,
    /// `--big`: add a 1 GiB sequential write (full mode).
    pub big: bool,
    /// `--dir DIR`: where the files go (in a fresh directory of it).
    pub dir: Option<PathBuf>,
    /// Substrings of `file_io/<workload>`; all run when empty.
    pub filters: Vec<String>,
    /// `--list`: print the workloads, run nothing.
    pub list: bool,
    /// `--help`.
    pub help: bool,
}

/// Usage text.
pub const USAGE: &str = "\
usage: cargo bench -p percore-benches --bench file_io -- [--quick] [--big] [--dir DIR] [--list] [FILTER...]

  --quick     every cell once with tiny files (a few seconds; what CI runs)
  --big       also write a 1 GiB file (full mode)
  --dir DIR   put the files in a fresh directory of DIR (default /var/tmp,
              on the root disk; /tmp may be a tmpfs)
  --list      print the workloads that would run, and run nothing
  FILTER      run only workloads whose `file_io/<workload>` contains it

Results: the table on stdout and in file_io.md in percore-bench/ of the
target directory, replaced on every run.
";

/// Parses the arguments after the program name.
///
/// # Errors
///
/// An unknown option, or an option without its value.
pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Args, String> {
    let mut a = Args::default();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--bench" => {}
            "--quick" => a.quick = true,
            "--big" => a.big = true,
            "--list" => a.list = true,
            "-h" | "--help" => a.help = true,
            "--dir" => a.dir = Some(it.next().ok_or("--dir needs a directory")?.into()),
            s if s.starts_with("--dir=") => a.dir = Some(s["--dir=".len()..].into()),
            // The executors target's; every column runs here.
            "--exec" => {
                it.next().ok_or("--exec needs a list")?;
            }
            s if s.starts_with("--exec=") => {}
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s => a.filters.push(s.to_string()),
        }
    }
    Ok(a)
}

/// Whether the workload `id` (`file_io/...`) passes the filters.
pub fn selected(filters: &[String], id: &str) -> bool {
    filters.is_empty() || filters.iter().any(|f| id.contains(f.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &[&str]) -> Result<Args, String> {
        parse(s.iter().map(|s| s.to_string()))
    }

    #[test]
    fn cargo_bench_arguments() {
        let a = p(&["--bench", "--quick", "--exec", "uring", "rand"]).unwrap();
        assert!(a.quick && !a.big);
        assert_eq!(a.filters, vec!["rand"]);
        let a = p(&["--dir", "/x", "--big"]).unwrap();
        assert_eq!(a.dir, Some(PathBuf::from("/x")));
        assert!(a.big);
        assert_eq!(p(&["--dir=/y"]).unwrap().dir, Some(PathBuf::from("/y")));
        assert!(p(&["--dir"]).is_err());
        assert!(p(&["--nocapture"]).is_err());
    }

    #[test]
    fn filters() {
        assert!(selected(&[], "file_io/open_close/depth4"));
        assert!(selected(&["file_io".into()], "file_io/open_close/depth4"));
        assert!(!selected(&["http".into()], "file_io/open_close/depth4"));
    }
}
