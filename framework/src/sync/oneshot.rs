//! A one-value channel between cores: the reply path of cross-core calls.
//!
//! The receiver is polled on its own core; the sender completes it from
//! another. Dropping the sender without sending (the target core stopped,
//! or the call panicked) closes the channel, so the receiver always learns
//! the outcome.

use std::task::{Context, Poll, Waker};

use super::{lock, Arc, Mutex};

struct State<T> {
    value: Option<T>,
    waker: Option<Waker>,
    closed: bool,
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
