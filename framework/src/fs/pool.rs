//! The blocking pool: a few threads that run the file calls an epoll core
//! cannot make without blocking (opens, reads that miss the page cache,
//! writes a file system will not take with `RWF_NOWAIT`, fsync, directory
//! operations).
//!
//! Unlike [`spawn_blocking`](crate::spawn_blocking), which starts a thread
//! per call, [`WORKERS`] threads shared by all cores take jobs from one
//! bounded queue; each result goes back through a one-value channel whose
//! waker reaches the core through its remote wake.
//!
//! Two kinds of job. A [`run`] job is a boxed closure that owns what it
//! uses: if its future is dropped, it still runs to the end and drops
//! them itself. A [`read_write`] job is a positioned read or write of
//! memory its caller's future owns: nothing is boxed, and the reply
//! channel is reused from a per-thread spare list, so in steady state it
//! allocates nothing; if its future is dropped first, the buffer moves
//! into the reply channel, which the pool thread lets go of only after
//! the call.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::mpsc::{self, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use super::sys;
use crate::sync::oneshot;

/// Threads in the pool, started with the first job: enough to keep a
/// few slow disk calls from queueing behind one another, few enough to
/// stay out of the cores' way.
pub(crate) const WORKERS: usize = 4;

/// Jobs waiting at most; a core whose job finds the queue full runs it
/// itself, blocking, rather than wait or drop it.
const QUEUE: usize = 1024;

/// The iovecs a [`read_write`] job carries inline; more go to [`run`].
pub(crate) const INLINE_IOVECS: usize = 8;

/// Reply channels a thread keeps for its next read or write jobs.
const SPARE_REPLIES: usize = 32;

enum Job {
    Call(Box<dyn FnOnce() + Send>),
    ReadWrite(ReadWrite),
}

impl Job {
    fn run(self) {
        match self {
            Job::Call(f) => f(),
            Job::ReadWrite(rw) => rw.run(),
        }
    }
}

static POOL: OnceLock<mpsc::SyncSender<Job>> = OnceLock::new();

fn start() -> mpsc::SyncSender<Job> {
    let (tx, rx) = mpsc::sync_channel::<Job>(QUEUE);
    let rx = Arc::new(Mutex::new(rx));
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
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run()));
            });
        if let Err(e) = started {
            // The threads that did start serve the jobs; with none at
            // all, `submit` runs each job itself.
            tracing::error!(error = %e, "could not start a file I/O thread");
        }
    }
    tx
}

/// Queues `job`, or runs it here, blocking the core, when the queue is
/// full or no thread could start: late, rather than lose the buffer it
/// names.
fn submit(job: Job) {
    match POOL.get_or_init(start).try_send(job) {
        Ok(()) => {}
        Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => job.run(),
    }
}

/// Runs `f` on the pool; the future completes with its result.
pub(crate) fn run<T, F>(f: F) -> PoolCall<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    submit(Job::Call(Box::new(move || tx.send(f()))));
    PoolCall { rx }
}

/// The result of a job on the pool, to await.
pub(crate) struct PoolCall<T> {
    rx: oneshot::Receiver<T>,
}

impl<T> Future for PoolCall<T> {
    type Output = io::Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        self.rx.poll_recv(cx).map(|value| value.ok_or_else(unwound))
    }
}

fn unwound() -> io::Error {
    io::Error::other("the file I/O thread failed")
}

/// A `preadv2`/`pwritev2` of memory that the submitting future owns.
struct ReadWrite {
    fd: Arc<OwnedFd>,
    write: bool,
    iov: [libc::iovec; INLINE_IOVECS],
    count: usize,
    pos: u64,
    reply: oneshot::Sender<io::Result<usize>>,
}

// SAFETY: the iovecs' raw pointers are what keeps this from being `Send`.
// They name memory of a buffer that is itself `Send` and that nothing
// touches until the reply: its future holds it until the reply arrives,
// or, dropped first, moves it into the reply channel, freed only after
// this job's sender (dropped after the call) is gone.
unsafe impl Send for ReadWrite {}

impl ReadWrite {
    fn run(self) {
        let (fd, iov) = (self.fd.as_raw_fd(), &self.iov[..self.count]);
        let res = if self.write {
            // SAFETY: the iovecs name live, unaliased memory (see `Send`).
            unsafe { sys::pwritev(fd, iov, self.pos, 0) }
        } else {
            // SAFETY: as above, and the caller gave it up for writing.
            unsafe { sys::preadv(fd, iov, self.pos, 0) }
        };
        self.reply.send(res);
    }
}

/// Reply channels a thread starts with: more than the pool has threads,
/// so that a core with one call at a time always finds one free, even if
/// every pool thread has sent its reply and not yet let go of its end.
const RESERVED_REPLIES: usize = 2 * WORKERS;

thread_local! {
    /// Reply channels of finished jobs, oldest first: the oldest's pool
    /// thread has had the longest to let go of its sender.
    static SPARE: std::cell::RefCell<VecDeque<oneshot::Receiver<io::Result<usize>>>> = {
        let mut spare = VecDeque::with_capacity(SPARE_REPLIES);
        spare.extend((0..RESERVED_REPLIES).map(|_| oneshot::channel().1));
        std::cell::RefCell::new(spare)
    };
}

/// A reply channel: a spare whose last pool thread has let go of it, or
/// a new one. A spare still held (its thread has sent but not yet
/// dropped its end) goes to the back of the list rather than away.
fn reply_channel() -> (
    oneshot::Sender<io::Result<usize>>,
    oneshot::Receiver<io::Result<usize>>,
) {
    let reused = SPARE.with(|spare| {
        let mut spare = spare.borrow_mut();
        for _ in 0..spare.len() {
            let mut rx = spare.pop_front()?;
            match rx.reset() {
                Some(tx) => return Some((tx, rx)),
                None => spare.push_back(rx),
            }
        }
        None
    });
    reused.unwrap_or_else(oneshot::channel)
}

/// Reads into (or, if `write`, writes from) the memory `iov` names, at
/// `pos`, on the pool; the future gives `buf` back with the result.
///
/// # Safety
///
/// `iov` (at most [`INLINE_IOVECS`] entries) names heap memory of `buf`
/// that stays where it is when `buf` moves, writable for a read, and that
/// nothing else uses while `buf` is in the future or its reply channel.
pub(crate) unsafe fn read_write<B: Send + 'static>(
    fd: Arc<OwnedFd>,
    write: bool,
    iov: &[libc::iovec],
    pos: u64,
    buf: B,
) -> PoolIo<B> {
    let mut inline = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; INLINE_IOVECS];
    let count = iov.len().min(INLINE_IOVECS);
    inline[..count].copy_from_slice(&iov[..count]);
    let (reply, rx) = reply_channel();
    submit(Job::ReadWrite(ReadWrite {
        fd,
        write,
        iov: inline,
        count,
        pos,
        reply,
    }));
    PoolIo {
        rx: Some(rx),
        buf: Some(buf),
    }
}

/// A [`read_write`] job's result, and its buffer back.
pub(crate) struct PoolIo<B: Send + 'static> {
    rx: Option<oneshot::Receiver<io::Result<usize>>>,
    buf: Option<B>,
}

// Neither field is pinned: the job names the buffer's heap memory only.
impl<B: Send + 'static> Unpin for PoolIo<B> {}

impl<B: Send + 'static> Future for PoolIo<B> {
    type Output = (io::Result<usize>, B);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(rx) = this.rx.as_ref() else {
            panic!("PoolIo polled after completion")
        };
        let res = match rx.poll_recv(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(res) => res.unwrap_or_else(|| Err(unwound())),
        };
        if let Some(rx) = this.rx.take() {
            SPARE.with(|spare| {
                let mut spare = spare.borrow_mut();
                if spare.len() < SPARE_REPLIES {
                    spare.push_back(rx);
                }
            });
        }
        let Some(buf) = this.buf.take() else {
            unreachable!("the buffer stays until the reply")
        };
        Poll::Ready((res, buf))
    }
}

impl<B: Send + 'static> Drop for PoolIo<B> {
    fn drop(&mut self) {
        if let (Some(rx), Some(buf)) = (self.rx.take(), self.buf.take()) {
            // The pool thread may still use the buffer: it goes with the
            // channel, dropped after the thread's sender.
            rx.keep_until_sent(Box::new(buf));
        }
    }
}
