//! The blocking pool: a few threads that run the file calls an epoll core
//! cannot make without blocking (opens, reads that miss the page cache,
//! fsync, directory operations).
//!
//! Unlike [`spawn_blocking`](crate::spawn_blocking), which starts a thread
//! per call, [`WORKERS`] threads shared by all cores take jobs from one
//! channel; each result goes back through a one-value channel whose waker
//! reaches the core through its remote wake. A job owns everything it
//! uses (buffer, file reference): if its future is dropped, the job still
//! runs to the end and drops them itself, on its own thread.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll};

use crate::sync::oneshot;

/// Threads in the pool, started with the first job: enough to keep a
/// few slow disk calls from queueing behind one another, few enough to
/// stay out of the cores' way.
pub(crate) const WORKERS: usize = 4;

type Job = Box<dyn FnOnce() + Send>;

static POOL: OnceLock<mpsc::Sender<Job>> = OnceLock::new();

fn start() -> mpsc::Sender<Job> {
    let (tx, rx) = mpsc::channel::<Job>();
    let rx = std::sync::Arc::new(Mutex::new(rx));
    for i in 0..WORKERS {
        let rx = rx.clone();
        let started = std::thread::Builder::new()
            .name(format!("percore-fs-{i}"))
            .spawn(move || loop {
                // The lock is held only to take a job, not to run it.
                let job = match rx.lock() {
                    Ok(rx) => rx.recv(),
                    Err(poisoned) => poisoned.into_inner().recv(),
                };
                let Ok(job) = job else { return };
                // A job that unwinds drops its reply sender, which tells
                // its caller; the thread lives on for the next job.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            });
        if let Err(e) = started {
            // The threads that did start serve the jobs; with none at
            // all, `run` runs each job itself.
            tracing::error!(error = %e, "could not start a file I/O thread");
        }
    }
    tx
}

/// Runs `f` on the pool; the future completes with its result.
pub(crate) fn run<T, F>(f: F) -> PoolCall<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let job: Job = Box::new(move || tx.send(f()));
    // No thread could start: the job runs here, blocking the core, rather
    // than lose the buffer it owns.
    if let Err(mpsc::SendError(job)) = POOL.get_or_init(start).send(job) {
        job();
    }
    PoolCall { rx }
}

/// The result of a job on the pool, to await.
pub(crate) struct PoolCall<T> {
    rx: oneshot::Receiver<T>,
}

impl<T> Future for PoolCall<T> {
    type Output = io::Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        self.rx.poll_recv(cx).map(|value| {
            // The sender dropped unsent: the job unwound.
            value.ok_or_else(|| io::Error::other("the file I/O thread failed"))
        })
    }
}
