//! A wake from another thread racing the owner core going to sleep.
//!
//! The wakers run the framework's own `sync::wake::{wake, wake_by_ref}`
//! (flag, then local run queue or remote inbox + unpark); the core runs
//! the cross-thread steps of `Core::turn`: take the remote wakes, poll what
//! is ready, then the framework's own `CoreSide::park` (announce, re-check
//! both inboxes and the stop latch, wait in the kernel only if all are
//! empty). A lost wake-up leaves the core blocked forever, which loom
//! reports as a deadlock.
#![cfg(loom)]

use std::collections::VecDeque;
use std::sync::Arc;

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use loom_tests::{check, Core, TaskRef, Uring};
use percore::sync::wake;

const KEY: u32 = 7;

/// One poll, as `Runnable::poll` does it: clear the flag, then run the
/// future, which completes once `event` is set; returns whether it did.
fn poll(task: &TaskRef, event: &AtomicBool) -> bool {
    task.0.state.start_poll();
    if event.load(Ordering::Acquire) {
        task.0.state.close();
        true
    } else {
        false
    }
}

/// The task is spawned (queued locally, flag set) while another thread
/// completes its event and wakes it (`Wake::wake`, by value). Whatever the
/// interleaving, the task sees the event and completes, and the io_uring
/// core never sleeps through the wake.
#[test]
fn remote_wake_races_park() {
    check("park::remote_wake_races_park", || {
        let core = Core::<u32>::new(4);
        let event = Arc::new(AtomicBool::new(false));
        let task = TaskRef::spawn(KEY, &core);
        let waker = {
            let (task, event) = (task.clone(), event.clone());
            thread::spawn(move || {
                event.store(true, Ordering::Release);
                wake::wake(task);
            })
        };
        let mut kernel = Uring::new(&core.bell);
        let mut polls = 0;
        'turns: loop {
            core.take_remote_wakes();
            while let Some(key) = core.next_ready() {
                assert_eq!(key, KEY);
                polls += 1;
                if poll(&task, &event) {
                    break 'turns;
                }
            }
            core.park_in(&mut kernel, false);
        }
        assert!(polls <= 2, "one poll per wake-up edge, got {polls}");
        waker.join().unwrap();
        let (local, remote) = task.enqueues();
        assert_eq!(local, 0, "a foreign thread used the run queue");
        assert!(remote <= 1);
        // Completed: a late wake enqueues nothing.
        assert!(!task.0.state.wake());
    });
}

/// A wake from the owner core's own thread and one from another thread at
/// the same time (an I/O completion handled locally, a reply from another
/// core). The task is queued exactly once, locally or remotely, and polled
/// exactly once.
#[test]
fn owner_and_foreign_wakes_race() {
    check("park::owner_and_foreign_wakes_race", || {
        let core = Core::<u32>::new(4);
        let task = TaskRef::new(KEY, &core);
        // Polled once, waiting: the flag is clear.
        task.0.state.start_poll();
        let foreign = {
            let task = task.clone();
            thread::spawn(move || wake::wake_by_ref(&task))
        };
        wake::wake_by_ref(&task);
        foreign.join().unwrap();
        let (local, remote) = task.enqueues();
        assert_eq!(
            local + remote,
            1,
            "queued {local} times locally, {remote} remotely"
        );
        let mut polls = 0;
        loop {
            core.take_remote_wakes();
            while let Some(key) = core.next_ready() {
                assert_eq!(key, KEY);
                task.0.state.start_poll();
                polls += 1;
            }
            if polls > 0 {
                break;
            }
            core.park();
        }
        core.take_remote_wakes();
        assert_eq!(core.next_ready(), None, "queued twice");
        assert_eq!(polls, 1);
    });
}

/// The real core has two inboxes (task wakes, cross-core messages) and one
/// parker; `CoreSide::has_work` checks both. A task wake and a message
/// arrive from two threads while the core parks: both are handled.
#[test]
fn wake_and_message_race_park() {
    check("park::wake_and_message_race_park", || {
        let core = Core::<u32>::new(4);
        let task = TaskRef::new(KEY, &core);
        task.0.state.start_poll();
        let t1 = {
            let task = task.clone();
            thread::spawn(move || wake::wake(task))
        };
        let t2 = {
            let core = core.clone();
            thread::spawn(move || core.send(2).unwrap())
        };
        let mut messages = VecDeque::new();
        let mut polls = 0;
        let mut kernel = Uring::new(&core.bell);
        loop {
            core.take_remote_wakes();
            while core.next_ready().is_some() {
                task.0.state.start_poll();
                polls += 1;
            }
            core.drain(&mut messages);
            if polls == 1 && messages.len() == 1 {
                break;
            }
            core.park_in(&mut kernel, false);
        }
        assert_eq!(messages[0], 2);
        t1.join().unwrap();
        t2.join().unwrap();
    });
}

/// Two rounds of park/unpark with the same parker: a notification left
/// over from the first round (the eventfd stays readable) only makes the
/// second park return early; the second item is still handled.
#[test]
fn repeated_parks() {
    check("park::repeated_parks", || {
        let core = Core::<u32>::new(4);
        let sender = {
            let core = core.clone();
            thread::spawn(move || {
                core.send(1).unwrap();
                core.send(2).unwrap();
            })
        };
        let mut got = VecDeque::new();
        while got.len() < 2 {
            core.drain(&mut got);
            if got.len() < 2 {
                core.park();
            }
        }
        assert_eq!(got, [1, 2]);
        sender.join().unwrap();
    });
}

/// The core stops (its main task ended: `close_mailbox` closes the wake
/// inbox too, the executor closes its tasks) while another thread wakes one
/// of its tasks. The core was parked and woke for another reason (a timer,
/// here a thread that rings the "eventfd"), so the waker's `unpark` may
/// notify a core that already stopped. That is harmless by construction:
/// the waker holds the task, which holds the core's shared part, so the
/// notifier outlives every wake; the task is freed with its last handle. The
/// wake itself is drained, handed back by close, or refused.
#[test]
fn wake_races_core_stop() {
    check("park::wake_races_core_stop", || {
        let core = Core::<u32>::new(4);
        let task = TaskRef::new(KEY, &core);
        task.0.state.start_poll();
        let waker = {
            let task = task.clone();
            thread::spawn(move || wake::wake(task))
        };
        let timer = {
            let core = core.clone();
            thread::spawn(move || core.bell.ring())
        };
        let mut got = core.take_remote_wakes();
        if got == 0 {
            core.park();
            got = core.take_remote_wakes();
        }
        // Stop: close the inbox, close the task, let go of it.
        let mut leftover = VecDeque::new();
        core.wakes.close(&mut leftover);
        task.0.state.close();
        waker.join().unwrap();
        timer.join().unwrap();
        let (local, remote) = task.enqueues();
        assert_eq!(local, 0);
        assert!(got + leftover.len() <= remote && remote <= 1);
        assert_eq!(
            core.wakes.drain_into(&mut leftover),
            0,
            "queued after close"
        );
        assert_eq!(std::sync::Arc::strong_count(&task.0), 1, "a handle leaked");
    });
}

/// A wake inbox that is full when a wake arrives (capacity 1 here; the
/// runtime's is unbounded) must not drop the wake: the task's flag stays
/// set, so no later wake would queue it again and it would never be polled.
/// Another thread wakes two waiting tasks while the core drains and parks:
/// both are polled.
#[test]
fn full_wake_inbox_loses_nothing() {
    check("park::full_wake_inbox_loses_nothing", || {
        let core = Core::<u32>::with_capacities(1, 4);
        let tasks = [TaskRef::new(1, &core), TaskRef::new(2, &core)];
        for task in &tasks {
            task.0.state.start_poll();
        }
        let waker = {
            let tasks = tasks.clone();
            thread::spawn(move || {
                for task in tasks {
                    wake::wake(task);
                }
            })
        };
        let mut kernel = Uring::new(&core.bell);
        let mut polled = [false; 2];
        while polled != [true; 2] {
            core.take_remote_wakes();
            while let Some(key) = core.next_ready() {
                let task = &tasks[key as usize - 1];
                task.0.state.start_poll();
                polled[key as usize - 1] = true;
            }
            if polled != [true; 2] {
                core.park_in(&mut kernel, false);
            }
        }
        waker.join().unwrap();
    });
}
