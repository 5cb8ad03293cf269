//! The parts of percore's fan-out proxy that need no runtime: scanning an
//! upstream response head, writing the fields a sub-request forwards, and
//! writing the combined answer.
//!
//! `percore-handlers` builds its proxy on them, and the tokio fan-out
//! baseline in `percore-benches` uses the same functions, so that the two
//! servers do the same work per request and a comparison measures the
//! runtimes. Only std and httparse: nothing here knows of percore.
#![doc(test(attr(deny(warnings))))]

pub mod combine;
pub mod forward;
pub mod head;
pub mod tchar;
