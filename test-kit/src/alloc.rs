//! The counting global allocator of the zero-allocation tests.
//!
//! A library cannot install a global allocator for its users, so a test
//! binary installs [`CountingAlloc`] itself, with
//! [`count_allocations!`](crate::count_allocations). The counters below
//! live in this crate, one set per test binary.
//!
//! An allocation is counted only on a thread that set [`TRACKED`] (a
//! server's core thread, say), and only while [`COUNTING`] is on. The
//! first [`SIZES`] are remembered. While [`WINDOW`] is set, the first
//! counted allocation records its backtrace in [`FIRST_IN_WINDOW`];
//! [`TRAP`] (`PERCORE_ALLOC_TRAP=1`) prints the backtrace of the first
//! counted allocation and aborts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// `System`, counting the allocation calls (`alloc`, `alloc_zeroed`,
/// `realloc`) of the threads that opted in.
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingAlloc;

/// Installs [`CountingAlloc`] as the `#[global_allocator]` of the test
/// binary that calls it (once, at the top level of the test file).
///
/// ```ignore
/// percore_test_kit::count_allocations!();
/// ```
#[macro_export]
macro_rules! count_allocations {
    () => {
        #[global_allocator]
        static PERCORE_TEST_KIT_ALLOCATOR: $crate::alloc::CountingAlloc =
            $crate::alloc::CountingAlloc;
    };
}

/// Whether allocations count at all (on the threads that set [`TRACKED`]).
pub static COUNTING: AtomicBool = AtomicBool::new(false);
/// Abort at the first counted allocation, printing its backtrace.
pub static TRAP: AtomicBool = AtomicBool::new(false);
/// Allocations counted so far.
pub static ALLOCS: AtomicU64 = AtomicU64::new(0);
/// The sizes of the first allocations counted since [`ALLOCS`] was zero.
pub static SIZES: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];
/// While set, the first counted allocation records its backtrace in
/// [`FIRST_IN_WINDOW`] (and clears this flag).
pub static WINDOW: AtomicBool = AtomicBool::new(false);
/// The backtrace of the first allocation counted in a [`WINDOW`].
pub static FIRST_IN_WINDOW: Mutex<Option<String>> = Mutex::new(None);

thread_local! {
    /// Set on the threads whose allocations count. `const` with no
    /// destructor: reading it never allocates, so the allocator may.
    pub static TRACKED: Cell<bool> = const { Cell::new(false) };
}

impl CountingAlloc {
    fn record(size: usize) {
        if !COUNTING.load(Ordering::Relaxed) || !TRACKED.try_with(Cell::get).unwrap_or(false) {
            return;
        }
        if TRAP.load(Ordering::Relaxed) {
            COUNTING.store(false, Ordering::SeqCst);
            eprintln!(
                "ALLOC {size}\n{}",
                std::backtrace::Backtrace::force_capture()
            );
            std::process::abort();
        }
        let n = ALLOCS.fetch_add(1, Ordering::Relaxed) as usize;
        if let Some(slot) = SIZES.get(n) {
            slot.store(size, Ordering::Relaxed);
        }
        if WINDOW.swap(false, Ordering::Relaxed) {
            // Pause counting on this thread: the backtrace allocates.
            TRACKED.with(|t| t.set(false));
            let trace = std::backtrace::Backtrace::force_capture().to_string();
            *FIRST_IN_WINDOW.lock().unwrap_or_else(|e| e.into_inner()) = Some(trace);
            TRACKED.with(|t| t.set(true));
        }
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counting touches only atomics and a const-initialised thread-local with
// no destructor, neither of which allocates. The backtraces that do
// allocate are taken with this thread's counting paused or just before
// the process aborts.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::record(layout.size());
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::record(layout.size());
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::record(new_size);
        // SAFETY: forwarded with the caller's arguments.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's arguments.
        unsafe { System.dealloc(ptr, layout) }
    }
}
