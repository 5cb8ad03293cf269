//! The `std` column: `std::fs` and the `pread`/`pwrite` family, each call
//! blocking the calling thread. Also the vectored calls that `tokio_io`
//! runs on tokio's blocking pool.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use super::fixture::{self, Fixture};
use super::meter::{Meter, Sample};
use super::plan::Plan;
use super::{Workload, READ_LEN, VEC_BUFS, VEC_BUF_LEN};

/// Runs one cell of `w` on this thread.
///
/// # Errors
///
/// The first failed call.
pub fn run(w: Workload, fx: &Fixture, plan: &Plan) -> io::Result<Sample> {
    let mut m = Meter::new();
    match w {
        Workload::SeqWrite { size, chunk } => {
            let buf = fixture::pattern(chunk);
            for _ in 0..plan.files_per_cell(size) {
                let path = fx.scratch_file("std-seq");
                let f = File::create(&path)?;
                m.start();
                let mut pos = 0;
                while pos < size {
                    f.write_all_at(&buf, pos)?;
                    pos += chunk as u64;
                }
                m.stop(size / chunk as u64, size);
                f.sync_all()?;
                drop(f);
                std::fs::remove_file(&path)?;
            }
        }
        Workload::Writev { size } => {
            let bufs = vec_bufs();
            for _ in 0..plan.files_per_cell(size) {
                let path = fx.scratch_file("std-writev");
                let f = File::create(&path)?;
                m.start();
                let calls = write_file_vectored(&f, &bufs, size)?;
                m.stop(calls, size);
                f.sync_all()?;
                drop(f);
                std::fs::remove_file(&path)?;
            }
        }
        Workload::Readv { cold } => {
            let mut bufs = vec_bufs();
            for _ in 0..plan.readv_passes(cold) {
                if cold {
                    fixture::drop_cache(&fx.vec_file)?;
                }
                let f = File::open(&fx.vec_file)?;
                m.start();
                let (calls, bytes) = read_file_vectored(&f, &mut bufs)?;
                m.stop(calls, bytes);
            }
        }
        Workload::OpenClose { depth } => {
            let files = fx.tree(depth);
            m.start();
            for _ in 0..plan.tree_passes {
                for p in files.iter() {
                    drop(File::open(p)?);
                }
            }
            m.stop((plan.tree_passes * files.len()) as u64, 0);
        }
        // QD32 is the same loop: a thread of blocking calls has one read
        // in flight.
        Workload::RandRead { .. } | Workload::WarmRead => {
            let offsets = if w == Workload::WarmRead {
                &fx.seq_offsets
            } else {
                &fx.rand_offsets
            };
            let f = File::open(&fx.warm_file)?;
            let mut buf = vec![0u8; READ_LEN];
            m.start();
            for &off in offsets.iter() {
                f.read_exact_at(&mut buf, off)?;
            }
            m.stop(offsets.len() as u64, (offsets.len() * READ_LEN) as u64);
        }
    }
    Ok(m.sample())
}

/// The buffers of a vectored call: [`VEC_BUFS`] of [`VEC_BUF_LEN`] bytes.
pub fn vec_bufs() -> Vec<Vec<u8>> {
    (0..VEC_BUFS)
        .map(|_| fixture::pattern(VEC_BUF_LEN))
        .collect()
}

/// Writes `size` bytes front to back with `pwritev` of `bufs`; returns
/// the number of calls.
///
/// # Errors
///
/// A failed or short write.
pub fn write_file_vectored(f: &File, bufs: &[Vec<u8>], size: u64) -> io::Result<u64> {
    let mut pos = 0;
    let mut calls = 0;
    while pos < size {
        pos += pwritev_all_at(f, bufs, pos)? as u64;
        calls += 1;
    }
    Ok(calls)
}

/// Reads the file front to back with `preadv` into `bufs`, to its end
/// (the call that reads nothing included); returns the calls and bytes.
///
/// # Errors
///
/// A failed read.
pub fn read_file_vectored(f: &File, bufs: &mut [Vec<u8>]) -> io::Result<(u64, u64)> {
    let (mut pos, mut calls) = (0u64, 0u64);
    loop {
        let n = preadv_at(f, bufs, pos)?;
        calls += 1;
        if n == 0 {
            return Ok((calls, pos));
        }
        pos += n as u64;
    }
}

/// One `pwritev` of all of `bufs` at `pos`; a short write is an error
/// (a regular file with room takes it all).
///
/// # Errors
///
/// A failed or short write.
pub fn pwritev_all_at(f: &File, bufs: &[Vec<u8>], pos: u64) -> io::Result<usize> {
    let iov: Vec<libc::iovec> = bufs
        .iter()
        .map(|b| libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        })
        .collect();
    let want: usize = bufs.iter().map(Vec::len).sum();
    // SAFETY: `iov` describes live buffers that the call only reads.
    let n = retry(|| unsafe {
        libc::pwritev(f.as_raw_fd(), iov.as_ptr(), iov.len() as i32, pos as i64)
    })?;
    if n != want {
        return Err(io::Error::other(format!("short pwritev: {n} of {want}")));
    }
    Ok(n)
}

/// One `preadv` into `bufs` (each to its length) from `pos`.
///
/// # Errors
///
/// A failed read.
pub fn preadv_at(f: &File, bufs: &mut [Vec<u8>], pos: u64) -> io::Result<usize> {
    let iov: Vec<libc::iovec> = bufs
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        })
        .collect();
    // SAFETY: `iov` describes live buffers, borrowed mutably for the
    // call, of which the kernel writes at most `iov_len` bytes each.
    retry(|| unsafe { libc::preadv(f.as_raw_fd(), iov.as_ptr(), iov.len() as i32, pos as i64) })
}

/// Runs a syscall until it is not interrupted.
fn retry(mut call: impl FnMut() -> isize) -> io::Result<usize> {
    loop {
        let n = call();
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
