//! A counting global allocator: the bench binary installs [`CountingAlloc`]
//! with `#[global_allocator]` and the harness reads [`allocations`] around
//! each measured window.
//!
//! What it measures: heap allocation calls (`alloc`, `alloc_zeroed`,
//! `realloc`) of the whole process, clients included, so allocations per
//! operation are an upper bound for the server. What it does not: bytes,
//! frees, or memory the kernel or io_uring allocate. The counter is one
//! relaxed atomic shared by all threads; its cost is paid equally by every
//! executor.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// `System` allocator that counts allocation calls.
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingAlloc;

// SAFETY: every method forwards to `System` with the caller's arguments, so
// `System`'s guarantees carry over; the counter has no effect on memory.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; `ptr` came from `System` via this type.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; `ptr` came from `System` via this type.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocation calls counted so far (0 forever if [`CountingAlloc`] is not the
/// global allocator; see [`is_counting`]).
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Whether [`CountingAlloc`] is installed: allocates a box and checks that the
/// counter moved.
pub fn is_counting() -> bool {
    let before = allocations();
    let b = std::hint::black_box(Box::new(0u64));
    drop(b);
    allocations() != before
}
