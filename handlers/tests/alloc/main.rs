//! The handlers' zero-allocation tests: one binary, as the counting global
//! allocator is one per binary.

percore_test_kit::count_allocations!();
mod echo_alloc;
mod fanout_alloc;
mod h2_alloc;
mod http_alloc;
mod http_tls_alloc;
#[path = "../support/mod.rs"]
mod support;
