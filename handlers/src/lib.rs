//! The handlers that ship with percore: raw TCP echo, HTTP/1.1, static
//! files, and the fan-out proxy.
// docs.rs (`--cfg docsrs`, nightly) marks each item that needs a feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod client;
pub mod echo;
pub mod files;
pub mod http;
mod log_limit;
pub mod metrics;
mod one_line;
pub mod proxy;
pub mod ws;
