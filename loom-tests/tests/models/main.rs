//! The loom models of percore's cross-thread code, one module per model, in
//! one binary (built with `--cfg loom`; without it the binary is empty).

mod countdown;
mod handoff;
mod lost_wakeup;
mod oneshot;
mod park;
mod remote;
mod shutdown;
mod task_state;
mod wake_read;
