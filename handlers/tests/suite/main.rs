//! The handlers' integration tests, one module per subject, in one binary.
//! Tests that change what the whole process does (the counting allocator,
//! `SIGPIPE`, the descriptor limit) have binaries of their own beside it.

mod client_basic;
mod client_faults;
mod client_h2;
mod client_h2_faults;
mod client_nginx;
mod client_targets;
mod client_tls;
mod echo_batching;
mod echo_pressure;
mod echo_shutdown;
mod echo_stream;
mod fanout_basic;
mod fanout_drain;
mod fanout_ejection;
mod fanout_faults;
mod fanout_forwarding;
mod fanout_h2;
mod fanout_loop;
mod fanout_nginx;
mod fanout_stop;
mod fanout_tls;
mod fanout_upgrade;
mod http2;
mod http2_abuse;
mod http2_trailers;
mod http_answer_first;
mod http_basic;
mod http_body_limit;
mod http_curl;
mod http_declared_length;
mod http_error_body;
mod http_faults;
mod http_flood;
mod http_flush_edges;
mod http_json;
mod http_move;
mod http_refusal;
mod http_route_stall;
mod http_router;
mod http_send_file;
mod http_service;
mod http_shed;
mod http_slow;
mod http_slow_bodies;
mod http_stall;
mod http_stats;
mod http_stop;
mod http_tls;
mod http_unix;
mod static_files;
#[path = "../support/mod.rs"]
mod support;
mod ws_basic;
mod ws_broadcast;
mod ws_conformance;
#[cfg(feature = "ws-deflate")]
mod ws_deflate;
#[cfg(feature = "ws-deflate")]
mod ws_deflate_python;
mod ws_h2;
mod ws_h2_tls;
mod ws_limits;
mod ws_metrics;
mod ws_python;
