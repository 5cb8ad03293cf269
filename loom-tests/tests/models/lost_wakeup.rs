//! Proof that the models can fail: the park handshake with its two steps
//! swapped, which loom must report as a lost wake-up.
//!
//! `BrokenParker` is a test-only copy of `percore::sync::Parker` whose
//! `prepare_park` checks for work first and announces the park after. A
//! sender can then push its item and unpark between the check (which saw
//! no work) and the announcement (which its unpark did not see): the core
//! blocks with an item in its inbox and nobody left to wake it. loom finds
//! that interleaving and panics with "deadlock"; the test expects it.
//!
//! To watch it fail, add `--test lost_wakeup -- --nocapture` to the loom
//! command: loom's deadlock report and the interleaving at which it was
//! found are printed, and the test passes because of `should_panic`.
#![cfg(loom)]

use std::collections::VecDeque;
use std::sync::Arc;

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use loom_tests::{check, Bell, Doorbell};
use percore::sync::{Notify, Remote};

/// `Parker` with the order of `prepare_park` reversed. Do not copy.
struct BrokenParker {
    parked: AtomicBool,
    notifier: Bell,
}

impl BrokenParker {
    fn unpark(&self) {
        if self.parked.swap(false, Ordering::SeqCst) {
            self.notifier.notify();
        }
    }

    /// WRONG: checks, then announces. The real one announces, then checks.
    fn prepare_park(&self, has_work: impl FnOnce() -> bool) -> bool {
        if has_work() {
            return false;
        }
        self.parked.swap(true, Ordering::SeqCst);
        true
    }

    fn finish_park(&self) {
        self.parked.swap(false, Ordering::SeqCst);
    }
}

/// The same scenario as `park::repeated_parks`, on the broken parker.
#[test]
#[should_panic(expected = "deadlock")]
fn reversed_handshake_loses_wakeup() {
    check("lost_wakeup::reversed_handshake_loses_wakeup", || {
        let bell = Doorbell::new();
        let parker = Arc::new(BrokenParker {
            parked: AtomicBool::new(false),
            notifier: Bell(bell.clone()),
        });
        let inbox = Arc::new(Remote::<u32>::new(4));
        let sender = {
            let (parker, inbox) = (parker.clone(), inbox.clone());
            thread::spawn(move || {
                inbox.push(1).unwrap();
                parker.unpark();
            })
        };
        let mut got = VecDeque::new();
        while got.is_empty() {
            inbox.drain_into(&mut got);
            if got.is_empty() && parker.prepare_park(|| inbox.has_items()) {
                bell.wait();
                parker.finish_park();
            }
        }
        sender.join().unwrap();
    });
}
