//! A counting global allocator for the zero-allocation tests: it counts
//! only on threads that set [`TRACKED`] (a server's core thread) and only
//! while [`COUNTING`] is on, remembering the first sizes; [`TRAP`]
//! (`PERCORE_ALLOC_TRAP=1`) prints the backtrace of the first counted
//! allocation and aborts (counting is switched off first, so printing it
//! does not recurse).

#![allow(dead_code)] // each test binary uses part of it

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

struct Counting;

pub static COUNTING: AtomicBool = AtomicBool::new(false);
pub static TRAP: AtomicBool = AtomicBool::new(false);
pub static ALLOCS: AtomicU64 = AtomicU64::new(0);
pub static SIZES: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];

thread_local! {
    /// Set on the thread whose allocations count.
    pub static TRACKED: Cell<bool> = const { Cell::new(false) };
}

impl Counting {
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
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counting touches only atomics and a const-initialised thread-local with
// no destructor, neither of which allocates.
unsafe impl GlobalAlloc for Counting {
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

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The two backends' tests must not count each other's server.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
