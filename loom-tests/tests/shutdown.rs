//! The stop signal racing cores on their way to sleep.
//!
//! The stopper does what `ServerHandle::shutdown` does: `Shutdown::trigger`,
//! then `unpark` every core (`CoreShared::signal_shutdown`). A core does
//! what `Core::turn` does: check the latch, and park with the latch among
//! its `has_work` checks (`prepare_park` announces the park first, then
//! checks). A core that sleeps through the stop never exits: loom reports
//! the deadlock.
#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use loom_tests::{check, Core};
use percore::sync::Shutdown;

/// One core's loop until it sees the stop; returns its loop turns.
fn run_core(core: &Core<u32>, shutdown: &Shutdown) -> usize {
    let mut turns = 0;
    loop {
        turns += 1;
        if shutdown.is_triggered() {
            return turns;
        }
        core.park(|| core.inbox.has_items() || shutdown.is_triggered());
    }
}

/// Two cores park while a third thread stops the server: both see the
/// stop and exit, whatever the interleaving.
#[test]
fn stop_while_cores_park() {
    check("shutdown::stop_while_cores_park", || {
        let shutdown = Arc::new(Shutdown::new());
        let cores: Vec<Arc<Core<u32>>> = (0..2).map(|_| Core::new(4)).collect();
        let threads: Vec<_> = cores
            .iter()
            .map(|core| {
                let (core, shutdown) = (core.clone(), shutdown.clone());
                thread::spawn(move || run_core(&core, &shutdown))
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
        let shutdown = Arc::new(Shutdown::new());
        let core = Core::<u32>::new(4);
        let stoppers: Vec<_> = (0..2)
            .map(|_| {
                let (core, shutdown) = (core.clone(), shutdown.clone());
                thread::spawn(move || {
                    let flipped = shutdown.trigger();
                    core.parker.unpark();
                    flipped
                })
            })
            .collect();
        run_core(&core, &shutdown);
        let flips: usize = stoppers
            .into_iter()
            .map(|s| usize::from(s.join().unwrap()))
            .sum();
        assert_eq!(flips, 1);
    });
}
