//! The count of cores still draining at a stop (`sync::CountDown`).
//!
//! Each core does what `serve_core` does once its own connections are
//! done: count itself out, then poll the count with a waker that rings its
//! "eventfd", sleeping on it while the count is not zero. A core that
//! sleeps through the last count never exits: loom reports the deadlock.
#![cfg(loom)]

use std::sync::Arc;
use std::task::Context;

use loom::thread;
use loom_tests::{check, waker, Doorbell};
use percore::sync::CountDown;

/// Counts out, then waits until every core has.
fn drain_and_wait(count: &CountDown) {
    count.count_out();
    let bell = Doorbell::new();
    let waker = waker(&bell);
    let mut cx = Context::from_waker(&waker);
    while count.poll_zero(&mut cx).is_pending() {
        bell.wait();
    }
}

/// Two cores count out at once and wait for each other: both leave,
/// whichever counts last and whenever the other registers its waker.
#[test]
fn two_cores_wait_for_each_other() {
    check("countdown::two_cores_wait_for_each_other", || {
        let count = Arc::new(CountDown::new(2));
        let other = count.clone();
        let t = thread::spawn(move || drain_and_wait(&other));
        drain_and_wait(&count);
        t.join().unwrap();
    });
}

/// Three cores: the last to count out wakes both others, each of which
/// may have registered its waker before or after the other's count.
#[test]
fn the_last_of_three_wakes_both() {
    check("countdown::the_last_of_three_wakes_both", || {
        let count = Arc::new(CountDown::new(3));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let count = count.clone();
                thread::spawn(move || drain_and_wait(&count))
            })
            .collect();
        drain_and_wait(&count);
        for t in threads {
            t.join().unwrap();
        }
    });
}
