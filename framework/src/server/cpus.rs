//! Which CPUs a server runs on, and the taskset-style list syntax.

use std::collections::BTreeSet;
use std::io;

/// The CPUs this process may run on (its affinity mask).
pub fn available() -> Vec<usize> {
    core_affinity::get_core_ids()
        .map(|ids| ids.into_iter().map(|id| id.id).collect())
        .unwrap_or_else(|| vec![0])
}

/// Parses a CPU list such as `0`, `0,1` or `0-3,6`.
///
/// # Errors
///
/// `InvalidInput` for anything else, or an empty list.
pub fn parse_list(list: &str) -> io::Result<Vec<usize>> {
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid CPU list {list:?} (expected e.g. 0 or 0,1 or 0-3)"),
        )
    };
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (
                    a.trim().parse().map_err(|_| bad())?,
                    b.trim().parse().map_err(|_| bad())?,
                );
                if a > b || b - a > 4096 {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    if cpus.is_empty() {
        return Err(bad());
    }
    Ok(cpus)
}

/// Checks a requested CPU list against what this process may use: a CPU
/// listed twice or not available is an error, never two cores on one CPU.
pub(crate) fn resolve(requested: Option<&[usize]>) -> io::Result<Vec<usize>> {
    match requested {
        None => Ok(available()),
        Some(requested) => check(requested).map(|()| requested.to_vec()),
    }
}

/// Whether a server may run on `requested`: not empty, no CPU twice, each
/// in this process's affinity mask. [`ServerBuilder::start`] checks the
/// same; a command line can check first, to report a usage error.
///
/// # Errors
///
/// `InvalidInput`, saying which CPU and why.
///
/// [`ServerBuilder::start`]: crate::ServerBuilder::start
pub fn check(requested: &[usize]) -> io::Result<()> {
    if requested.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the CPU list is empty",
        ));
    }
    let available = available();
    let mut seen = BTreeSet::new();
    for &cpu in requested {
        if !seen.insert(cpu) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is listed twice: each core needs a CPU of its own"),
            ));
        }
        if !available.contains(&cpu) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is not available to this process (available: {available:?})"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_taskset_lists() {
        assert_eq!(parse_list("0").unwrap(), vec![0]);
        assert_eq!(parse_list("0,1").unwrap(), vec![0, 1]);
        assert_eq!(parse_list("0-3,6").unwrap(), vec![0, 1, 2, 3, 6]);
        assert!(parse_list("").is_err());
        assert!(parse_list("3-1").is_err());
        assert!(parse_list("a").is_err());
    }

    #[test]
    fn refuses_duplicates_and_missing_cpus() {
        assert!(resolve(Some(&[0, 0])).is_err());
        assert!(resolve(Some(&[100_000])).is_err());
        assert_eq!(resolve(Some(&[0])).unwrap(), vec![0]);
    }
}
