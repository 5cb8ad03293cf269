//! `TaskState`, the flag behind every waker: wakes racing a poll, the
//! task's completion, and each other.
//!
//! The executor side follows `Executor::poll_task` / `finish`: take the key
//! from the run queue, `start_poll`, poll, and on completion drop the slot
//! and `close`. A key that arrives for a dropped slot is stale and ignored
//! (the slab generation check). The waker side is
//! the framework's own `sync::wake::wake_by_ref` from another thread: flip
//! the flag, and if this wake flipped it, push the key on the owner's wake
//! inbox and unpark.
#![cfg(loom)]

use std::collections::VecDeque;

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use loom_tests::{check, Core, TaskRef};
use percore::sync::wake;

const KEY: u32 = 3;

/// Wakes the task from a thread that does not run its core, through the
/// framework's own `sync::wake::wake_by_ref`; returns whether this wake
/// queued it. Only for a task that one thread wakes at a time: the count
/// of remote enqueues is the task's, not this call's.
fn wake_remote(task: &TaskRef) -> bool {
    let before = task.enqueues().1;
    wake::wake_by_ref(task);
    task.enqueues().1 > before
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
        let header = TaskRef::new(KEY, &core);
        let closed = std::sync::Arc::new(AtomicBool::new(false));
        let waker = {
            let (header, closed) = (header.clone(), closed.clone());
            thread::spawn(move || {
                let after_close = closed.load(Ordering::Acquire);
                let enqueued = wake_remote(&header);
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
                core.wakes.drain_into(&mut ready);
            }
            while let Some(_key) = ready.pop_front() {
                if !slot_alive {
                    stale += 1;
                    continue;
                }
                header.0.state.start_poll();
                polls += 1;
                // The future completes: drop the slot, then close.
                slot_alive = false;
                header.0.state.close();
                closed.store(true, Ordering::Release);
            }
        }
        let enqueued = waker.join().unwrap();
        core.wakes.drain_into(&mut ready);
        stale += ready.len();
        assert_eq!(polls, 1, "polled after completion");
        assert_eq!(stale, usize::from(enqueued), "one queue entry per enqueue");
        assert!(stale <= 1);
        // Closed for good: later wakes enqueue nothing.
        assert!(!header.0.state.wake());
    });
}

/// A task dropped without completing (cancelled at core stop), raced by a
/// wake; then a second wake that surely comes after the drop. Nothing is
/// polled, at most one stale key is queued, the late wake enqueues
/// nothing, and the task (held by the waker) is freed with its last handle.
#[test]
fn wake_after_drop() {
    check("task_state::wake_after_drop", || {
        let core = Core::<u32>::new(4);
        let header = TaskRef::new(KEY, &core);
        // The task was polled once and is waiting: its flag is clear.
        header.0.state.start_poll();
        let freed = std::sync::Arc::downgrade(&header.0);
        let closed = std::sync::Arc::new(AtomicBool::new(false));
        let waker = {
            let (header, closed) = (header.clone(), closed.clone());
            thread::spawn(move || {
                let mut enqueued = 0;
                for _ in 0..2 {
                    let after_close = closed.load(Ordering::Acquire);
                    let e = wake_remote(&header);
                    assert!(!(after_close && e), "a wake after close enqueued the task");
                    enqueued += usize::from(e);
                }
                drop(header);
                enqueued
            })
        };
        // `Executor::cancel_all`: remove the slot, close, drop the future.
        header.0.state.close();
        closed.store(true, Ordering::Release);
        drop(header);
        let enqueued = waker.join().unwrap();
        assert_eq!(freed.strong_count(), 0, "the task outlived its last handle");
        let mut stale = VecDeque::new();
        core.wakes.drain_into(&mut stale);
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
        let header = TaskRef::new(KEY, &core);
        let events = Arc::new(AtomicUsize::new(0));
        let wakers: Vec<_> = (0..THREADS)
            .map(|_| {
                let (header, events) = (header.clone(), events.clone());
                thread::spawn(move || {
                    for _ in 0..WAKES {
                        events.fetch_add(1, Ordering::Release);
                        wake::wake_by_ref(&header);
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
                header.0.state.start_poll();
                *polls += 1;
                seen = events.load(Ordering::Acquire);
            }
            seen
        };
        loop {
            core.wakes.drain_into(&mut ready);
            if poll(&mut ready, &mut polls) == EVENTS {
                break;
            }
            core.park();
        }
        for w in wakers {
            w.join().unwrap();
        }
        // A wake may have come after the poll that saw the last event.
        core.wakes.drain_into(&mut ready);
        poll(&mut ready, &mut polls);
        // Counted by the task outside loom's view: an oracle.
        let (local, enqueues) = header.enqueues();
        assert_eq!(local, 0);
        assert_eq!(polls, 1 + enqueues, "one poll per enqueue");
        assert!(enqueues <= EVENTS);
        header.0.state.close();
        assert!(!header.0.state.wake());
    });
}
