//! Timers: [`sleep`], [`sleep_until`], [`timeout`].
//!
//! Each core has a hierarchical timing wheel. The core's loop reads the
//! clock once per turn, fires due timers, and hands the next deadline to the
//! driver as its wait timeout, so timers cost no extra syscall.
//!
//! The wheel counts whole milliseconds and rounds deadlines up, so a timer
//! never fires early but may fire up to a millisecond late, plus the time
//! the core takes to wake: `sleep(1 ms)` takes about 1–2 ms on an idle core
//! (a little more on epoll, whose wait timeout is in whole milliseconds
//! too). Timers suit deadlines and pacing, not sub-millisecond timing.

pub(crate) mod current;
pub(crate) mod wheel;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use current::{try_with_timers, with_timers};
use wheel::TimerKey;

/// Completes at a deadline. Made by [`sleep`] and [`sleep_until`].
///
/// Dropping it disarms the timer.
#[must_use = "futures do nothing unless polled"]
pub struct Sleep {
    deadline: Instant,
    /// The armed timer: the unique id of the core whose wheel holds it, and
    /// its key there. A `Sleep` may move to another core (it is `Send`),
    /// where that key names some other timer.
    key: Option<(u32, TimerKey)>,
    /// The waker the armed timer holds, kept here too: a poll by the same
    /// task before the deadline then answers without touching the wheel,
    /// whose entry (one per connection) is a cache miss on a busy core.
    armed_for: Option<Waker>,
}

/// Waits until `duration` has passed since the call: never less.
///
/// The deadline is taken from the clock itself, not from the core's turn
/// clock ([`now`]): the turn began before this call, on a busy core maybe
/// milliseconds before, and a sleep counted from there could end early.
/// Code that sets many deadlines per request may count them from [`now`]
/// with [`sleep_until`], as the HTTP layer does, and save the clock read.
///
/// # Panics
///
/// When polled outside a percore core thread.
pub fn sleep(duration: Duration) -> Sleep {
    sleep_until(Instant::now() + duration)
}

/// Waits until `deadline`.
///
/// # Panics
///
/// When polled outside a percore core thread.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        key: None,
        armed_for: None,
    }
}

/// The core's clock as read at the start of this loop turn: cheaper than
/// `Instant::now()` and consistent within a turn.
///
/// # Panics
///
/// Outside a percore core thread.
pub fn now() -> Instant {
    with_timers(|timers| timers.clock.now())
}

impl Sleep {
    /// The instant this sleep completes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Moves the deadline; the sleep completes at the new one even if the
    /// old one had passed.
    pub fn reset(&mut self, deadline: Instant) {
        self.deadline = deadline;
        // A timer that fired gave its waker away; the next poll must hand
        // the wheel one again, not trust the one it remembers.
        self.armed_for = None;
        if let Some((owner, key)) = self.key {
            with_timers(|timers| {
                if owner != timers.short_id() {
                    // Armed on another core: armed anew here at the next poll.
                    self.key = None;
                    return;
                }
                let tick = timers.clock.tick_of(deadline);
                timers.wheel.borrow_mut().reset(key, tick);
            });
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let deadline = this.deadline;
        with_timers(|timers| {
            // A timer armed in another core's wheel is not this core's to
            // touch (that entry fires there once, and stays): arm anew here.
            let armed = this
                .key
                .filter(|&(owner, _)| owner == timers.short_id())
                .map(|(_, key)| key);
            let Some(key) = armed else {
                this.key = None;
                this.armed_for = None;
                if timers.clock.now() >= deadline {
                    return Poll::Ready(());
                }
                let tick = timers.clock.tick_of(deadline);
                let key = timers.wheel.borrow_mut().insert(tick, cx.waker().clone());
                this.key = Some((timers.short_id(), key));
                this.armed_for = Some(cx.waker().clone());
                return Poll::Pending;
            };
            // A timer fires only once the core's clock has reached its
            // deadline (ticks round the deadline up), so before it this
            // one cannot have fired; if the wheel already holds this
            // waker, there is nothing to do.
            let same_waker = this
                .armed_for
                .as_ref()
                .is_some_and(|w| w.will_wake(cx.waker()));
            if same_waker && timers.clock.now() < deadline {
                return Poll::Pending;
            }
            let mut wheel = timers.wheel.borrow_mut();
            if wheel.has_fired(key) {
                Poll::Ready(())
            } else {
                wheel.set_waker(key, cx.waker());
                if !same_waker {
                    this.armed_for = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        })
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some((owner, key)) = self.key.take() {
            try_with_timers(|timers| {
                if timers.short_id() == owner {
                    timers.wheel.borrow_mut().remove(key);
                }
            });
        }
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .finish()
    }
}

/// The deadline passed before the future completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed(());

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for std::io::Error {
    fn from(_: Elapsed) -> Self {
        std::io::Error::new(std::io::ErrorKind::TimedOut, "deadline elapsed")
    }
}

/// Runs `future` until it completes or `duration` passes. On time-out the
/// future is dropped, which cancels its I/O safely (buffers stay with the
/// kernel operation until its completion arrives).
///
/// An idle timeout on a connection is a timeout around each read; reads
/// are cancel-safe, so a read that timed out loses no data:
///
/// ```no_run
/// use std::time::Duration;
/// use percore::time::timeout;
/// use percore::{Connection, Handler};
///
/// struct Echo;
///
/// impl Handler for Echo {
///     async fn serve(&self, conn: Connection) -> std::io::Result<()> {
///         // `Err(Elapsed)` after 30 s without a byte: close.
///         while let Ok(read) = timeout(Duration::from_secs(30), conn.read()).await {
///             let Some(buf) = read? else { break };
///             let (res, _) = conn.write_all(buf).await;
///             res?;
///         }
///         Ok(())
///     }
/// }
///
/// fn main() -> std::io::Result<()> {
///     percore::Server::builder().serve(|_core| Echo)
/// }
/// ```
///
/// # Panics
///
/// When called outside a percore core thread, as [`sleep`].
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    Timeout {
        future,
        sleep: sleep(duration),
    }
}

/// Like [`timeout`], with an absolute deadline.
///
/// # Panics
///
/// When polled outside a percore core thread.
pub fn timeout_at<F: Future>(deadline: Instant, future: F) -> Timeout<F> {
    Timeout {
        future,
        sleep: sleep_until(deadline),
    }
}

/// The future made by [`timeout`].
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Timeout<F> {
    future: F,
    sleep: Sleep,
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `future` is structurally pinned: it is never moved out of
        // `self` and `Timeout` has no `Unpin` impl that would allow moving it.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above; `this.future` stays at its address.
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        if let Poll::Ready(value) = future.poll(cx) {
            return Poll::Ready(Ok(value));
        }
        match Pin::new(&mut this.sleep).poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed(()))),
            Poll::Pending => Poll::Pending,
        }
    }
}
