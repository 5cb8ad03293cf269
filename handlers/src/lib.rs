//! The handlers that ship with percore: raw TCP echo, HTTP/1.1, static
//! files, and the fan-out proxy.

pub mod client;
pub mod echo;
pub mod files;
pub mod http;
mod log_limit;
pub mod metrics;
mod one_line;
pub mod proxy;
