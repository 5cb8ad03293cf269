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

use percore::buf::{FixedBuf, IoBuf};
use percore::fs::File;
use percore::Backend;

use super::fixture::{self, Fixture};
use super::meter::Meter;
use super::plan::Plan;
use super::{size_label, Impl, Outcome, Workload, READ_LEN, VEC_BUFS, VEC_BUF_LEN};

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
    on_thread(backend, move || cell(imp, w, fx, plan))?
}

async fn cell(imp: Impl, w: Workload, fx: Arc<Fixture>, plan: Plan) -> io::Result<Outcome> {
    let mut m = Meter::new();
    match w {
        Workload::SeqWrite { size, chunk } if imp == Impl::UringFixed => {
            let Some(mut buf) = FixedBuf::take() else {
                return Ok(Outcome::Skipped("no free FixedBuf on the core".into()));
            };
            if chunk > buf.capacity() {
                let why = format!("a FixedBuf holds {}", size_label(buf.capacity() as u64));
                return Ok(Outcome::Skipped(why));
            }
            buf.extend_from_slice(&fixture::pattern(chunk));
            for _ in 0..plan.files_per_cell(size) {
                let path = fx.scratch_file("percore-fixed");
                let f = File::create(&path).await?;
                m.start();
                let mut pos = 0;
                while pos < size {
                    let (res, back) = f.write_fixed_at(buf, pos).await;
                    buf = back;
                    whole(res?, chunk)?;
                    pos += chunk as u64;
                }
                m.stop(size / chunk as u64, size);
                f.sync_all().await?;
                f.close().await?;
                percore::fs::remove_file(&path).await?;
            }
        }
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
        Workload::Writev { size } => {
            let mut bufs: [Vec<u8>; VEC_BUFS] =
                std::array::from_fn(|_| fixture::pattern(VEC_BUF_LEN));
            let per_call = VEC_BUFS * VEC_BUF_LEN;
            for _ in 0..plan.files_per_cell(size) {
                let path = fx.scratch_file("percore-writev");
                let f = File::create(&path).await?;
                m.start();
                let (mut pos, mut calls) = (0, 0);
                while pos < size {
                    let (res, back) = f.writev_at(bufs, pos).await;
                    bufs = back;
                    pos += whole(res?, per_call)? as u64;
                    calls += 1;
                }
                m.stop(calls, size);
                f.sync_all().await?;
                f.close().await?;
                percore::fs::remove_file(&path).await?;
            }
        }
        Workload::Readv { cold } => {
            let mut bufs: [Vec<u8>; VEC_BUFS] =
                std::array::from_fn(|_| Vec::with_capacity(VEC_BUF_LEN));
            for _ in 0..plan.readv_passes(cold) {
                if cold {
                    fixture::drop_cache(&fx.vec_file)?;
                }
                let f = File::open(&fx.vec_file).await?;
                m.start();
                let (mut pos, mut calls) = (0, 0);
                loop {
                    let (res, back) = f.readv_at(bufs, pos).await;
                    bufs = back;
                    calls += 1;
                    match res? {
                        0 => break,
                        n => pos += n as u64,
                    }
                }
                m.stop(calls, pos);
                f.close().await?;
            }
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
        Workload::RandRead { .. } | Workload::WarmRead if imp == Impl::UringFixed => {
            let why = "a fixed read fills the FixedBuf's whole capacity, not 4 KiB";
            return Ok(Outcome::Skipped(why.into()));
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

/// `n` if it is the `want` bytes a call was given; a regular file with
/// room takes them all, so a short count is reported, not continued.
fn whole(n: usize, want: usize) -> io::Result<usize> {
    if n == want {
        Ok(n)
    } else {
        Err(io::Error::other(format!("short call: {n} of {want} bytes")))
    }
}

/// What the `uring fixed` cells use: the size of a [`FixedBuf`] and
/// whether the kernel took the pool's registration (else the cells are
/// plain reads and writes from the same memory).
///
/// # Errors
///
/// io_uring could not start.
pub fn fixed_buffers() -> io::Result<String> {
    on_thread(Backend::Uring, || async {
        match FixedBuf::take() {
            None => "uring fixed: no FixedBuf on an io_uring core".to_string(),
            Some(buf) => format!(
                "uring fixed: FixedBuf of {}, {}",
                size_label(buf.capacity() as u64),
                if IoBuf::fixed_index(&buf).is_some() {
                    "registered with the ring"
                } else {
                    "NOT registered (RLIMIT_MEMLOCK?): plain reads and writes"
                }
            ),
        }
    })
}

/// `block_on` on a thread of its own: the ring's clean-up after it may
/// interrupt a later blocking call of the thread that ran it.
fn on_thread<T, F>(backend: Backend, make: impl FnOnce() -> F + Send + 'static) -> io::Result<T>
where
    T: Send + 'static,
    F: std::future::Future<Output = T> + 'static,
{
    std::thread::spawn(move || percore::block_on(backend, make()))
        .join()
        .map_err(|_| io::Error::other("the core's thread panicked"))?
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
