//! The count of a server's cores still draining at a stop.
//!
//! A core whose own connections are done must not leave while another
//! core's connections may still call it (`submit_to`): it counts itself
//! out, then waits, serving its mailbox, until the count reaches zero (or
//! its drain deadline passes). The last core to count out wakes the
//! others from its own thread.

use std::task::{Context, Poll, Waker};

use super::{lock, Mutex};

/// Counts down once per core; wakes every waiter at zero.
#[derive(Debug)]
pub struct CountDown {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    left: usize,
    waiters: Vec<Waker>,
}

impl CountDown {
    /// A count of `count`.
    pub fn new(count: usize) -> Self {
        CountDown {
            state: Mutex::new(State {
                left: count,
                waiters: Vec::new(),
            }),
        }
    }

    /// Counts one out; the call that reaches zero wakes every waiter.
    pub fn count_out(&self) {
        let waiters = {
            let mut state = lock(&self.state);
            if state.left == 0 {
                return;
            }
            state.left -= 1;
            if state.left > 0 {
                return;
            }
            std::mem::take(&mut state.waiters)
        };
        // Woken outside the lock: a waker may run code of its own.
        for waker in waiters {
            waker.wake();
        }
    }

    /// Ready once the count is zero; otherwise `cx`'s waker is woken when
    /// it gets there. The check and the registration happen under the
    /// lock that `count_out` takes after counting, so the last count
    /// either sees the waker or is seen by the check.
    pub fn poll_zero(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = lock(&self.state);
        if state.left == 0 {
            return Poll::Ready(());
        }
        if !state.waiters.iter().any(|w| w.will_wake(cx.waker())) {
            state.waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }
}
