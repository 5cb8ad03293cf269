//! tokio-based crates inside percore handlers, and hyper services on
//! percore connections.
//!
//! A percore handler runs on percore's executor, not tokio's, so a future
//! that needs tokio's reactor or timers (`tokio::time::sleep`, a database
//! driver such as `tokio-postgres`, an HTTP client such as hyper's or
//! reqwest) panics there: "there is no reactor running". Wrapped in
//! [`Compat`], it runs:
//!
//! ```no_run
//! use std::time::Duration;
//! use percore::{Connection, Handler};
//! use percore_tokio::CompatExt;
//!
//! struct Slow;
//!
//! impl Handler for Slow {
//!     async fn serve(&self, conn: Connection) -> std::io::Result<()> {
//!         tokio::time::sleep(Duration::from_millis(10)).compat().await;
//!         let (res, _) = conn.write_all(&b"late\n"[..]).await;
//!         res
//!     }
//! }
//!
//! fn main() -> std::io::Result<()> {
//!     percore::Server::builder()
//!         .address("127.0.0.1:7000".parse().unwrap())
//!         .serve(|_core| Slow)
//! }
//! ```
//!
//! # How it works, and what it costs
//!
//! One tokio runtime per process ([`handle`]), on a thread of its own,
//! owns the tokio resources: it waits in the kernel for their readiness
//! and for their timers. The futures that use them are polled on their
//! percore core, inside the runtime's context. When a resource becomes
//! ready, the runtime's thread wakes the percore task that awaits it, and
//! the wake crosses threads as every remote wake of percore does: a queue
//! push under a lock and a notification of the core, if it is parked.
//! So each readiness event or expired timer of a tokio resource costs a
//! cross-thread wake and, on an idle core, one more trip through the
//! kernel; registering a timer earlier than the runtime's next deadline
//! wakes the runtime's thread as well. The handler's own percore I/O is
//! untouched: it stays on the core's io_uring or epoll.
//!
//! Prefer a native percore client (`percore::net`, percore-handlers'
//! HTTP client) where one exists and the calls are on the hot path; use a
//! tokio-based one where the ecosystem has the client you need (databases,
//! caches, cloud SDKs) and its round trip, not the wake, dominates.
//!
//! A tokio-based client that runs a background future (tokio-postgres's
//! `Connection`) is driven on the core with [`spawn_local`]; one that
//! calls `tokio::spawn` itself runs that task on the runtime's thread.
//!
//! # hyper and axum
//!
//! With the feature `hyper`, the module `hyper` implements hyper 1.x's
//! runtime traits over percore and serves a hyper or tower service (an
//! axum `Router`) on a percore connection.
#![doc(test(attr(deny(warnings))))]
// docs.rs (`--cfg docsrs`, nightly) marks each item that needs a feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod compat;
#[cfg(feature = "hyper")]
#[cfg_attr(docsrs, doc(cfg(feature = "hyper")))]
pub mod hyper;
mod runtime;

pub use compat::{compat, spawn_local, Compat, CompatExt};
pub use runtime::{handle, install, THREAD_NAME};
