//! percore-tokio's integration tests in one binary: tokio timers, PostgreSQL,
//! and (feature `hyper`) hyper's client and axum on percore connections,
//! over HTTP/1.1 and HTTP/2, with axum's WebSocket upgrades.

#[cfg(feature = "hyper")]
mod axum_h2;
#[cfg(feature = "hyper")]
mod axum_routes;
#[cfg(feature = "hyper")]
mod axum_ws;
#[cfg(feature = "hyper")]
mod client;
mod postgres;
mod timers;
