//! The `file_io` bench (`benches/file_io.rs`): the same file workloads on
//! synchronous `std`, on `tokio::fs` and on `percore::fs` (io_uring and
//! epoll), alternated round-robin in one run.
//!
//! What it measures: per cell, bytes or operations per wall-clock second
//! and the process's CPU time per operation (every thread: tokio's
//! blocking pool and percore's file pool included), as medians of the
//! rounds, with the ratio to `std` and to `tokio::fs`. What it does not:
//! the disk. Writes go to the page cache and are flushed after the clock
//! stops; only the cold reads wait for the device, and that device is a
//! VM's, whose host may cache it.
//!
//! The workloads:
//! - `seq_write`: a new file written front to back in chunks, then
//!   flushed and removed (both untimed).
//! - `writev`: the same with gathered writes of 8 × 8 KiB.
//! - `readv_warm`, `readv_cold`: a file read front to back with scattered
//!   reads of 8 × 8 KiB, from the page cache or (cold) after
//!   `POSIX_FADV_DONTNEED`.
//! - `open_close`: opening read-only and closing each file of a tree at
//!   directory depth 1, 4 or 16.
//! - `rand_read`: 4 KiB reads at random aligned offsets of a warm file,
//!   one at a time (QD1) or 32 in flight (QD32).
//! - `warm_read`: 4 KiB reads front to back through the warm file: the
//!   io_uring ring against a `preadv2(RWF_NOWAIT)` tried first on the
//!   core (`uring+nowait`).

pub mod cli;
pub mod fixture;
pub mod meter;
#[cfg(feature = "percore")]
pub mod percore_io;
pub mod plan;
pub mod std_io;
pub mod table;
pub mod tokio_io;

use std::fmt;

/// One implementation, a column of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Impl {
    /// `std::fs` and `pread`/`pwrite` family calls, on the calling thread.
    Std,
    /// `tokio::fs` on a current-thread runtime; positional and vectored
    /// calls, which `tokio::fs::File` lacks, as `spawn_blocking` of the
    /// `std` call (what `tokio::fs` does for each of its calls).
    Tokio,
    /// `percore::fs` on an io_uring core.
    Uring,
    /// `percore::fs` on an io_uring core with the core's registered
    /// (fixed) buffers.
    UringFixed,
    /// `percore::fs` on an io_uring core, each read first tried inline
    /// with `preadv2(RWF_NOWAIT)` on the file's fd; the ring only on
    /// `EAGAIN`.
    UringNowait,
    /// `percore::fs` on an epoll core.
    Epoll,
}

impl Impl {
    /// Every implementation, in column order.
    pub const ALL: [Impl; 6] = [
        Impl::Std,
        Impl::Tokio,
        Impl::Uring,
        Impl::UringFixed,
        Impl::UringNowait,
        Impl::Epoll,
    ];

    /// The name the table prints.
    pub fn name(self) -> &'static str {
        match self {
            Impl::Std => "std",
            Impl::Tokio => "tokio::fs",
            Impl::Uring => "uring",
            Impl::UringFixed => "uring fixed",
            Impl::UringNowait => "uring+nowait",
            Impl::Epoll => "epoll",
        }
    }
}

/// Buffers of a vectored call, and their size.
pub const VEC_BUFS: usize = 8;
/// Bytes of each buffer of a vectored call.
pub const VEC_BUF_LEN: usize = 8 * 1024;
/// Bytes of each random or warm read.
pub const READ_LEN: usize = 4 * 1024;

/// One workload with its parameters: a row group of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// A `size`-byte file written in `chunk`-byte writes.
    SeqWrite {
        /// File size.
        size: u64,
        /// Bytes per write call.
        chunk: usize,
    },
    /// A `size`-byte file written with gathered writes of
    /// [`VEC_BUFS`] × [`VEC_BUF_LEN`].
    Writev {
        /// File size.
        size: u64,
    },
    /// The vectored-read file read with scattered reads of
    /// [`VEC_BUFS`] × [`VEC_BUF_LEN`].
    Readv {
        /// After `POSIX_FADV_DONTNEED` (else from the page cache).
        cold: bool,
    },
    /// Open read-only and close every file of the tree at `depth`.
    OpenClose {
        /// Directories from the tree's root to the files.
        depth: usize,
    },
    /// [`READ_LEN`] reads at random offsets of the warm file, `qd` in
    /// flight.
    RandRead {
        /// Reads in flight at once.
        qd: usize,
    },
    /// [`READ_LEN`] reads front to back through the warm file, one at a
    /// time.
    WarmRead,
}

impl Workload {
    /// The implementations that run it; [`Impl::ALL`] order.
    pub fn impls(&self) -> &'static [Impl] {
        use Impl::*;
        match self {
            Workload::SeqWrite { .. } => &[Std, Tokio, Uring, UringFixed, Epoll],
            Workload::WarmRead => &[Std, Tokio, Uring, UringFixed, UringNowait, Epoll],
            _ => &[Std, Tokio, Uring, Epoll],
        }
    }

    /// Whether the rate is bytes per second (else operations per second).
    pub fn in_bytes(&self) -> bool {
        matches!(
            self,
            Workload::SeqWrite { .. } | Workload::Writev { .. } | Workload::Readv { .. }
        )
    }
}

/// Sizes as the table prints them: `256KiB`, `64MiB`, `1GiB`.
pub fn size_label(bytes: u64) -> String {
    const KIB: u64 = 1024;
    if bytes >= KIB * KIB * KIB && bytes.is_multiple_of(KIB * KIB * KIB) {
        format!("{}GiB", bytes / (KIB * KIB * KIB))
    } else if bytes >= KIB * KIB && bytes.is_multiple_of(KIB * KIB) {
        format!("{}MiB", bytes / (KIB * KIB))
    } else if bytes.is_multiple_of(KIB) {
        format!("{}KiB", bytes / KIB)
    } else {
        format!("{bytes}B")
    }
}

/// What one run of a cell gives.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// It ran.
    Ran(meter::Sample),
    /// It could not run here; the reason is printed in its place.
    Skipped(String),
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let vec = format!("{VEC_BUFS}x{}", size_label(VEC_BUF_LEN as u64));
        match *self {
            Workload::SeqWrite { size, chunk } => write!(
                f,
                "seq_write/{}/{}",
                size_label(size),
                size_label(chunk as u64)
            ),
            Workload::Writev { size } => write!(f, "writev/{}/{vec}", size_label(size)),
            Workload::Readv { cold: false } => write!(f, "readv_warm/{vec}"),
            Workload::Readv { cold: true } => write!(f, "readv_cold/{vec}"),
            Workload::OpenClose { depth } => write!(f, "open_close/depth{depth}"),
            Workload::RandRead { qd } => {
                write!(f, "rand_read/{}/qd{qd}", size_label(READ_LEN as u64))
            }
            Workload::WarmRead => write!(f, "warm_read/{}", size_label(READ_LEN as u64)),
        }
    }
}

/// Offsets of [`READ_LEN`] reads, aligned, at random in `0..file_len`: the
/// same sequence for every implementation (xorshift64, fixed seed).
pub fn random_offsets(count: usize, file_len: u64) -> Vec<u64> {
    let slots = (file_len / READ_LEN as u64).max(1);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..count)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % slots) * READ_LEN as u64
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(size_label(64 * 1024), "64KiB");
        assert_eq!(size_label(256 << 20), "256MiB");
        assert_eq!(size_label(1 << 30), "1GiB");
        let w = Workload::SeqWrite {
            size: 64 << 20,
            chunk: 1 << 20,
        };
        assert_eq!(w.to_string(), "seq_write/64MiB/1MiB");
        assert_eq!(
            Workload::RandRead { qd: 32 }.to_string(),
            "rand_read/4KiB/qd32"
        );
    }

    #[test]
    fn offsets_are_aligned_and_inside() {
        let offs = random_offsets(1000, 1 << 20);
        assert!(offs.iter().all(|o| o % 4096 == 0 && *o < 1 << 20));
        assert_eq!(offs, random_offsets(1000, 1 << 20));
    }
}
