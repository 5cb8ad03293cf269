//! Moving a connection to another core (`percore::move_connection`):
//! detach, message, adopt, racing with the target's stop.
//!
//! The source puts the detached connection in a real `Handoff`, inside a
//! message pushed through the real `CoreSide::send` to the target's real
//! mailbox, and waits on the hand-off's reply. The target drains its
//! mailbox and runs what it found (taking the connection, or refusing it
//! once its stop began), then stops: `close_mailbox` drops what was still
//! queued. Whatever the interleaving, the connection ends up served
//! exactly once, by the target or back on the source, and closed (freed)
//! exactly once; and the source is never left waiting.
#![cfg(loom)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool as Oracle, AtomicUsize as Count, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};

use loom::thread;
use loom_tests::{check, waker, Core, Doorbell};
use percore::sync::handoff::{handoff, Handoff, Reply};
use percore::sync::{oneshot, PushError};

type Message = Box<dyn FnOnce() + Send>;

/// What happened to the one connection.
#[derive(Default)]
struct Tally {
    served: Count,
    closed: Count,
}

/// The connection: its descriptor closes when it is dropped.
struct Conn(Arc<Tally>);

impl Conn {
    fn serve(self) {
        self.0.served.fetch_add(1, Relaxed);
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.0.closed.fetch_add(1, Relaxed);
    }
}

/// Polls the reply until it is ready, sleeping on `bell` while pending.
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

/// The target's `adopt`: refuses once its stop began, else takes and
/// serves the connection.
fn adopt(handoff: Handoff<Conn>, stopping: &Oracle) {
    let taken = handoff.accept(|conn| {
        if stopping.load(Relaxed) {
            Err(conn)
        } else {
            Ok(conn)
        }
    });
    if let Some(conn) = taken {
        conn.serve();
    }
}

/// The target core: one loop turn (drain, run), then its stop, which
/// refuses what runs after it began and drops what was still queued.
fn target_core(target: Arc<Core<Message>>, stopping: Arc<Oracle>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut batch = VecDeque::new();
        target.drain(&mut batch);
        for message in batch.drain(..) {
            message();
        }
        stopping.store(true, Relaxed);
        target.drain(&mut batch);
        for message in batch.drain(..) {
            message();
        }
        target.mailbox.close(&mut batch);
        drop(batch);
    })
}

/// Detach, message, adopt against the target's stop: served once, by one
/// side, and closed once.
#[test]
fn served_once_whatever_the_stop() {
    check("handoff::served_once_whatever_the_stop", || {
        let tally = Arc::new(Tally::default());
        let target = Core::<Message>::new(2);
        let stopping = Arc::new(Oracle::new(false));
        let stopper = target_core(target.clone(), stopping.clone());
        let (handoff, reply) = handoff(Conn(tally.clone()));
        let flag = stopping.clone();
        let message: Message = Box::new(move || adopt(handoff, &flag));
        if let Err(PushError::Full(message) | PushError::Closed(message)) = target.send(message) {
            drop(message);
        }
        match recv(&reply, &Doorbell::new()) {
            Some(Reply::Taken) => {}
            Some(Reply::Returned(conn)) => conn.serve(),
            None => panic!("the source was never answered"),
        }
        stopper.join().unwrap();
        drop(reply);
        assert_eq!(tally.served.load(Relaxed), 1, "served once");
        assert_eq!(tally.closed.load(Relaxed), 1, "closed once");
    });
}

/// The source's own task is cancelled (its core stopped at its drain
/// deadline) while the connection is on its way: whichever side holds
/// the connection last closes it, once, and it is served at most once.
#[test]
fn source_gone_closes_once() {
    check("handoff::source_gone_closes_once", || {
        let tally = Arc::new(Tally::default());
        let target = Core::<Message>::new(2);
        let stopping = Arc::new(Oracle::new(false));
        let stopper = target_core(target.clone(), stopping.clone());
        let (handoff, reply) = handoff(Conn(tally.clone()));
        let flag = stopping.clone();
        let message: Message = Box::new(move || adopt(handoff, &flag));
        if let Err(PushError::Full(message) | PushError::Closed(message)) = target.send(message) {
            drop(message);
        }
        drop(reply);
        stopper.join().unwrap();
        assert!(tally.served.load(Relaxed) <= 1, "served at most once");
        assert_eq!(tally.closed.load(Relaxed), 1, "closed once");
    });
}
