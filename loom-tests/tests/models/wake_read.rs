//! The read an io_uring core keeps on its eventfd, re-armed across parks
//! while peers notify.
//!
//! The core's driver is the `Uring` model: the framework's own `WakeRead`
//! state machine, driven as `driver/uring` drives it (submit a read before
//! a wait unless one is in flight; the reaped completion disarms it), over
//! a kernel whose eventfd counter is a `Doorbell`. A read in flight
//! completes once the counter is non-zero; a notification while no read is
//! in flight stays in the counter. The model asserts that the core never
//! waits without a limit while no read is in flight (no notification could
//! end that wait), and loom reports a core that sleeps through a message
//! as a deadlock.
#![cfg(loom)]

use std::collections::VecDeque;
use std::sync::Arc;

use loom::thread;
use loom_tests::{check, Core, Uring};

/// A peer thread that sends `messages` to the core, in order.
fn peer_sending(core: &Arc<Core<u32>>, messages: &'static [u32]) -> thread::JoinHandle<()> {
    let core = core.clone();
    thread::spawn(move || {
        for &message in messages {
            core.send(message).unwrap();
        }
    })
}

/// The core takes `n` messages from a peer, parking in `kernel` whenever
/// its mailbox is empty.
fn receive(core: &Core<u32>, kernel: &mut Uring, n: usize) -> VecDeque<u32> {
    let mut got = VecDeque::new();
    while got.len() < n {
        core.drain(&mut got);
        if got.len() < n {
            core.park_in(kernel, false);
        }
    }
    got
}

/// A peer sends two messages (each: push, unpark) while the core parks
/// for them. The first notification completes the read; the second may
/// come while no read is in flight (between the reap and the next park),
/// stays in the counter, and the read re-armed at the next park completes
/// at once. Both messages arrive; there is never more than one read in
/// flight.
#[test]
fn rearm_while_peer_notifies() {
    check("wake_read::rearm_while_peer_notifies", || {
        let core = Core::<u32>::new(4);
        let peer = peer_sending(&core, &[1, 2]);
        let mut kernel = Uring::new(&core.bell);
        let got = receive(&core, &mut kernel, 2);
        assert_eq!(got, [1, 2]);
        assert!(kernel.completions <= kernel.submits);
        assert!(kernel.submits <= kernel.completions + 1);
        peer.join().unwrap();
    });
}

/// The read cannot be submitted at the first park (an SQ that stays
/// full): that wait is bounded, the next park submits the read, and the
/// message still arrives.
#[test]
fn failed_submission_is_retried() {
    check("wake_read::failed_submission_is_retried", || {
        let core = Core::<u32>::new(4);
        let peer = peer_sending(&core, &[1]);
        let mut kernel = Uring::new(&core.bell);
        kernel.failing_submits = 1;
        let got = receive(&core, &mut kernel, 1);
        assert_eq!(got, [1]);
        peer.join().unwrap();
    });
}

/// **Must fail**: a driver that does not disarm the read when it reaps its
/// completion believes a read is still in flight at the next park, and
/// waits with nothing on the eventfd: the second message's notification
/// cannot end that wait.
#[test]
#[should_panic(expected = "no read on the eventfd")]
fn forgotten_completion_loses_wakeup() {
    check("wake_read::forgotten_completion_loses_wakeup", || {
        let core = Core::<u32>::new(4);
        let peer = peer_sending(&core, &[1, 2]);
        let mut kernel = Uring::new(&core.bell);
        kernel.forget_completions = true;
        receive(&core, &mut kernel, 2);
        peer.join().unwrap();
    });
}
