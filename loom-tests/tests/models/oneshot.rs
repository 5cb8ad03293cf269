//! The reply channel of cross-core calls, alone and as `submit_to` uses it.
//!
//! The receiver polls with a waker that rings its core's "eventfd" and
//! waits on it while `Pending`; a reply that never wakes it is a deadlock.
//! The channel's state lives in a loom `Arc`, so loom also checks that it
//! is freed exactly once, whichever side lets go last.
#![cfg(loom)]

use std::sync::atomic::{AtomicBool as Oracle, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};

use loom::thread;
use loom_tests::{check, waker, Core, Doorbell};
use percore::sync::{oneshot, PushError};

/// Polls `rx` until it is ready, sleeping on `bell` while it is pending.
fn recv<T>(rx: &oneshot::Receiver<T>, bell: &Arc<Doorbell>) -> Option<T> {
    let waker = waker(bell);
    let mut cx = Context::from_waker(&waker);
    loop {
        match rx.poll_recv(&mut cx) {
            Poll::Ready(v) => return v,
            Poll::Pending => bell.wait(),
        }
    }
}

/// The value sent from another thread arrives.
#[test]
fn value_arrives() {
    check("oneshot::value_arrives", || {
        let (tx, rx) = oneshot::channel::<u32>();
        let t = thread::spawn(move || tx.send(42));
        assert_eq!(recv(&rx, &Doorbell::new()), Some(42));
        t.join().unwrap();
    });
}

/// A sender dropped without sending (the target core stopped, or the call
/// panicked) wakes the receiver, which sees the channel closed.
#[test]
fn dropped_sender_closes() {
    check("oneshot::dropped_sender_closes", || {
        let (tx, rx) = oneshot::channel::<u32>();
        let t = thread::spawn(move || drop(tx));
        assert_eq!(recv(&rx, &Doorbell::new()), None);
        t.join().unwrap();
    });
}

/// The receiver gives up (its task was cancelled) while the value is being
/// sent: no wake is owed, and the value and state are freed once.
#[test]
fn receiver_dropped_during_send() {
    check("oneshot::receiver_dropped_during_send", || {
        let (tx, rx) = oneshot::channel::<Arc<u32>>();
        let value = Arc::new(7);
        let sent = value.clone();
        let t = thread::spawn(move || tx.send(sent));
        drop(rx);
        t.join().unwrap();
        assert_eq!(Arc::strong_count(&value), 1, "the sent value leaked");
    });
}

/// A receiver reused for a second exchange (the file pool's reply
/// channels): `reset` succeeds only once the first sender is gone, and
/// then the second value, sent from another thread, arrives; a reset that
/// comes too early changes nothing.
#[test]
fn reset_reuses_the_channel() {
    check("oneshot::reset_reuses_the_channel", || {
        let bell = Doorbell::new();
        let (tx, mut rx) = oneshot::channel::<u32>();
        let t = thread::spawn(move || tx.send(1));
        assert_eq!(recv(&rx, &bell), Some(1));
        // The sender may not have let go yet: then `reset` refuses.
        let tx = match rx.reset() {
            Some(tx) => tx,
            None => {
                t.join().unwrap();
                rx.reset().expect("the sender is gone")
            }
        };
        let t2 = thread::spawn(move || tx.send(2));
        assert_eq!(recv(&rx, &bell), Some(2));
        t2.join().unwrap();
    });
}

/// Sets its flag when dropped, and fails if dropped twice.
struct Kept(Arc<Oracle>);

impl Drop for Kept {
    fn drop(&mut self) {
        assert!(
            !self.0.swap(true, Relaxed),
            "the kept value was freed twice"
        );
    }
}

/// A receiver given up with something to keep (a buffer a pool thread
/// still writes): it lives while the sender does, and is freed once
/// both ends are gone, whichever lets go last.
#[test]
fn kept_until_sent() {
    check("oneshot::kept_until_sent", || {
        let freed = Arc::new(Oracle::new(false));
        let (tx, rx) = oneshot::channel::<u32>();
        let seen = freed.clone();
        let t = thread::spawn(move || {
            let alive = !seen.load(Relaxed);
            tx.send(1);
            alive
        });
        rx.keep_until_sent(Box::new(Kept(freed.clone())));
        assert!(
            t.join().unwrap(),
            "the kept value was freed while the sender lived"
        );
        assert!(freed.load(Relaxed), "the kept value was never freed");
    });
}

type Message = Box<dyn FnOnce() + Send>;

/// `submit_to` racing the target core's stop: the caller pushes a closure
/// (holding the reply sender) to the target's mailbox and unparks it; the
/// target runs what it drained, then stops (`close_mailbox` drops what was
/// still queued). The caller always learns the outcome: the reply if the
/// closure ran, `None` (`SubmitError::NoReply`) otherwise; it never hangs.
#[test]
fn submit_races_core_stop() {
    check("oneshot::submit_races_core_stop", || {
        let target = Core::<Message>::new(2);
        let ran = Arc::new(Oracle::new(false));
        let stopper = {
            let target = target.clone();
            thread::spawn(move || {
                let mut batch = std::collections::VecDeque::new();
                target.drain(&mut batch);
                for message in batch.drain(..) {
                    message();
                }
                target.mailbox.close(&mut batch);
                drop(batch);
            })
        };
        let (tx, rx) = oneshot::channel::<u32>();
        let flag = ran.clone();
        let message: Message = Box::new(move || {
            flag.store(true, Relaxed);
            tx.send(42);
        });
        let reply = match target.send(message) {
            Ok(()) => recv(&rx, &Doorbell::new()),
            Err(PushError::Closed(message)) => {
                drop(message);
                recv(&rx, &Doorbell::new())
            }
            Err(PushError::Full(_)) => unreachable!("capacity 2, one message"),
        };
        stopper.join().unwrap();
        if ran.load(Relaxed) {
            assert_eq!(reply, Some(42));
        } else {
            assert_eq!(reply, None, "not run, yet a reply");
        }
    });
}
