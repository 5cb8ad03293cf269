//! The current thread's timers: its core's wheel and clock.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use super::wheel::Wheel;
use crate::current::{self, Guard};

/// A deadline far enough to mean "never" without overflowing `Instant`.
pub(crate) const CENTURY: Duration = Duration::from_secs(100 * 365 * 86_400);

/// The core's notion of time: read once per loop turn.
pub(crate) struct Clock {
    start: Instant,
    now: Cell<Instant>,
    /// The tick of `now`, worked out once per turn: the loop asks for it
    /// several times a turn, and each `Instant` difference costs dozens
    /// of instructions.
    tick: Cell<u64>,
}

impl Clock {
    /// A clock whose ticks count from `start`.
    pub(crate) fn starting_at(start: Instant) -> Clock {
        let clock = Clock {
            start,
            now: Cell::new(start),
            tick: Cell::new(0),
        };
        clock.set(Instant::now().max(start));
        clock
    }

    pub(crate) fn now(&self) -> Instant {
        self.now.get()
    }

    pub(crate) fn update(&self) -> Instant {
        let now = Instant::now();
        self.set(now);
        now
    }

    fn set(&self, now: Instant) {
        self.now.set(now);
        let since = now.saturating_duration_since(self.start);
        self.tick.set(since.as_millis() as u64);
    }

    /// The wheel tick at or after `instant`: a timer never fires early.
    pub(crate) fn tick_of(&self, instant: Instant) -> u64 {
        let since = instant.saturating_duration_since(self.start);
        since.as_nanos().div_ceil(1_000_000) as u64
    }

    pub(crate) fn current_tick(&self) -> u64 {
        self.tick.get()
    }

    pub(crate) fn instant_of(&self, tick: u64) -> Instant {
        self.start + Duration::from_millis(tick)
    }
}

/// One core's timers: the wheel, and the clock that the core's loop reads
/// once per turn.
pub(crate) struct Timers {
    /// The core's unique id: a timer remembers which core's wheel holds it.
    pub(crate) id: usize,
    pub(crate) wheel: RefCell<Wheel>,
    pub(crate) clock: Clock,
}

impl Timers {
    /// The id as a `Sleep` keeps it: 4 bytes rather than 8 in every
    /// connection's timer. Two cores alias only if 2^32 cores were made
    /// between them in one process.
    pub(crate) fn short_id(&self) -> u32 {
        self.id as u32
    }

    /// A core's timers, whose clock counts ticks from `start` (which the
    /// core also tells its stall watchdog).
    pub(crate) fn starting_at(id: usize, start: Instant) -> Timers {
        Timers {
            id,
            wheel: RefCell::new(Wheel::new()),
            clock: Clock::starting_at(start),
        }
    }
}

thread_local! {
    static CURRENT: Cell<*const Timers> = const { Cell::new(std::ptr::null()) };
}

/// Makes `timers` this thread's timers until the guard is dropped.
///
/// # Safety
///
/// As [`current::enter`]: `timers` outlives the guard, which stays on this
/// thread.
pub(crate) unsafe fn enter(timers: &Timers) -> Guard<Timers> {
    // SAFETY: this function's contract.
    unsafe { current::enter(&CURRENT, timers) }
}

/// Runs `f` with this thread's timers.
///
/// # Panics
///
/// Outside a percore core thread.
#[inline]
pub(crate) fn with_timers<R>(f: impl FnOnce(&Timers) -> R) -> R {
    current::with(&CURRENT, |t| f(t.expect(current::OUTSIDE)))
}

/// Like [`with_timers`], but `None` outside a core, for destructors.
#[inline]
pub(crate) fn try_with_timers<R>(f: impl FnOnce(&Timers) -> R) -> Option<R> {
    current::with(&CURRENT, |t| t.map(f))
}
