//! The framework's zero-allocation tests: one binary, as the counting
//! global allocator is one per binary.

percore_test_kit::count_allocations!();
mod fs_alloc;
mod task_size;
mod udp_alloc;
mod write_vectored_alloc;
