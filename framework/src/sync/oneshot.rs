//! A one-value channel between cores: the reply path of cross-core calls.
//!
//! The receiver is polled on its own core; the sender completes it from
//! another. Dropping the sender without sending (the target core stopped,
//! or the call panicked) closes the channel, so the receiver always learns
//! the outcome.
//!
//! A receiver whose sender is gone can be [`reset`](Receiver::reset) for
//! another exchange, which spares a frequent caller (the file pool's
//! reads and writes) an allocation per call; and a receiver given up early
//! can [`keep`](Receiver::keep_until_sent) something alive until the
//! sender is done (the buffer a pool thread is still writing).

use std::task::{Context, Poll, Waker};

use super::{lock, Arc, Mutex};

struct State<T> {
    value: Option<T>,
    waker: Option<Waker>,
    closed: bool,
    /// Dropped with the state, once both ends are gone.
    kept: Option<Box<dyn Send>>,
}

/// Sends the one value.
pub struct Sender<T>(Arc<Mutex<State<T>>>);

/// Receives the one value, or learns that none will come.
pub struct Receiver<T>(Arc<Mutex<State<T>>>);

/// A connected sender and receiver.
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let state = Arc::new(Mutex::new(State {
        value: None,
        waker: None,
        closed: false,
        kept: None,
    }));
    (Sender(state.clone()), Receiver(state))
}

impl<T> Sender<T> {
    /// Delivers `value` and wakes the receiver.
    pub fn send(self, value: T) {
        let waker = {
            let mut state = lock(&self.0);
            state.value = Some(value);
            state.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        // Drop runs next and sees a value: it does not close.
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut state = lock(&self.0);
            state.closed = true;
            state.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Receiver<T> {
    /// `Ready(Some(value))`, `Ready(None)` if the sender was dropped without
    /// sending, or `Pending` (the waker is kept).
    pub fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut state = lock(&self.0);
        if let Some(value) = state.value.take() {
            return Poll::Ready(Some(value));
        }
        if state.closed {
            return Poll::Ready(None);
        }
        match &state.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => state.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// Makes this receiver ready for another exchange, and returns its new
    /// sender, if the last sender is gone (else `None`, and nothing
    /// changes: the old sender may still send).
    pub fn reset(&mut self) -> Option<Sender<T>> {
        Arc::get_mut(&mut self.0)?;
        let mut state = lock(&self.0);
        state.value = None;
        state.waker = None;
        state.closed = false;
        state.kept = None;
        drop(state);
        Some(Sender(self.0.clone()))
    }

    /// Gives up the receiver, keeping `value` alive until the sender is
    /// gone too (sent or dropped): it is dropped with the channel, on
    /// whichever thread lets go of it last.
    pub fn keep_until_sent(self, value: Box<dyn Send>) {
        lock(&self.0).kept = Some(value);
    }
}

impl<T> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl<T> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}
