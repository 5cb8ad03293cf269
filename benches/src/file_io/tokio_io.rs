//! The `tokio::fs` column, on a current-thread runtime.
//!
//! `tokio::fs::File` writes sequentially and opens files; it has no
//! positional or vectored calls, so those run as `spawn_blocking` of the
//! `std` call, one hop to the blocking pool per call: what `tokio::fs`
//! itself does for each of its calls. Reads at QD32 are 32 tasks.

use std::fs::File as StdFile;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use tokio::io::AsyncWriteExt as _;

use super::fixture::{self, Fixture};
use super::meter::{Meter, Sample};
use super::plan::Plan;
use super::{std_io, Workload, READ_LEN};

/// Runs one cell of `w` on a new current-thread runtime.
///
/// # Errors
///
/// The runtime could not start, or the first failed call.
pub fn run(w: Workload, fx: &Fixture, plan: &Plan) -> io::Result<Sample> {
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    rt.block_on(cell(w, fx, plan))
}

async fn cell(w: Workload, fx: &Fixture, plan: &Plan) -> io::Result<Sample> {
    let mut m = Meter::new();
    match w {
        Workload::SeqWrite { size, chunk } => {
            let buf = fixture::pattern(chunk);
            for _ in 0..plan.files_per_cell(size) {
                let path = fx.scratch_file("tokio-seq");
                let mut f = tokio::fs::File::create(&path).await?;
                m.start();
                let mut pos = 0;
                while pos < size {
                    f.write_all(&buf).await?;
                    pos += chunk as u64;
                }
                // The last write is still on the pool until this.
                f.flush().await?;
                m.stop(size / chunk as u64, size);
                f.sync_all().await?;
                drop(f);
                tokio::fs::remove_file(&path).await?;
            }
        }
        Workload::Writev { size } => {
            let mut bufs = std_io::vec_bufs();
            for _ in 0..plan.files_per_cell(size) {
                let path = fx.scratch_file("tokio-writev");
                let f = Arc::new(tokio::fs::File::create(&path).await?.into_std().await);
                m.start();
                let (mut pos, mut calls) = (0, 0);
                while pos < size {
                    let f = f.clone();
                    let (n, back) = blocking(move || {
                        let n = std_io::pwritev_all_at(&f, &bufs, pos);
                        (n, bufs)
                    })
                    .await?;
                    bufs = back;
                    pos += n? as u64;
                    calls += 1;
                }
                m.stop(calls, size);
                f.sync_all()?;
                drop(f);
                tokio::fs::remove_file(&path).await?;
            }
        }
        Workload::Readv { cold } => {
            let mut bufs = std_io::vec_bufs();
            for _ in 0..plan.readv_passes(cold) {
                if cold {
                    fixture::drop_cache(&fx.vec_file)?;
                }
                let f = Arc::new(tokio::fs::File::open(&fx.vec_file).await?.into_std().await);
                m.start();
                let (mut pos, mut calls) = (0, 0);
                loop {
                    let f = f.clone();
                    let (n, back) = blocking(move || {
                        let n = std_io::preadv_at(&f, &mut bufs, pos);
                        (n, bufs)
                    })
                    .await?;
                    bufs = back;
                    calls += 1;
                    match n? {
                        0 => break,
                        n => pos += n as u64,
                    }
                }
                m.stop(calls, pos);
            }
        }
        Workload::OpenClose { depth } => {
            let files = fx.tree(depth);
            m.start();
            for _ in 0..plan.tree_passes {
                for p in files.iter() {
                    // tokio::fs has no asynchronous close: dropping the
                    // file closes it here, as an application would.
                    drop(tokio::fs::File::open(p).await?);
                }
            }
            m.stop((plan.tree_passes * files.len()) as u64, 0);
        }
        Workload::RandRead { qd } => {
            let f = Arc::new(StdFile::open(&fx.warm_file)?);
            m.start();
            reads(&f, &fx.rand_offsets, qd).await?;
            m.stop(
                fx.rand_offsets.len() as u64,
                (fx.rand_offsets.len() * READ_LEN) as u64,
            );
        }
        Workload::WarmRead => {
            let f = Arc::new(StdFile::open(&fx.warm_file)?);
            m.start();
            reads(&f, &fx.seq_offsets, 1).await?;
            m.stop(
                fx.seq_offsets.len() as u64,
                (fx.seq_offsets.len() * READ_LEN) as u64,
            );
        }
    }
    Ok(m.sample())
}

/// [`READ_LEN`] reads at `offsets`, by `qd` tasks that each take every
/// `qd`-th offset.
async fn reads(f: &Arc<StdFile>, offsets: &Arc<Vec<u64>>, qd: usize) -> io::Result<()> {
    let tasks: Vec<_> = (0..qd)
        .map(|first| {
            let (f, offsets) = (f.clone(), offsets.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; READ_LEN];
                for i in (first..offsets.len()).step_by(qd) {
                    let (f, off) = (f.clone(), offsets[i]);
                    let (res, back) = blocking(move || {
                        let res = f.read_exact_at(&mut buf, off);
                        (res, buf)
                    })
                    .await?;
                    buf = back;
                    res?;
                }
                io::Result::Ok(())
            })
        })
        .collect();
    for t in tasks {
        t.await.map_err(io::Error::other)??;
    }
    Ok(())
}

/// `spawn_blocking`, its join error as an `io::Error`.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(io::Error::other)
}
