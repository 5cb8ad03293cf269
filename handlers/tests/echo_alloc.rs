//! Steady state allocates nothing: after warm-up, echoing 100,000 messages
//! makes zero heap allocations on the server's core thread, on both
//! backends.
//!
//! A counting `#[global_allocator]` counts only on threads that opted in:
//! the handler factory opts the core thread in, so the clients (std
//! sockets in their own threads) are not counted. If an allocation is
//! counted inside the measured window, the backtrace of the first one is
//! captured (with counting paused on that thread) and shown in the failure.

#[macro_use]
mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::Instant;

use percore_handlers::echo::Echo;
use support::*;

/// Counts allocation calls made by threads that set [`COUNTING`].
struct CountingAlloc;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
/// Set while the measured window is open: the first counted allocation in
/// it records a backtrace.
static WINDOW: AtomicBool = AtomicBool::new(false);
static FIRST_IN_WINDOW: Mutex<Option<String>> = Mutex::new(None);

thread_local! {
    // `const` with no destructor: reading it never allocates, so the
    // allocator may use it.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

impl CountingAlloc {
    fn count(&self) {
        if !COUNTING.try_with(Cell::get).unwrap_or(false) {
            return;
        }
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        if WINDOW.swap(false, Ordering::Relaxed) {
            // Pause counting here: the backtrace allocates.
            COUNTING.with(|c| c.set(false));
            let trace = std::backtrace::Backtrace::force_capture().to_string();
            *FIRST_IN_WINDOW.lock().unwrap_or_else(|e| e.into_inner()) = Some(trace);
            COUNTING.with(|c| c.set(true));
        }
    }
}

// SAFETY: every method forwards to `System` unchanged; counting touches
// only an atomic and a const thread-local.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.count();
        // SAFETY: forwarded; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.count();
        // SAFETY: forwarded; the caller upholds `alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded; `ptr` came from `System` through this type.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.count();
        // SAFETY: forwarded; `ptr` came from `System` through this type.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Client threads, each with one connection.
const CLIENTS: usize = 4;
const WARM_UP: usize = 2_000;
/// Per client: 4 × 25,000 = 100,000 messages in the window.
const MEASURED: usize = 25_000;
const MESSAGE: usize = 64;

backend_tests! {
    /// Zero heap allocations per echoed message after warm-up.
    fn zero_allocations_per_message(backend) {
        let server = builder(backend)
            .start(|_core| {
                COUNTING.with(|c| c.set(true));
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
            let before = ALLOCATIONS.load(Ordering::Relaxed);
            WINDOW.store(true, Ordering::Relaxed);
            let started = Instant::now();
            barrier.wait();
            barrier.wait();
            let elapsed = started.elapsed();
            let after = ALLOCATIONS.load(Ordering::Relaxed);
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
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    drop(std::hint::black_box(vec![0u8; 100]));
    assert_eq!(
        ALLOCATIONS.load(Ordering::Relaxed),
        before,
        "a thread that did not opt in was counted"
    );
    let counted = std::thread::spawn(|| {
        COUNTING.with(|c| c.set(true));
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        drop(std::hint::black_box(vec![0u8; 100]));
        ALLOCATIONS.load(Ordering::Relaxed) - before
    })
    .join()
    .expect("thread");
    assert!(
        counted >= 1,
        "an opted-in thread's allocation was not counted"
    );
}
