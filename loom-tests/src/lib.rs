//! loom models of percore's cross-thread code live in `tests/`; run them
//! with
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 \
//!     CARGO_TARGET_DIR=target/loom cargo test -p loom-tests --release
//! ```
//!
//! This library holds what the models share: the stand-in for a core's
//! eventfd (`Doorbell`) and for the driver's wait on it (`Kernel`: `Epoll`,
//! and `Uring`, which drives the real `WakeRead`), a core built from the
//! real parker, inboxes and stop latch (`Core`, lent to the real
//! `percore::sync::wake` functions as a `CoreSide`), a task handle for the
//! real `wake`/`wake_by_ref` (`TaskRef`), a waker that rings a doorbell,
//! and `check`, which runs a model and reports how many interleavings loom
//! explored. See `loom-tests/README.md` for what each model proves.

#[cfg(loom)]
mod support;

#[cfg(loom)]
pub use support::*;
