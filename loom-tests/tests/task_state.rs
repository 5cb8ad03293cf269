//! `TaskState`, the flag behind every waker: wakes racing a poll, the
//! task's completion, and each other.
//!
//! The executor side follows `Executor::poll_task` / `finish`: take the key
//! from the run queue, `start_poll`, poll, and on completion drop the slot
//! and `close`. A key that arrives for a dropped slot is stale and ignored
//! (the slab generation check). The waker side follows
//! `TaskHeader::wake_by_ref` from another thread: `wake`, and if it returns
//! `true`, push the key on the owner's inbox and unpark.
#![cfg(loom)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize as Oracle, Ordering::Relaxed};

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use loom_tests::{check, Core};
use percore::sync::TaskState;

const KEY: u32 = 3;

/// What a waker holds (`TaskHeader`): the flag, behind an `Arc` that loom
/// checks for leaks.
struct Header {
    state: TaskState,
}

/// Wakes the task from another thread; returns whether it enqueued it.
fn wake_remote(header: &Header, core: &Core<u32>) -> bool {
    if header.state.wake() {
        core.send(KEY).expect("the inbox has room and is open");
        true
    } else {
        false
    }
}

/// A wake racing the poll in which the task completes. The task is polled
/// exactly once (never after it completed); a wake lands on the queue at
/// most once, and only if it came after `start_poll` but before `close`
/// (the executor then finds the slot gone and ignores the key); a wake
/// that happens after `close` enqueues nothing.
#[test]
fn wake_races_completion() {
    check("task_state::wake_races_completion", || {
        let core = Core::<u32>::new(4);
        let header = Arc::new(Header {
            state: TaskState::new_scheduled(),
        });
        let closed = std::sync::Arc::new(AtomicBool::new(false));
        let waker = {
            let (core, header, closed) = (core.clone(), header.clone(), closed.clone());
            thread::spawn(move || {
                let after_close = closed.load(Ordering::Acquire);
                let enqueued = wake_remote(&header, &core);
                assert!(
                    !(after_close && enqueued),
                    "a wake after close enqueued the task"
                );
                enqueued
            })
        };
        // The executor: the task was spawned, so its key is queued locally.
        let mut slot_alive = true;
        let mut polls = 0;
        let mut stale = 0;
        let mut ready = VecDeque::from([KEY]);
        for round in 0..2 {
            if round == 1 {
                core.drain(&mut ready);
            }
            while let Some(_key) = ready.pop_front() {
                if !slot_alive {
                    stale += 1;
                    continue;
                }
                header.state.start_poll();
                polls += 1;
                // The future completes: drop the slot, then close.
                slot_alive = false;
                header.state.close();
                closed.store(true, Ordering::Release);
            }
        }
        let enqueued = waker.join().unwrap();
        core.drain(&mut ready);
        stale += ready.len();
        assert_eq!(polls, 1, "polled after completion");
        assert_eq!(stale, usize::from(enqueued), "one queue entry per enqueue");
        assert!(stale <= 1);
        // Closed for good: later wakes enqueue nothing.
        assert!(!header.state.wake());
    });
}

/// A task dropped without completing (cancelled at core stop), raced by a
/// wake; then a second wake that surely comes after the drop. Nothing is
/// polled, at most one stale key is queued, the late wake enqueues
/// nothing, and the header (held by the waker) is freed exactly once.
#[test]
fn wake_after_drop() {
    check("task_state::wake_after_drop", || {
        let core = Core::<u32>::new(4);
        let header = Arc::new(Header {
            state: TaskState::new_scheduled(),
        });
        // The task was polled once and is waiting: its flag is clear.
        header.state.start_poll();
        let closed = std::sync::Arc::new(AtomicBool::new(false));
        let waker = {
            let (core, header, closed) = (core.clone(), header.clone(), closed.clone());
            thread::spawn(move || {
                let mut enqueued = 0;
                for _ in 0..2 {
                    let after_close = closed.load(Ordering::Acquire);
                    let e = wake_remote(&header, &core);
                    assert!(!(after_close && e), "a wake after close enqueued the task");
                    enqueued += usize::from(e);
                }
                drop(header);
                enqueued
            })
        };
        // `Executor::cancel_all`: remove the slot, close, drop the future.
        header.state.close();
        closed.store(true, Ordering::Release);
        drop(header);
        let enqueued = waker.join().unwrap();
        let mut stale = VecDeque::new();
        core.drain(&mut stale);
        assert!(enqueued <= 1, "enqueued {enqueued} times");
        assert_eq!(stale.len(), enqueued);
    });
}

/// Two threads wake one task twice each, each wake announcing an event
/// first (as an I/O completion would). The core polls until it has seen
/// all four events. The task is never queued twice, every enqueue leads
/// to exactly one poll (polls = 1 + enqueues), no wake is lost (the core
/// would sleep forever), and wakes coalesce: a wake of a task that is
/// already queued enqueues nothing.
#[test]
fn many_wakes_one_edge() {
    const THREADS: usize = 2;
    const WAKES: usize = 2;
    const EVENTS: usize = THREADS * WAKES;
    check("task_state::many_wakes_one_edge", || {
        let core = Core::<u32>::new(8);
        let header = Arc::new(Header {
            state: TaskState::new_scheduled(),
        });
        let events = Arc::new(AtomicUsize::new(0));
        // Counted outside loom's view: an oracle, not part of the protocol.
        let enqueues = std::sync::Arc::new(Oracle::new(0));
        let wakers: Vec<_> = (0..THREADS)
            .map(|_| {
                let (core, header, events, enqueues) = (
                    core.clone(),
                    header.clone(),
                    events.clone(),
                    enqueues.clone(),
                );
                thread::spawn(move || {
                    for _ in 0..WAKES {
                        events.fetch_add(1, Ordering::Release);
                        if wake_remote(&header, &core) {
                            enqueues.fetch_add(1, Relaxed);
                        }
                    }
                })
            })
            .collect();
        let mut ready = VecDeque::from([KEY]);
        let mut polls = 0;
        let poll = |ready: &mut VecDeque<u32>, polls: &mut usize| -> usize {
            assert!(ready.len() <= 1, "the task was queued twice");
            let mut seen = 0;
            while ready.pop_front().is_some() {
                header.state.start_poll();
                *polls += 1;
                seen = events.load(Ordering::Acquire);
            }
            seen
        };
        loop {
            core.drain(&mut ready);
            if poll(&mut ready, &mut polls) == EVENTS {
                break;
            }
            core.park_on_inbox();
        }
        for w in wakers {
            w.join().unwrap();
        }
        // A wake may have come after the poll that saw the last event.
        core.drain(&mut ready);
        poll(&mut ready, &mut polls);
        let enqueues = enqueues.load(Relaxed);
        assert_eq!(polls, 1 + enqueues, "one poll per enqueue");
        assert!(enqueues <= EVENTS);
        header.state.close();
        assert!(!header.state.wake());
    });
}
