//! The example servers, run as processes the way an operator runs them:
//! one module per server or subject, in one binary.

mod chat_browser;
mod chat_browser_h2;
mod chat_process;
mod cli;
mod cookbook;
mod counter_process;
#[path = "../echo_child/mod.rs"]
mod echo_child;
mod echo_process;
mod fanout_process;
mod fleet;
#[cfg(feature = "grpc")]
mod grpc;
mod h2_smoke;
mod hello;
mod http2_takeover;
mod http_echo_process;
mod https;
mod json_api_process;
mod metrics;
mod stats_collector;
mod stop_signals;
mod unix_socket;
