//! The handlers that ship with percore: raw TCP echo, HTTP/1.1, and the
//! fan-out proxy.
#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms
)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod echo;
pub mod http;
mod log_limit;
pub mod proxy;
// Also included by path into the proxy's response head scanner, which must
// build outside this crate (see the module docs).
#[allow(clippy::duplicate_mod)]
mod tchar;
