//! The percore columns: `percore::fs` inside `percore::block_on` on an
//! io_uring or an epoll core, one new core (on its own thread) per cell.
//!
//! QD32 is 32 `spawn_local` tasks on the one core, sharing the file. The
//! `uring+nowait` cells read with `preadv2(RWF_NOWAIT)` on the file's fd,
//! on the core, and submit to the ring only when that says `EAGAIN` (the
//! data is not in the page cache).

use std::io;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::Arc;

use percore::fs::File;
use percore::Backend;

use super::fixture::{self, Fixture};
use super::meter::Meter;
use super::plan::Plan;
use super::{Impl, Outcome, Workload, READ_LEN};

/// Runs one cell of `w` for `imp` (one of the percore columns) on a new
/// core of its backend, on a thread of its own.
///
/// # Errors
///
/// The backend could not start, the cell panicked, or the first failed
/// call.
pub fn run(imp: Impl, w: Workload, fx: &Arc<Fixture>, plan: &Plan) -> io::Result<Outcome> {
    let backend = match imp {
        Impl::Epoll => Backend::Epoll,
        _ => Backend::Uring,
    };
    let (fx, plan) = (fx.clone(), plan.clone());
    // A thread per cell: the ring's clean-up after `block_on` may
    // interrupt a later blocking call of the thread that ran it.
    std::thread::spawn(move || percore::block_on(backend, cell(imp, w, fx, plan)))
        .join()
        .map_err(|_| io::Error::other("the cell's thread panicked"))??
}

async fn cell(imp: Impl, w: Workload, fx: Arc<Fixture>, plan: Plan) -> io::Result<Outcome> {
    if imp == Impl::UringFixed {
        return Ok(Outcome::Skipped(
            "no read_fixed_at/write_fixed_at yet".into(),
        ));
    }
    let mut m = Meter::new();
    match w {
        Workload::SeqWrite { size, chunk } => {
            let mut buf = fixture::pattern(chunk);
            for _ in 0..plan.files_per_cell(size) {
                let path = fx.scratch_file("percore-seq");
                let f = File::create(&path).await?;
                m.start();
                let mut pos = 0;
                while pos < size {
                    let (res, back) = f.write_all_at(buf, pos).await;
                    buf = back;
                    res?;
                    pos += chunk as u64;
                }
                m.stop(size / chunk as u64, size);
                f.sync_all().await?;
                f.close().await?;
                percore::fs::remove_file(&path).await?;
            }
        }
        Workload::Writev { .. } => {
            return Ok(Outcome::Skipped("no writev_at yet".into()));
        }
        Workload::Readv { .. } => {
            return Ok(Outcome::Skipped("no readv_at yet".into()));
        }
        Workload::OpenClose { depth } => {
            let files = fx.tree(depth);
            m.start();
            for _ in 0..plan.tree_passes {
                for p in files.iter() {
                    File::open(p).await?.close().await?;
                }
            }
            m.stop((plan.tree_passes * files.len()) as u64, 0);
        }
        Workload::RandRead { qd } => {
            let f = Rc::new(File::open(&fx.warm_file).await?);
            let offsets = fx.rand_offsets.clone();
            m.start();
            let fallbacks = reads(&f, &offsets, qd, imp == Impl::UringNowait).await?;
            m.stop(offsets.len() as u64, (offsets.len() * READ_LEN) as u64);
            m.fallbacks(fallbacks);
        }
        Workload::WarmRead => {
            let f = Rc::new(File::open(&fx.warm_file).await?);
            let offsets = fx.seq_offsets.clone();
            m.start();
            let fallbacks = reads(&f, &offsets, 1, imp == Impl::UringNowait).await?;
            m.stop(offsets.len() as u64, (offsets.len() * READ_LEN) as u64);
            m.fallbacks(fallbacks);
        }
    }
    Ok(Outcome::Ran(m.sample()))
}

/// [`READ_LEN`] reads at `offsets` by `qd` tasks that each take every
/// `qd`-th offset; returns how many `nowait` reads went to the ring.
async fn reads(f: &Rc<File>, offsets: &Arc<Vec<u64>>, qd: usize, nowait: bool) -> io::Result<u64> {
    if qd == 1 {
        return read_share(f.clone(), offsets.clone(), 0, 1, nowait).await;
    }
    let tasks: Vec<_> = (0..qd)
        .map(|first| {
            percore::spawn_local(read_share(f.clone(), offsets.clone(), first, qd, nowait))
        })
        .collect();
    let mut fallbacks = 0;
    for t in tasks {
        fallbacks += t.await.map_err(|e| io::Error::other(e.to_string()))??;
    }
    Ok(fallbacks)
}

/// The reads of one task: offsets `first`, `first + step`, ...
async fn read_share(
    f: Rc<File>,
    offsets: Arc<Vec<u64>>,
    first: usize,
    step: usize,
    nowait: bool,
) -> io::Result<u64> {
    let mut buf = vec![0u8; READ_LEN];
    let mut fallbacks = 0;
    for &off in offsets.iter().skip(first).step_by(step) {
        if nowait {
            match read_nowait(&f, &mut buf, off) {
                Ok(n) if n == READ_LEN => continue,
                Err(e) if e.raw_os_error() != Some(libc::EAGAIN) => return Err(e),
                _ => fallbacks += 1,
            }
        }
        let (res, back) = f.read_exact_at(buf, off).await;
        buf = back;
        res?;
    }
    Ok(fallbacks)
}

/// One `preadv2(RWF_NOWAIT)` on the core: what the page cache has now,
/// or `EAGAIN`.
fn read_nowait(f: &File, buf: &mut [u8], off: u64) -> io::Result<usize> {
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: `iov` describes `buf`, borrowed mutably for the call; the
    // kernel writes at most `buf.len()` bytes.
    let n = unsafe { libc::preadv2(f.as_raw_fd(), &iov, 1, off as i64, libc::RWF_NOWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}
