//! What the models share. Everything here is test scaffolding around the
//! framework's real `percore::sync` types; nothing re-implements them.
//!
//! Scaffolding is shared through `std::sync::Arc`, not loom's: when loom
//! finds a deadlock it panics with no thread active, and a loom `Arc`
//! dropped while that panic unwinds panics again and aborts the process,
//! which would hide the report and break `#[should_panic]` models. The
//! framework's own `Arc`s (inside `oneshot`) stay loom's and are checked
//! for leaks.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::task::{Wake, Waker};
use std::time::Instant;

use std::sync::Arc;

use loom::sync::{Condvar, Mutex};
use percore::sync::{Notify, Parker, PushError, Remote};

/// Preemption bound used when `LOOM_MAX_PREEMPTIONS` is not set, so that
/// a plain `cargo test` under `--cfg loom` still finishes in minutes.
pub const DEFAULT_PREEMPTIONS: usize = 2;

/// The model of a core's eventfd: a level-triggered flag that a parked
/// thread blocks on. A notification that nobody consumes stays set (like an
/// eventfd counter), so waking early is fine; a notification that never
/// comes leaves the waiter blocked, which loom reports as a deadlock.
#[derive(Debug)]
pub struct Doorbell {
    /// `(rung, rings so far)`.
    state: Mutex<(bool, usize)>,
    cv: Condvar,
}

impl Doorbell {
    /// A doorbell that has not been rung.
    pub fn new() -> Arc<Doorbell> {
        Arc::new(Doorbell {
            state: Mutex::new((false, 0)),
            cv: Condvar::new(),
        })
    }

    /// Sets the flag and wakes a waiter (an eventfd write).
    pub fn ring(&self) {
        let mut state = self.state.lock().unwrap();
        state.0 = true;
        state.1 += 1;
        self.cv.notify_one();
    }

    /// Blocks until rung, then clears the flag (an eventfd read).
    pub fn wait(&self) {
        let mut state = self.state.lock().unwrap();
        while !state.0 {
            state = self.cv.wait(state).unwrap();
        }
        state.0 = false;
    }

    /// How many times it was rung.
    pub fn rings(&self) -> usize {
        self.state.lock().unwrap().1
    }
}

/// The [`Notify`] the models give a [`Parker`]: rings a [`Doorbell`].
#[derive(Debug, Clone)]
pub struct Bell(pub Arc<Doorbell>);

impl Notify for Bell {
    fn notify(&self) {
        self.0.ring();
    }
}

struct BellWaker(Arc<Doorbell>);

impl Wake for BellWaker {
    fn wake(self: Arc<Self>) {
        self.0.ring();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.ring();
    }
}

/// A [`Waker`] that rings `bell`: a task on another core, reduced to the
/// one thing the protocol needs (its core gets notified).
pub fn waker(bell: &Arc<Doorbell>) -> Waker {
    Waker::from(Arc::new(BellWaker(bell.clone())))
}

/// The cross-thread part of one core, as `runtime/shared.rs` builds it:
/// an inbox and a parker whose notifier is the core's "eventfd".
#[derive(Debug)]
pub struct Core<T> {
    /// The real parker.
    pub parker: Parker<Bell>,
    /// What the parker rings, and what the parked core waits on.
    pub bell: Arc<Doorbell>,
    /// The real bounded inbox.
    pub inbox: Remote<T>,
}

impl<T> Core<T> {
    /// A core whose inbox holds `capacity` items, shared with a `std` `Arc`.
    pub fn new(capacity: usize) -> Arc<Core<T>> {
        Arc::new(Core::bare(capacity))
    }

    /// A core not yet shared (to put in a loom `Arc`, whose drop loom checks).
    pub fn bare(capacity: usize) -> Core<T> {
        let bell = Doorbell::new();
        Core {
            parker: Parker::new(Bell(bell.clone())),
            bell,
            inbox: Remote::new(capacity),
        }
    }

    /// What another thread does to hand the core an item: push, then
    /// unpark (`CoreShared::wake_remote`, `submit_to`).
    pub fn send(&self, item: T) -> Result<(), PushError<T>> {
        self.inbox.push(item)?;
        self.parker.unpark();
        Ok(())
    }

    /// The end of the real loop turn (`Core::turn`): announce the park,
    /// re-check for work, block on the "eventfd" only if there is none.
    pub fn park(&self, has_work: impl FnOnce() -> bool) {
        if self.parker.prepare_park(has_work) {
            self.bell.wait();
            self.parker.finish_park();
        }
    }

    /// [`Core::park`] with the inbox as the only source of work.
    pub fn park_on_inbox(&self) {
        self.park(|| self.inbox.has_items());
    }

    /// Drains the inbox into `out`.
    pub fn drain(&self, out: &mut VecDeque<T>) -> usize {
        self.inbox.drain_into(out)
    }
}

/// Runs `model` under loom and prints how many interleavings it explored
/// and how long that took (or, when the model fails, at which interleaving
/// loom found the failure); returns the count.
///
/// The preemption bound is `LOOM_MAX_PREEMPTIONS` when set, otherwise
/// [`DEFAULT_PREEMPTIONS`].
pub fn check<F>(name: &str, model: F) -> usize
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_none() {
        builder.preemption_bound = Some(DEFAULT_PREEMPTIONS);
    }
    let report = Report {
        name,
        runs: Arc::new(AtomicUsize::new(0)),
        start: Instant::now(),
        bound: builder.preemption_bound,
    };
    let counter = report.runs.clone();
    builder.check(move || {
        counter.fetch_add(1, Relaxed);
        model();
    });
    report.runs.load(Relaxed)
}

/// Prints the outcome of [`check`] when it returns or unwinds.
struct Report<'a> {
    name: &'a str,
    runs: Arc<AtomicUsize>,
    start: Instant,
    bound: Option<usize>,
}

impl Drop for Report<'_> {
    fn drop(&mut self) {
        let n = self.runs.load(Relaxed);
        let bound = self
            .bound
            .map_or_else(|| "none".to_owned(), |b| b.to_string());
        let elapsed = self.start.elapsed();
        if std::thread::panicking() {
            println!(
                "loom model {}: FAILED at interleaving {n} after {elapsed:.2?} (preemption bound {bound})",
                self.name
            );
        } else {
            println!(
                "loom model {}: {n} interleavings in {elapsed:.2?} (preemption bound {bound})",
                self.name
            );
        }
    }
}
