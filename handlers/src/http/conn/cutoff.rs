//! The last answer of a stopping server.
//!
//! A graceful stop lets a request in progress finish, but only until the
//! drain deadline ([`percore::drain_deadline`]): then the framework cancels
//! the connection's task, and its client sees the connection close with no
//! answer at all (curl: "Empty reply from server"), which it cannot tell
//! from a crash, and which a proxy in front counts as a broken upstream.
//! So a service call still running a little before the deadline is dropped
//! here (cancelling its I/O, as any dropped future does), and the
//! connection answers `503 Service Unavailable: the server is stopping`
//! with `Connection: close` while there is still time to send it.
//!
//! Until the stop this costs next to nothing: a call that completes on its
//! first poll is never looked at, and a pending one asks the connection's
//! stop slot, which already holds the task's waker (no syscall, no
//! allocation). The timer is made only once the server stops.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use percore::time::Sleep;

use crate::http::wire::StopSlot;

/// The most time a call is cut off ahead of the drain deadline.
pub(crate) const MAX_MARGIN: Duration = Duration::from_millis(500);

/// When a call still running at a stop is cut off: a tenth of the drain
/// time left when the connection learned of the stop, at most
/// [`MAX_MARGIN`], before the `deadline`. Long enough to write a short
/// answer on a busy core (a 10 s drain cuts at 9.5 s); short enough that a
/// call that could still finish rarely is cut.
pub(crate) fn cut_at(deadline: Instant, now: Instant) -> Instant {
    let left = deadline.saturating_duration_since(now);
    let margin = (left / 10).min(MAX_MARGIN);
    deadline.checked_sub(margin).unwrap_or(now)
}

/// Polls a service call until it completes (`Some`), or until the server
/// is stopping and the cut-off before its drain deadline has passed
/// (`None`; the call is dropped with this future).
#[must_use = "futures do nothing unless polled"]
pub(crate) struct Cutoff<'s, F> {
    call: F,
    stop: &'s StopSlot,
    /// Armed once the server stops (at [`cut_at`]).
    timer: Option<Sleep>,
}

impl<'s, F> Cutoff<'s, F> {
    pub(crate) fn new(call: F, stop: &'s StopSlot) -> Self {
        Self {
            call,
            stop,
            timer: None,
        }
    }
}

impl<F: Future + Unpin> Future for Cutoff<'_, F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Poll::Ready(out) = Pin::new(&mut this.call).poll(cx) {
            return Poll::Ready(Some(out));
        }
        if this.timer.is_none() {
            if !this.stop.poll_stopped(cx) {
                return Poll::Pending;
            }
            // Without a deadline (no server drains this core) nothing
            // cancels the call either: let it run.
            let Some(deadline) = percore::drain_deadline() else {
                return Poll::Pending;
            };
            let at = cut_at(deadline, percore::time::now());
            this.timer = Some(percore::time::sleep_until(at));
        }
        match &mut this.timer {
            Some(timer) => Pin::new(timer).poll(cx).map(|()| None),
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_a_tenth_of_the_time_left_at_most_half_a_second_early() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(cut_at(now + ms(10_000), now), now + ms(9_500));
        assert_eq!(cut_at(now + ms(2_000), now), now + ms(1_800));
        assert_eq!(cut_at(now + ms(100), now), now + ms(90));
        // A deadline that is now or already passed: at once.
        assert_eq!(cut_at(now, now), now);
        assert_eq!(cut_at(now, now + ms(5)), now);
    }
}
