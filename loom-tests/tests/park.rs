//! A wake from another thread racing the owner core going to sleep.
//!
//! The core loop here is `Core::turn` reduced to its cross-thread steps:
//! drain the inboxes, run what came, then `prepare_park(has_work)`, block
//! on the "eventfd" (a loom condvar) only if that returns `true`, then
//! `finish_park`. A lost wake-up leaves the core blocked forever, which loom
//! reports as a deadlock.
#![cfg(loom)]

use std::collections::VecDeque;
use std::sync::Arc;

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use loom_tests::{check, Core};
use percore::sync::{Remote, TaskState};

const KEY: u32 = 7;

/// A task the core polled once and that waits on an event another thread
/// completes (an I/O readiness, a reply), then wakes the task through the
/// real remote-wake path: `TaskState::wake`, push onto the owner's inbox,
/// `Parker::unpark` (`TaskHeader::wake_by_ref` + `CoreShared::wake_remote`).
struct Task {
    state: TaskState,
    event: AtomicBool,
}

impl Task {
    fn wake_from(&self, core: &Core<u32>) {
        if self.state.wake() {
            core.send(KEY).expect("the inbox has room and is open");
        }
    }

    /// One poll, as `Executor::poll_task` does it: clear the flag, then run
    /// the future; returns whether it completed.
    fn poll(&self) -> bool {
        self.state.start_poll();
        if self.event.load(Ordering::Acquire) {
            self.state.close();
            true
        } else {
            false
        }
    }
}

/// The task is spawned (queued locally, flag set) while another thread
/// completes its event and wakes it. Whatever the interleaving, the task
/// sees the event and completes, and the core never sleeps through the
/// wake.
#[test]
fn remote_wake_races_park() {
    check("park::remote_wake_races_park", || {
        let core = Core::<u32>::new(4);
        let task = Arc::new(Task {
            state: TaskState::new_scheduled(),
            event: AtomicBool::new(false),
        });
        let waker = {
            let (core, task) = (core.clone(), task.clone());
            thread::spawn(move || {
                task.event.store(true, Ordering::Release);
                task.wake_from(&core);
            })
        };
        let mut ready: VecDeque<u32> = VecDeque::from([KEY]);
        let mut polls = 0;
        let done = 'turns: loop {
            core.drain(&mut ready);
            while let Some(key) = ready.pop_front() {
                assert_eq!(key, KEY);
                polls += 1;
                if task.poll() {
                    break 'turns true;
                }
            }
            core.park_on_inbox();
        };
        assert!(done);
        assert!(polls <= 2, "one poll per wake-up edge, got {polls}");
        waker.join().unwrap();
        // Completed: a late wake enqueues nothing.
        assert!(!task.state.wake());
    });
}

/// The real core has two inboxes (task wakes, cross-core messages) and one
/// parker; `has_inbox_items` checks both. A wake and a message arrive from
/// two threads while the core parks: both are always handled.
#[test]
fn wake_and_message_race_park() {
    check("park::wake_and_message_race_park", || {
        let core = Core::<u32>::new(4);
        let mailbox = Arc::new(Remote::<u32>::new(4));
        let t1 = {
            let core = core.clone();
            thread::spawn(move || core.send(1).unwrap())
        };
        let t2 = {
            let (core, mailbox) = (core.clone(), mailbox.clone());
            thread::spawn(move || {
                mailbox.push(2).unwrap();
                core.parker.unpark();
            })
        };
        let (mut wakes, mut messages) = (VecDeque::new(), VecDeque::new());
        loop {
            core.drain(&mut wakes);
            mailbox.drain_into(&mut messages);
            if wakes.len() == 1 && messages.len() == 1 {
                break;
            }
            core.park(|| core.inbox.has_items() || mailbox.has_items());
        }
        assert_eq!((wakes[0], messages[0]), (1, 2));
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
                core.park_on_inbox();
            }
        }
        assert_eq!(got, [1, 2]);
        sender.join().unwrap();
    });
}

/// The core stops (its main task ended: `close_mailbox`, then it lets go
/// of its shared part) while another thread wakes one of its tasks. The
/// core was parked and woke for another reason (a timer, here a thread
/// that rings the "eventfd"), so the waker's `unpark` may notify a core
/// that already stopped. That is harmless by construction: the waker holds
/// the core's shared part (`TaskHeader::owner`), so the notifier outlives
/// every wake; loom checks the shared part is freed exactly once. The wake
/// itself is either drained, handed back by close, or refused.
#[test]
fn wake_races_core_stop() {
    check("park::wake_races_core_stop", || {
        let core = loom::sync::Arc::new(Core::<u32>::bare(4));
        let header = loom::sync::Arc::new(TaskState::new_scheduled());
        header.start_poll();
        let waker = {
            let (core, header) = (core.clone(), header.clone());
            thread::spawn(move || {
                if header.wake() {
                    core.send(KEY).is_ok()
                } else {
                    false
                }
            })
        };
        let timer = {
            let core = core.clone();
            thread::spawn(move || core.bell.ring())
        };
        let mut got = VecDeque::new();
        core.drain(&mut got);
        if got.is_empty() {
            core.park_on_inbox();
            core.drain(&mut got);
        }
        // Stop: close the inbox, drop the tasks, let go of the core.
        let mut leftover = VecDeque::new();
        core.inbox.close(&mut leftover);
        header.close();
        drop(core);
        let accepted = waker.join().unwrap();
        timer.join().unwrap();
        assert_eq!(got.len() + leftover.len(), usize::from(accepted));
    });
}
