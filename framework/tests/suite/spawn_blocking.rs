//! `spawn_blocking` on both backends: the value comes back from the
//! other thread and wakes the core, the core runs its other tasks while
//! the call blocks, and a call that panics is an error, not a hang.

use std::sync::mpsc;
use std::time::Duration;

use percore::{block_on, spawn_blocking, spawn_local};
use percore_test_kit::{backend_tests, quiet_expected_panics};

/// A failure guard only: no verdict waits on it.
const HANG: Duration = Duration::from_secs(60);

backend_tests! {
    parallel;
    /// The blocking call waits for a task on the core to let it go: the
    /// core must run that task meanwhile.
    fn the_core_runs_on_while_a_call_blocks(backend) {
        let got = block_on(backend, async {
            let (tx, rx) = mpsc::channel::<u32>();
            let call = spawn_blocking(move || rx.recv_timeout(HANG).map(|n| n + 1));
            drop(spawn_local(async move {
                tx.send(41).expect("the call waits");
            }));
            percore::time::timeout(HANG, call).await.expect("the core hung")
        })
        .expect("run a core");
        assert_eq!(got.expect("the thread ran").expect("it was let go"), 42);
    }

    /// A panicking call is reported as an error.
    fn a_panic_is_an_error(backend) {
        quiet_expected_panics();
        let got = block_on(backend, async {
            let call = spawn_blocking(|| -> u32 { panic!("told to panic") });
            percore::time::timeout(HANG, call).await.expect("the core hung")
        })
        .expect("run a core");
        let e = got.expect_err("it panicked");
        assert_eq!(e.to_string(), "the blocking call panicked");
    }
}
