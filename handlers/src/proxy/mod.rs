//! The fan-out proxy: an HTTP [`Service`](crate::http::Service) that answers
//! each request by sending K concurrent sub-requests to upstream HTTP/1.1
//! servers and joining their answers (scatter-gather, as a search front end
//! or an API aggregator does).
//!
//! # How a request flows
//!
//! 1. The [`FanOut`] service reads the client's body (if any) and writes the
//!    parts of the sub-request that every branch shares (end-to-end headers,
//!    `Via`, `X-Forwarded-For`, a `Content-Length` and the body) once, into
//!    a per-core scratch buffer. Hop-by-hop fields, and fields named in
//!    `Connection`, are dropped; the body is always re-framed with
//!    `Content-Length` and every line ends in CRLF (FAULTS A13, F10, F11).
//! 2. It starts K branches ([`Config::width`]), spread round-robin over the
//!    upstreams, each a future that takes a keep-alive connection from the
//!    core's pool for its upstream ([`upstream`]), or connects under
//!    [`Config::connect_timeout`], and runs one exchange ([`client`]).
//! 3. The branches run concurrently inside the request's own task, joined
//!    by a small hand-written join ([`join`]) under the [`Policy`] and the
//!    request's [`Config::deadline`]. When the policy is met, or can no
//!    longer be met, the branches still running are dropped: their I/O is
//!    cancelled safely (the driver keeps buffers until the kernel is done)
//!    and their connections are closed, never returned to the pool with a
//!    half-read response.
//! 4. A met policy answers 200 with a JSON array ([`combine`]); otherwise
//!    502 (refused, reset, garbage, truncated, over a limit) or 504 (the
//!    deadline or the connect timeout passed), with a plain-text body naming
//!    each failed upstream and why.
//!
//! # Retries
//!
//! A branch is retried at most once, and only for idempotent methods
//! (RFC 9110 §9.2.2: GET, HEAD, OPTIONS, TRACE, PUT, DELETE):
//!
//! - on a *reused* pooled connection that failed before any byte of the
//!   response arrived (the upstream closed it as we reused it, FAULTS F5),
//!   the branch retries on a fresh connection to the same upstream;
//! - when connecting fails (nothing was sent, FAULTS F1) and there is
//!   another upstream, the branch retries on the next upstream in the ring.
//!
//! A POST (or any non-idempotent method) is never retried: once sent, the
//! upstream may have acted on it.
//!
//! # Memory
//!
//! Per-request scratch comes from per-core free lists: request and response
//! bytes live in reused `Vec<u8>`s ([`scratch::BufPool`]) and the branch
//! futures live in a [`bumpalo`] arena that is reset and reused after each
//! request ([`scratch::ArenaPool`]). In steady state a request allocates
//! nothing; a cancelled branch gives its buffer to the driver (which frees
//! it at the completion), so only failures allocate.
//!
//! # Examples
//!
//! ```no_run
//! use percore_handlers::http::HttpHandler;
//! use percore_handlers::proxy::{Config, FanOut, Policy};
//!
//! let mut config = Config::new(vec!["127.0.0.1:8080".parse().unwrap()]);
//! config.width = 4;
//! config.policy = Policy::Quorum(2);
//! config.validate().unwrap();
//! percore::Server::builder()
//!     .address("127.0.0.1:8081".parse().unwrap())
//!     .serve(move |_core| HttpHandler::new(FanOut::new(config.clone()).unwrap()))
//!     .unwrap();
//! ```

mod client;
mod combine;
mod config;
mod join;
mod scratch;
mod service;
mod stats;
mod upstream;

pub use config::{Config, ConfigError, Policy, PoolConfig};
pub use service::FanOut;
pub use stats::ProxyStats;

#[cfg(test)]
mod tests;
