//! What the models share. Everything here is test scaffolding around the
//! framework's real `percore::sync` code; nothing re-implements it. What
//! stands in for the kernel (the eventfd, the io_uring read on it) and for
//! the executor's single-threaded parts (the run queue, the task handle) is
//! scaffolding; every decision of the wake and park path is the framework's
//! own `percore::sync::wake` function, instantiated here.
//!
//! Scaffolding is shared through `std::sync::Arc`, not loom's: when loom
//! finds a deadlock it panics with no thread active, and a loom `Arc`
//! dropped while that panic unwinds panics again and aborts the process,
//! which would hide the report and break `#[should_panic]` models. The
//! framework's own `Arc`s (inside `oneshot`) stay loom's and are checked
//! for leaks.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use loom::sync::{Condvar, Mutex};
use loom::thread::ThreadId;
use percore::sync::wake::Waking;
use percore::sync::{CoreSide, Notify, Parker, PushError, Remote, Shutdown, TaskState, WakeRead};

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

    /// Clears the flag if it was set, without blocking; whether it was (a
    /// non-blocking eventfd read).
    pub fn try_take(&self) -> bool {
        std::mem::replace(&mut self.state.lock().unwrap().0, false)
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
/// the real parker (whose notifier rings the core's "eventfd"), the real
/// wake inbox and mailbox, and the server's real stop latch. Everything a
/// wake or a park does to it goes through `percore::sync::wake`, via
/// [`Core::side`]. Besides, the core's local run queue, which only the
/// thread that created the core touches (as the executor's `RefCell`).
#[derive(Debug)]
pub struct Core<M = u32> {
    /// The real parker.
    pub parker: Parker<Bell>,
    /// What the parker rings, and what the parked core waits on.
    pub bell: Arc<Doorbell>,
    /// The real wake inbox (task keys).
    pub wakes: Remote<u32>,
    /// The real mailbox (cross-core messages).
    pub mailbox: Remote<M>,
    /// The real stop latch, shared by the cores of one server.
    pub shutdown: Arc<Shutdown>,
    /// The thread that runs the core: the one that built it.
    owner: ThreadId,
    /// Keys of tasks ready to run (the executor's run queue). A plain `std`
    /// mutex, invisible to loom: only the owner thread touches it, so it
    /// adds no interleavings.
    run_queue: std::sync::Mutex<VecDeque<u32>>,
}

impl<M> Core<M> {
    /// A core whose inboxes hold `capacity` items each, with a stop latch of
    /// its own, shared with a `std` `Arc`. The calling thread runs it.
    pub fn new(capacity: usize) -> Arc<Core<M>> {
        Arc::new(Core::bare(capacity))
    }

    /// A core of a server whose stop latch is `shutdown`.
    pub fn with_shutdown(capacity: usize, shutdown: Arc<Shutdown>) -> Arc<Core<M>> {
        let mut core = Core::bare(capacity);
        core.shutdown = shutdown;
        Arc::new(core)
    }

    /// A core whose wake inbox holds `wakes` keys and whose mailbox holds
    /// `messages` items.
    pub fn with_capacities(wakes: usize, messages: usize) -> Arc<Core<M>> {
        let mut core = Core::bare(messages);
        core.wakes = Remote::new(wakes);
        Arc::new(core)
    }

    /// A core not yet shared.
    pub fn bare(capacity: usize) -> Core<M> {
        let bell = Doorbell::new();
        Core {
            parker: Parker::new(Bell(bell.clone())),
            bell,
            wakes: Remote::new(capacity),
            mailbox: Remote::new(capacity),
            shutdown: Arc::new(Shutdown::new()),
            owner: loom::thread::current().id(),
            run_queue: std::sync::Mutex::new(VecDeque::new()),
        }
    }

    /// The core's cross-thread side, as `CoreShared::side` lends it.
    pub fn side(&self) -> CoreSide<'_, u32, M, Bell> {
        CoreSide {
            parker: &self.parker,
            wakes: &self.wakes,
            mailbox: &self.mailbox,
            shutdown: &self.shutdown,
        }
    }

    /// What another thread does to hand the core a message: the real
    /// `CoreSide::send` (push, then unpark), without back-pressure.
    pub fn send(&self, message: M) -> Result<(), PushError<M>> {
        self.side().send(message, None)
    }

    /// Drains the mailbox into `out`.
    pub fn drain(&self, out: &mut VecDeque<M>) -> usize {
        self.mailbox.drain_into(out)
    }

    /// Whether the calling thread runs this core.
    pub fn is_owner(&self) -> bool {
        loom::thread::current().id() == self.owner
    }

    /// `Core::take_remote_wakes` for task keys: moves the wake inbox into
    /// the run queue. Owner thread only.
    pub fn take_remote_wakes(&self) -> usize {
        assert!(self.is_owner(), "only the owner core drains its wakes");
        self.wakes.drain_into(&mut self.run_queue.lock().unwrap())
    }

    /// The next ready task's key. Owner thread only.
    pub fn next_ready(&self) -> Option<u32> {
        assert!(self.is_owner(), "only the owner core runs its tasks");
        self.run_queue.lock().unwrap().pop_front()
    }

    /// Queues `key` on the run queue (a spawn, or a local wake).
    pub fn schedule(&self, key: u32) {
        assert!(self.is_owner(), "a non-owner thread touched the run queue");
        self.run_queue.lock().unwrap().push_back(key);
    }

    /// The end of `Core::turn`: the real `CoreSide::park`, waiting in
    /// `kernel`, with no timer (a park without tasks ready waits until
    /// notified). `shutdown_seen` is whether the loop already saw the stop.
    pub fn park_in(&self, kernel: &mut impl Kernel, shutdown_seen: bool) {
        let ready = !self.run_queue.lock().unwrap().is_empty();
        let timeout = ready.then_some(Duration::ZERO);
        self.side()
            .park(timeout, shutdown_seen, |timeout| kernel.wait(timeout));
    }

    /// [`Core::park_in`] on an epoll core (the eventfd alone), before any
    /// stop.
    pub fn park(&self) {
        self.park_in(&mut Epoll::new(&self.bell), false);
    }
}

/// The driver's trip to the kernel, as `CoreSide::park` calls it.
pub trait Kernel {
    /// Waits at most `timeout` (`None`: no limit; zero: does not block).
    fn wait(&mut self, timeout: Option<Duration>);
}

/// An epoll core's wait, reduced to its eventfd: `epoll_wait` returns
/// when the eventfd is readable, and the driver drains it. A wait with a
/// timeout may end before a notification: the model does not block then,
/// so loom tries both orders.
#[derive(Debug)]
pub struct Epoll {
    bell: Arc<Doorbell>,
}

impl Epoll {
    /// The wait of the core whose eventfd is `bell`.
    pub fn new(bell: &Arc<Doorbell>) -> Epoll {
        Epoll { bell: bell.clone() }
    }
}

impl Kernel for Epoll {
    fn wait(&mut self, timeout: Option<Duration>) {
        match timeout {
            None => self.bell.wait(),
            Some(_) => {
                self.bell.try_take();
            }
        }
    }
}

/// An io_uring core's wait, reduced to its eventfd read: the real
/// [`WakeRead`] state, driven as `driver/uring` drives it (`arm_wake`
/// before the wait, `completed` when the read's completion is reaped), and
/// the kernel side: the read in flight, and the eventfd counter (the
/// doorbell). A read in flight completes once the counter is non-zero,
/// consuming it; a notification while no read is in flight stays in the
/// counter. The kernel completes the read when the eventfd is written, but
/// the core sees the completion only when it reaps, so the model completes
/// it at the next wait.
#[derive(Debug)]
pub struct Uring {
    bell: Arc<Doorbell>,
    /// The real state machine.
    pub read: WakeRead,
    /// Whether the kernel holds a read on the eventfd.
    in_flight: bool,
    /// Submissions still to fail (an SQ that stays full), to model the
    /// driver's retry.
    pub failing_submits: usize,
    /// Reads submitted so far.
    pub submits: usize,
    /// Read completions reaped so far.
    pub completions: usize,
    /// A broken driver that forgets `WakeRead::completed` when it reaps the
    /// read, to show that the models catch it.
    pub forget_completions: bool,
}

impl Uring {
    /// The driver of the core whose eventfd is `bell`, with no read yet.
    pub fn new(bell: &Arc<Doorbell>) -> Uring {
        Uring {
            bell: bell.clone(),
            read: WakeRead::new(),
            in_flight: false,
            failing_submits: 0,
            submits: 0,
            completions: 0,
            forget_completions: false,
        }
    }

    /// `Driver::arm_wake`: submits a read unless one is in flight.
    fn arm_wake(&mut self) {
        if !self.read.needs_arm() {
            return;
        }
        let ok = if self.failing_submits > 0 {
            self.failing_submits -= 1;
            false
        } else {
            assert!(!self.in_flight, "a second read on the eventfd");
            self.in_flight = true;
            self.submits += 1;
            true
        };
        self.read.submitted(ok);
    }
}

impl Kernel for Uring {
    fn wait(&mut self, timeout: Option<Duration>) {
        self.arm_wake();
        let completed = match self.read.bound(timeout) {
            None => {
                assert!(
                    self.in_flight,
                    "an unbounded wait with no read on the eventfd: no notification can end it"
                );
                self.bell.wait();
                true
            }
            // A bounded wait may time out before any notification.
            Some(_) => self.in_flight && self.bell.try_take(),
        };
        if completed {
            // The completion is reaped: `dispatch`'s WAKE_TOKEN arm.
            self.in_flight = false;
            self.completions += 1;
            if !self.forget_completions {
                self.read.completed();
            }
        }
    }
}

/// A task of a model core, as its wakers see it (`TaskHeader`): the real
/// scheduled flag, its key and its owner core; plus two counters, oracles
/// outside loom's view, of the wakes that queued it.
#[derive(Debug)]
pub struct Task<M = u32> {
    /// The real flag.
    pub state: TaskState,
    /// Its key in the owner's wake inbox and run queue.
    pub key: u32,
    /// The owner core.
    pub core: Arc<Core<M>>,
    local_enqueues: AtomicUsize,
    remote_enqueues: AtomicUsize,
}

/// A waker of a model task, the handle `percore::sync::wake` runs on, as
/// the framework's `Arc<Task<F>>`. A `std` `Arc`, as all scaffolding (see
/// the top of this file): models check `strong_count` themselves.
#[derive(Debug)]
pub struct TaskRef<M = u32>(pub Arc<Task<M>>);

impl<M> Clone for TaskRef<M> {
    fn clone(&self) -> Self {
        TaskRef(self.0.clone())
    }
}

impl<M> TaskRef<M> {
    /// A task of `core`, spawned: its flag is set and, when the calling
    /// thread runs `core`, its key is on the run queue.
    pub fn spawn(key: u32, core: &Arc<Core<M>>) -> TaskRef<M> {
        if core.is_owner() {
            core.schedule(key);
        }
        TaskRef::new(key, core)
    }

    /// A task of `core` with its flag set, not on any queue (the caller
    /// keeps its own run queue).
    pub fn new(key: u32, core: &Arc<Core<M>>) -> TaskRef<M> {
        TaskRef(Arc::new(Task {
            state: TaskState::new_scheduled(),
            key,
            core: core.clone(),
            local_enqueues: AtomicUsize::new(0),
            remote_enqueues: AtomicUsize::new(0),
        }))
    }

    /// How many wakes queued the task on the run queue, and how many in the
    /// wake inbox.
    pub fn enqueues(&self) -> (usize, usize) {
        (
            self.0.local_enqueues.load(Relaxed),
            self.0.remote_enqueues.load(Relaxed),
        )
    }
}

impl<M> Waking for TaskRef<M> {
    fn state(&self) -> &TaskState {
        &self.0.state
    }

    /// As `context::schedule_local`: the run queue if the calling thread
    /// runs the owner core.
    fn schedule_local(self) -> Result<(), Self> {
        if !self.0.core.is_owner() {
            return Err(self);
        }
        self.0.local_enqueues.fetch_add(1, Relaxed);
        self.0.core.schedule(self.0.key);
        Ok(())
    }

    /// As `Owner::wake_remote`: the real `sync::wake::wake_remote`.
    fn schedule_remote(&self) {
        self.0.remote_enqueues.fetch_add(1, Relaxed);
        let core = &self.0.core;
        percore::sync::wake::wake_remote(&core.wakes, &core.parker, self.0.key);
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
