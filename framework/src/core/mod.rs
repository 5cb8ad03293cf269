//! One core: its executor, driver, timers and clock, and the loop that
//! turns them.
//!
//! A loop turn: read the clock, fire due timers, take wakes from other
//! threads, poll ready tasks (bounded), then make one trip to the kernel:
//! without waiting if tasks are still ready, otherwise waiting until the
//! next timer, an I/O completion or a notification.

pub(crate) mod config;
pub(crate) mod context;
pub(crate) mod give_back;
pub(crate) mod messaging;
pub(crate) mod moves;
pub(crate) mod shared;
pub(crate) mod stopping;
pub(crate) mod watch;

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};

use crate::driver::current::Io;
use crate::driver::msg_space::MsgSpaces;
use crate::driver::pool::HeapPool;
use crate::driver::uring::FixedPool;
use crate::driver::uring::Retained;
use crate::driver::{epoll, uring, Backend, Driver};
use crate::executor::task::TaskKey;
use crate::executor::{Executor, JoinError};
use crate::slab::Slab;
use crate::time::current::{Timers, CENTURY};
use config::CoreConfig;
use shared::{CoreShared, Message};

/// How long a core's stop waits for the kernel to finish the operations
/// it cancelled; whatever is still in flight after that is leaked.
const DRAIN_WAIT: Duration = Duration::from_secs(2);

/// Runs the core's stop when dropped: at the end of `block_on`, and also
/// if something unwinds out of it, before the core stops being this
/// thread's (so the futures dropped by the stop still reach the driver).
struct StopGuard<'a>(&'a Rc<Core>);

impl Drop for StopGuard<'_> {
    fn drop(&mut self) {
        let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.0.stop()));
        if stopped.is_err() {
            // The kernel may still hold buffers of this core: never free
            // them. One more reference keeps the core (and its driver,
            // with everything it owns) alive for the life of the process.
            std::mem::forget(self.0.clone());
            let _ = std::panic::catch_unwind(|| {
                tracing::error!("a core's stop panicked; its memory is leaked, not freed")
            });
        }
    }
}

pub(crate) struct Core {
    pub(crate) shared: Arc<CoreShared>,
    /// Dropped before the I/O: the stop has drained it by then, and tasks
    /// dropped after a failed stop find no core and leak what they hold.
    pub(crate) executor: Executor,
    /// The driver and what operations need beside it.
    pub(crate) io: Io,
    /// The timer wheel and the clock.
    pub(crate) time: Timers,
    /// Wakers of pending `shutdown_signal()` futures; each removes its
    /// own entry when dropped, so the set is bounded by live futures.
    shutdown_waiters: RefCell<Slab<Waker>>,
    shutdown_seen: Cell<bool>,
    /// How long the server drains at a stop (`None`: no server, as under
    /// `block_on`), set before the core's first turn.
    drain_timeout: Cell<Option<Duration>>,
    /// When the drain ends: set with `shutdown_seen`, from the clock of the
    /// turn that saw the stop, so that the drain and every handler that
    /// asks use one instant.
    drain_deadline: Cell<Option<Instant>>,
    incoming: RefCell<VecDeque<TaskKey>>,
    messages: RefCell<VecDeque<Message>>,
    graveyard: RefCell<Vec<Retained>>,
    last_cpu_sample: Cell<u64>,
    /// When the core last saw I/O: a quiet core gives memory back.
    quiet: give_back::Quiet,
    /// What the handlers' caches give back with the core.
    give_back_hooks: give_back::Hooks,
    /// Whether a turn measures its busy time (see `queue_delay`): off
    /// unless something sheds load by it, since it costs a clock read.
    track_delay: Cell<bool>,
    /// Request boundaries its connections reached (each `move_wanted`),
    /// for the move policy's budget: core-local, a plain add.
    boundaries: Cell<u64>,
    /// How long the last turn ran before it went to the kernel.
    queue_delay: Cell<Duration>,
    /// While tracked: the start of the earliest turn whose work is not
    /// all done yet (a turn polls at most a budget of ready tasks, and
    /// the kernel may keep due completions for a later park).
    backlog_since: Cell<Option<Instant>>,
    /// Whether the last turn left work for the next: ready tasks, or
    /// completions the kernel had due and did not deliver.
    carried: Cell<bool>,
}

impl Core {
    /// Builds a core for `backend` (already resolved: `Uring` or `Epoll`).
    pub(crate) fn new(
        shared: Arc<CoreShared>,
        backend: Backend,
        config: &CoreConfig,
    ) -> io::Result<Rc<Core>> {
        let wake_fd = shared.wake_fd.clone();
        let stats = shared.stats.clone();
        let fixed = match FixedPool::new(config.fixed_count, config.bufs.size) {
            Ok(pool) => Some(Rc::new(pool)),
            Err(e) => {
                tracing::warn!(error = %e, "no fixed write buffers on this core");
                None
            }
        };
        let driver = match backend {
            Backend::Uring => Driver::Uring(uring::Driver::new(
                config.ring,
                config.bufs,
                fixed.clone(),
                wake_fd,
                stats.clone(),
            )?),
            Backend::Epoll | Backend::Auto => {
                Driver::Epoll(epoll::Driver::new(wake_fd, stats.clone())?)
            }
        };
        stats.backend.set(match driver.backend() {
            Backend::Uring => 1,
            _ => 2,
        });
        Ok(Rc::new(Core {
            executor: Executor::new(shared.owner.clone()),
            io: Io {
                id: shared.id,
                driver: RefCell::new(driver),
                pool: Rc::new(HeapPool::new(config.bufs.size, config.pool_keep)),
                fixed,
                msg_spaces: MsgSpaces::new(),
                stats,
            },
            time: Timers::starting_at(shared.id, shared.watch.epoch()),
            shared,
            shutdown_waiters: RefCell::new(Slab::with_capacity(16)),
            shutdown_seen: Cell::new(false),
            drain_timeout: Cell::new(None),
            drain_deadline: Cell::new(None),
            incoming: RefCell::new(VecDeque::with_capacity(64)),
            messages: RefCell::new(VecDeque::new()),
            graveyard: RefCell::new(Vec::new()),
            last_cpu_sample: Cell::new(0),
            quiet: give_back::Quiet::default(),
            give_back_hooks: RefCell::new(Vec::new()),
            track_delay: Cell::new(false),
            boundaries: Cell::new(0),
            queue_delay: Cell::new(Duration::ZERO),
            backlog_since: Cell::new(None),
            carried: Cell::new(false),
        }))
    }

    pub(crate) fn backend(&self) -> Backend {
        self.io.driver.borrow().backend()
    }

    /// Runs `future` on this thread as the core's main task until it
    /// completes; then cancels every other task and waits out all I/O still
    /// in flight before the driver can be dropped.
    ///
    /// Whatever panics on the way, the stop runs: a panic of user code is
    /// caught where it happens (a task's poll, a waker, a destructor) or at
    /// the latest around the loop turn, counted, logged, and the core goes
    /// on; and should anything still unwind out of here, the guard below
    /// runs the same stop while the core is still this thread's, so that
    /// no buffer the kernel may write is freed before its completion.
    pub(crate) fn block_on<F>(core: Rc<Core>, future: F) -> Result<F::Output, JoinError>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let entered = context::enter(core.clone());
        let stop = StopGuard(&core);
        let handle = core.executor.spawn(future);
        let done = || handle.is_finished();
        while !done() {
            // One guard around many turns, not one per turn: the loop is
            // left only when a turn panicked, and entered again at once.
            crate::unwind::catching(|| {
                while !done() {
                    core.turn(&done);
                }
            });
            core.executor.record_caught();
        }
        let output = handle.try_take();
        drop(stop);
        drop(entered);
        output.unwrap_or(Err(JoinError::Cancelled))
    }

    /// The core's stop: refuses messages, drops every task (whose
    /// destructors cancel their I/O), then cancels and waits out what is
    /// still in flight. Runs no user code outside a guard, so it cannot
    /// unwind; if it did anyway, the core is leaked rather than freed.
    fn stop(&self) {
        self.close_mailbox();
        self.executor.cancel_all();
        self.bury();
        let left = self
            .io
            .driver
            .borrow_mut()
            .drain(Instant::now() + DRAIN_WAIT);
        self.bury();
        self.executor.record_caught();
        if left > 0 {
            tracing::error!(
                cpu = self.shared.cpu,
                left,
                "core stopped with I/O still in flight"
            );
        }
    }
    /// One loop turn. `done` tells whether the caller's root task has
    /// finished: then the turn must not wait in the kernel, since nothing
    /// may ever wake it (an epoll core with no timer would wait forever).
    fn turn(&self, done: &dyn Fn() -> bool) {
        let now = self.time.clock.update();
        let tick = self.time.clock.current_tick();
        self.shared.watch.turn_began(tick);
        self.time.wheel.borrow_mut().advance(tick);
        self.check_shutdown();
        self.take_remote_wakes();
        let tracked = self.track_delay.get();
        if tracked && !self.carried.get() {
            self.backlog_since.set(Some(now));
        }
        self.executor.run_ready();
        if tracked {
            self.carried.set(self.executor.has_ready());
        }
        self.bury();
        if self.quiet.due(now) {
            self.give_back("quiet");
        }
        let timeout = if self.executor.has_ready() || done() {
            Some(Duration::ZERO)
        } else {
            let timer = self.time.wheel.borrow().next_deadline().map(|tick| {
                self.time
                    .clock
                    .instant_of(tick)
                    .saturating_duration_since(now)
            });
            self.quiet.bound(now, timer)
        };
        // Publish before the park, not after: a park may block for good, and
        // the gauges must then describe the core as it went to sleep (the
        // tasks that just ran may have closed connections and returned
        // buffers). What the park itself reaps is published by the next
        // turn, which always follows a park that returns.
        self.executor.record_caught();
        self.publish_gauges();
        if tracked {
            let delay = self.backlog_since.get().unwrap_or(now).elapsed();
            self.queue_delay.set(delay);
            let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
            self.shared.stats.queue_delay_us.set(micros);
        }
        self.shared.watch.parking();
        // Announce, re-check the inboxes and the stop latch, then block:
        // `sync::wake`, the code the loom models run.
        self.shared
            .side()
            .park(timeout, self.shutdown_seen.get(), |timeout| {
                let mut driver = self.io.driver.borrow_mut();
                let events = driver.park(timeout);
                if tracked && !self.carried.get() {
                    self.carried.set(driver.more_due());
                }
                drop(driver);
                self.quiet.parked(events);
            });
        self.bury();
    }

    fn take_remote_wakes(&self) {
        let mut incoming = self.incoming.borrow_mut();
        if self.shared.owner.wakes.drain_into(&mut incoming) > 0 {
            for key in incoming.drain(..) {
                self.executor.schedule_remote(key);
            }
        }
        drop(incoming);
        // Run the batch outside the borrow (a message may send messages);
        // the queue's capacity comes back afterwards, so no allocation.
        let mut batch = std::mem::take(&mut *self.messages.borrow_mut());
        if self.shared.mailbox.drain_into(&mut batch) > 0 {
            while let Some(message) = batch.pop_front() {
                // A message only spawns its task (`submit_to`'s `f` runs
                // there, where the executor catches its panic, and its
                // caller gets `NoReply`), but were one to panic it must
                // not unwind out of the loop: the core would stop without
                // draining the I/O in flight, freeing buffers the kernel
                // may still use.
                let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(message));
                if let Err(payload) = ran {
                    self.executor.record_panic(&*payload);
                }
            }
        }
        *self.messages.borrow_mut() = batch;
    }

    /// Refuses further messages and drops those still queued: each one's
    /// reply channel closes, so its sender learns it was not run.
    fn close_mailbox(&self) {
        let mut leftover = std::collections::VecDeque::new();
        self.shared.mailbox.close(&mut leftover);
        if !leftover.is_empty() {
            tracing::debug!(
                count = leftover.len(),
                "core stopped with messages queued; failing them"
            );
        }
        // A message is a closure of the sender's: its captures' destructors
        // are user code.
        crate::unwind::catching(move || drop(leftover));
        let mut wakes = std::collections::VecDeque::new();
        self.shared.owner.wakes.close(&mut wakes);
    }

    fn check_shutdown(&self) {
        if !self.shutdown_seen.get() && self.shared.shutdown.is_triggered() {
            self.shutdown_seen.set(true);
            if let Some(timeout) = self.drain_timeout.get() {
                let now = self.time.clock.now();
                // A `Duration::MAX` drain saturates to "a century away".
                let end = now.checked_add(timeout).unwrap_or(now + CENTURY);
                self.drain_deadline.set(Some(end));
            }
            // Woken outside the borrow: a waker may drop a
            // `shutdown_signal()` future, which removes its own entry. Once
            // per stop, so the copy's allocation does not matter.
            let wakers: Vec<Waker> = {
                let waiters = self.shutdown_waiters.borrow();
                waiters
                    .keys()
                    .filter_map(|key| waiters.get(key).cloned())
                    .collect()
            };
            for waker in wakers {
                crate::unwind::wake(waker);
            }
        }
    }

    /// Registers (or refreshes, under `key`) interest in the server's
    /// stop; `true` if it already began.
    pub(crate) fn poll_shutdown(&self, key: &mut Option<usize>, waker: &Waker) -> bool {
        if self.shutdown_seen.get() {
            return true;
        }
        let mut waiters = self.shutdown_waiters.borrow_mut();
        match key.and_then(|k| waiters.get_mut(k)) {
            Some(w) if w.will_wake(waker) => {}
            Some(w) => *w = waker.clone(),
            None => *key = Some(waiters.insert(waker.clone())),
        }
        false
    }

    /// Forgets a `shutdown_signal()` future's waker.
    pub(crate) fn drop_shutdown_waiter(&self, key: usize) {
        self.shutdown_waiters.borrow_mut().remove(key);
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutdown_seen.get()
    }

    /// Sets how long the server drains once it stops (before the stop).
    pub(crate) fn set_drain_timeout(&self, timeout: Duration) {
        self.drain_timeout.set(Some(timeout));
    }

    /// When the drain of a stopping server ends; `None` before the stop,
    /// or without a server.
    pub(crate) fn drain_deadline(&self) -> Option<Instant> {
        self.drain_deadline.get()
    }

    /// Drops the resources of finished orphaned operations, outside every
    /// borrow of the driver (a buffer's destructor may be user code).
    fn bury(&self) {
        // Twice a turn, and almost always with nothing to bury.
        if !self.io.driver.borrow().has_graveyard() {
            return;
        }
        // Taking an empty Vec does not allocate; the capacity goes back.
        let mut dead = std::mem::take(&mut *self.graveyard.borrow_mut());
        self.io.driver.borrow_mut().take_graveyard(&mut dead);
        for retained in dead.drain(..) {
            // A retained buffer may be the user's, whose destructor may
            // panic: that must not unwind out of the core's loop, which
            // would skip the drain of what the kernel still holds.
            let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(retained)));
            if let Err(payload) = dropped {
                self.executor.record_panic(&*payload);
            }
        }
        *self.graveyard.borrow_mut() = dead;
    }

    fn publish_gauges(&self) {
        let stats = &self.shared.stats;
        let driver = self.io.driver.borrow();
        stats.in_flight.set(driver.in_flight() as u64);
        if let Driver::Uring(d) = &*driver {
            stats
                .ring_buffers_out
                .set(d.buf_ring().map_or(0, |r| r.leased()) as u64);
        }
        stats.panics.set(self.executor.panics());
        // The thread CPU clock is a real syscall: sample it every 100 ms.
        let tick = self.time.clock.current_tick();
        if tick >= self.last_cpu_sample.get() + 100 {
            self.last_cpu_sample.set(tick);
            stats
                .cpu_time_us
                .set(crate::sys::thread_cpu_time().as_micros() as u64);
        }
    }

    /// Makes every turn measure how long it ran (see `queue_delay`).
    /// Asked mid-turn, `waited` counts from the turn's start (it never
    /// reports less than the turn's own length).
    pub(crate) fn track_queue_delay(&self) {
        self.track_delay.set(true);
    }

    /// How long the last turn ran, from its start to its trip to the
    /// kernel, or, when turns before it left ready tasks behind, from the
    /// start of the earliest of those: what a request that arrived as it
    /// began waited at least before the core could read it. Zero until
    /// tracked.
    pub(crate) fn queue_delay(&self) -> Duration {
        self.queue_delay.get()
    }

    /// How long the work this core runs now has waited at least: since
    /// the start of this turn, or of the earliest turn before it whose
    /// ready tasks have not all run yet. Zero until tracked.
    pub(crate) fn waited(&self) -> Duration {
        if !self.track_delay.get() {
            return Duration::ZERO;
        }
        // Never less than this turn's own length, whatever the record.
        let turn_began = self.time.clock.now();
        let since = self
            .backlog_since
            .get()
            .map_or(turn_began, |since| since.min(turn_began));
        since.elapsed()
    }

    /// Counts a request boundary of one of this core's connections.
    #[inline]
    pub(crate) fn count_boundary(&self) {
        self.boundaries.set(self.boundaries.get().wrapping_add(1));
    }

    /// The request boundaries counted so far.
    pub(crate) fn boundaries(&self) -> u64 {
        self.boundaries.get()
    }

    /// Final CPU-time sample, taken when the core stops.
    pub(crate) fn sample_cpu_time(&self) {
        self.shared
            .stats
            .cpu_time_us
            .set(crate::sys::thread_cpu_time().as_micros() as u64);
    }
}
