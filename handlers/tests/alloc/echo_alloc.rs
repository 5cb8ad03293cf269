//! Steady state allocates nothing: after warm-up, echoing 100,000 messages
//! makes zero heap allocations on the server's core thread, on both
//! backends.
//!
//! A counting `#[global_allocator]` counts only on threads that opted in:
//! the handler factory opts the core thread in, so the clients (std
//! sockets in their own threads) are not counted. If an allocation is
//! counted inside the measured window, the backtrace of the first one is
//! captured (with counting paused on that thread) and shown in the failure.

use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::sync::Barrier;
use std::time::Instant;

use percore_handlers::echo::Echo;
use percore_test_kit::alloc::{ALLOCS, COUNTING, FIRST_IN_WINDOW, TRACKED, WINDOW};
use percore_test_kit::*;

/// Client threads, each with one connection.
const CLIENTS: usize = 4;
const WARM_UP: usize = 2_000;
/// Per client: 4 × 25,000 = 100,000 messages in the window.
const MEASURED: usize = 25_000;
const MESSAGE: usize = 64;

backend_tests! {
    /// Zero heap allocations per echoed message after warm-up.
    fn zero_allocations_per_message(backend) {
        COUNTING.store(true, Ordering::SeqCst);
        let server = builder(backend)
            .start(|_core| {
                TRACKED.with(|t| t.set(true));
                Echo
            })
            .expect("start");
        check_backend(&server, backend);
        let addr = server.local_addr();
        let barrier = Barrier::new(CLIENTS + 1);
        let (before, after, elapsed) = std::thread::scope(|scope| {
            for id in 0..CLIENTS {
                let barrier = &barrier;
                scope.spawn(move || {
                    let mut stream = connect(addr);
                    let msg = pattern(id, MESSAGE);
                    let mut back = [0u8; MESSAGE];
                    let mut exchange = |n: usize| {
                        for _ in 0..n {
                            stream.write_all(msg).expect("write");
                            stream.read_exact(&mut back).expect("read");
                            assert_eq!(&back[..], msg, "echo differs");
                        }
                    };
                    exchange(WARM_UP);
                    barrier.wait(); // warm-up done everywhere
                    barrier.wait(); // window open
                    exchange(MEASURED);
                    barrier.wait(); // window closed
                    // Keep the connection open until the count is read:
                    // closing it is not a message (and the first close
                    // grows a driver vector once).
                    barrier.wait();
                });
            }
            barrier.wait();
            let before = ALLOCS.load(Ordering::Relaxed);
            WINDOW.store(true, Ordering::Relaxed);
            let started = Instant::now();
            barrier.wait();
            barrier.wait();
            let elapsed = started.elapsed();
            let after = ALLOCS.load(Ordering::Relaxed);
            WINDOW.store(false, Ordering::Relaxed);
            barrier.wait();
            (before, after, elapsed)
        });
        // The counter is live on the core thread: accepting the clients and
        // spawning their tasks allocated.
        assert!(before > 0, "the core thread's allocations were not counted");
        let stats = server.stats();
        server.shutdown();
        server.join().expect("join");
        let messages = (CLIENTS * MEASURED) as u64;
        println!(
            "{backend}: {} allocations during {messages} echoed messages ({elapsed:?}); {} before the window",
            after - before,
            before
        );
        assert!(sum(&stats, |c| c.bytes_out) >= messages * MESSAGE as u64);
        let first = FIRST_IN_WINDOW.lock().unwrap_or_else(|e| e.into_inner()).take();
        assert_eq!(
            after - before,
            0,
            "allocations on the core thread while echoing {messages} messages; the first one:\n{}",
            first.unwrap_or_default()
        );
    }
}

/// The counter counts the threads that opted in, and only those.
#[test]
fn the_allocator_counts_only_opted_in_threads() {
    let _serial = serial();
    COUNTING.store(true, Ordering::SeqCst);
    let before = ALLOCS.load(Ordering::Relaxed);
    drop(std::hint::black_box(vec![0u8; 100]));
    assert_eq!(
        ALLOCS.load(Ordering::Relaxed),
        before,
        "a thread that did not opt in was counted"
    );
    let counted = std::thread::spawn(|| {
        TRACKED.with(|t| t.set(true));
        let before = ALLOCS.load(Ordering::Relaxed);
        drop(std::hint::black_box(vec![0u8; 100]));
        ALLOCS.load(Ordering::Relaxed) - before
    })
    .join()
    .expect("thread");
    assert!(
        counted >= 1,
        "an opted-in thread's allocation was not counted"
    );
}
