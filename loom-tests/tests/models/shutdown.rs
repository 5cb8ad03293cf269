//! The stop signal racing cores on their way to sleep.
//!
//! The stopper does what `ServerHandle::shutdown` does: `Shutdown::trigger`,
//! then `unpark` every core (`CoreShared::signal_shutdown`). A core does
//! what `Core::turn` does: `check_shutdown`, then the framework's own
//! `CoreSide::park`, whose `has_work` counts a stop the loop has not yet
//! seen (`prepare_park` announces the park first, then checks). A core
//! that sleeps through the stop never exits: loom reports the deadlock.
#![cfg(loom)]

use std::sync::Arc;

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use loom_tests::{check, Core, TaskRef, Uring};
use percore::sync::{wake, Shutdown};

/// One core's loop until it sees the stop; returns its loop turns.
fn run_core(core: &Core<u32>) -> usize {
    let mut kernel = Uring::new(&core.bell);
    let mut turns = 0;
    loop {
        turns += 1;
        if core.shutdown.is_triggered() {
            return turns;
        }
        core.park_in(&mut kernel, false);
    }
}

/// Two cores park while a third thread stops the server: both see the
/// stop and exit, whatever the interleaving.
#[test]
fn stop_while_cores_park() {
    check("shutdown::stop_while_cores_park", || {
        let shutdown = Arc::new(Shutdown::new());
        let cores: Vec<Arc<Core<u32>>> = (0..2)
            .map(|_| Core::with_shutdown(4, shutdown.clone()))
            .collect();
        let threads: Vec<_> = cores
            .iter()
            .map(|core| {
                let core = core.clone();
                thread::spawn(move || run_core(&core))
            })
            .collect();
        assert!(shutdown.trigger(), "the first trigger flips the latch");
        for core in &cores {
            core.parker.unpark();
        }
        for t in threads {
            assert!(t.join().unwrap() >= 1);
        }
        assert!(!shutdown.trigger(), "the latch flips once");
    });
}

/// Two stoppers (a signal handler and `ServerHandle::shutdown`) race each
/// other and the core: exactly one flips the latch, both unpark, the core
/// exits.
#[test]
fn two_stoppers_one_core() {
    check("shutdown::two_stoppers_one_core", || {
        let core = Core::<u32>::new(4);
        let stoppers: Vec<_> = (0..2)
            .map(|_| {
                let core = core.clone();
                thread::spawn(move || {
                    let flipped = core.shutdown.trigger();
                    core.parker.unpark();
                    flipped
                })
            })
            .collect();
        run_core(&core);
        let flips: usize = stoppers
            .into_iter()
            .map(|s| usize::from(s.join().unwrap()))
            .sum();
        assert_eq!(flips, 1);
    });
}

/// The stop comes while the core parks, and the core then drains: it keeps
/// turning until its last task (a connection finishing its request) is
/// woken from another thread and completes. Once the loop has seen the
/// stop, the latch no longer counts as work (`has_work` with
/// `shutdown_seen`), so the draining core blocks again, and the task's
/// wake still ends that wait.
#[test]
fn stop_then_drain() {
    check("shutdown::stop_then_drain", || {
        let core = Core::<u32>::new(4);
        let done = Arc::new(AtomicBool::new(false));
        let task = TaskRef::new(1, &core);
        task.0.state.start_poll();
        let stopper = {
            let core = core.clone();
            thread::spawn(move || {
                core.shutdown.trigger();
                core.parker.unpark();
            })
        };
        let waker = {
            let (task, done) = (task.clone(), done.clone());
            thread::spawn(move || {
                done.store(true, Ordering::Release);
                wake::wake(task);
            })
        };
        let mut kernel = Uring::new(&core.bell);
        let mut seen = false;
        let mut finished = false;
        loop {
            // `check_shutdown`, then the remote wakes and the ready tasks.
            seen |= core.shutdown.is_triggered();
            core.take_remote_wakes();
            while core.next_ready().is_some() {
                task.0.state.start_poll();
                finished |= done.load(Ordering::Acquire);
            }
            if seen && finished {
                break;
            }
            core.park_in(&mut kernel, seen);
        }
        stopper.join().unwrap();
        waker.join().unwrap();
    });
}
