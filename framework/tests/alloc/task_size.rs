//! A spawned task costs its future's size once, on both backends: the
//! task's one allocation holds a future of 16 KiB in little more than
//! 16 KiB (a wrapper awaiting the future would hold it twice), and the
//! future still gives its output to the `JoinHandle`. A connection's task
//! is most of what an idle connection costs.

use percore_test_kit::backend_tests;

use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::time::Duration;

use percore::{block_on, spawn_local};
use percore_test_kit::alloc::{ALLOCS, COUNTING, SIZES, TRACKED};

/// What the future keeps across its await.
const STATE: usize = 16 * 1024;

backend_tests! {
    fn a_task_holds_its_future_once(backend) {
        block_on(backend, async {
            TRACKED.with(|t| t.set(true));
            ALLOCS.store(0, Ordering::SeqCst);
            COUNTING.store(true, Ordering::SeqCst);
            let task = spawn_local(async {
                let state = [7u8; STATE];
                percore::time::sleep(Duration::from_millis(1)).await;
                black_box(&state).iter().map(|&b| usize::from(b)).sum::<usize>()
            });
            COUNTING.store(false, Ordering::SeqCst);
            TRACKED.with(|t| t.set(false));
            let sizes: Vec<usize> = SIZES
                .iter()
                .take(ALLOCS.load(Ordering::SeqCst) as usize)
                .map(|s| s.load(Ordering::SeqCst))
                .collect();
            let largest = sizes.iter().copied().max().unwrap_or(0);
            assert!(
                (STATE..STATE + 1024).contains(&largest),
                "spawning a {STATE}-byte future allocated {sizes:?}"
            );
            assert_eq!(task.await, Ok(7 * STATE));
        })
        .expect("block_on");
    }
}
