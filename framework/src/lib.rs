//! percore: a thread-per-core server framework for Linux.
//!
//! A percore server runs one thread per CPU, pinned, each with its own
//! event loop (io_uring, or epoll where io_uring is unavailable), its own
//! `SO_REUSEPORT` listener and its own buffers. Nothing is shared between
//! cores on the hot path: a connection is accepted, served and closed by
//! one core, with no locks and no cross-thread wake-ups.
//!
//! You write a [`Handler`]; the server makes one per core and runs its
//! [`serve`](Handler::serve) for each connection:
//!
//! ```no_run
//! use percore::{Backend, Connection, Handler, Server};
//!
//! struct Echo;
//!
//! impl Handler for Echo {
//!     async fn serve(&self, conn: Connection) -> std::io::Result<()> {
//!         while let Some(buf) = conn.read().await? {
//!             let (res, _) = conn.write_all(buf).await;
//!             res?;
//!         }
//!         // A peer that reset first has nothing left to finish.
//!         match conn.shutdown_write() {
//!             Err(e) if e.kind() != std::io::ErrorKind::NotConnected => Err(e),
//!             _ => Ok(()),
//!         }
//!     }
//! }
//!
//! fn main() -> std::io::Result<()> {
//!     Server::builder()
//!         .address("127.0.0.1:7000".parse().unwrap())
//!         .backend(Backend::Auto)
//!         .serve(|_core| Echo)
//! }
//! ```
//!
//! I/O is completion-style with owned buffers on both backends: reads lend
//! a [`RecvBuf`](buf::RecvBuf) from the core's buffers, writes take any
//! [`IoBuf`](buf::IoBuf) by value and hand it back, and a header and a body
//! (any few buffers, [`IoBufs`](buf::IoBufs)) go out together, uncopied,
//! by [`write_all_vectored`](net::Stream::write_all_vectored).
//! Dropping a future with an operation in flight is safe: the kernel's
//! buffer stays alive until the kernel is done with it.
//!
//! A handler that does several things at once (asks two backends, relays
//! bytes both ways between its client and a backend) runs them in its own
//! task with [`future::join`], [`future::try_join`] and
//! [`future::select`]; [`spawn_local`] starts a separate task that
//! outlives the handler.
#![doc(test(attr(deny(warnings))))]
// docs.rs (`--cfg docsrs`, nightly) marks each item that needs a feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(not(target_os = "linux"))]
compile_error!("percore runs on Linux only: it is built on io_uring and epoll");

mod backend;
pub mod buf;
mod core;
mod current;
mod driver;
mod executor;
pub mod fs;
pub mod future;
mod handler;
mod histogram;
mod main_error;
pub mod net;
mod op;
pub mod runtime;
mod server;
mod slab;
mod stats;
#[cfg(loom)]
pub mod sync;
#[cfg(not(loom))]
mod sync;
mod sys;
pub mod time;
pub mod tls;
mod unwind;

pub use backend::{Backend, ParseBackendError};
pub use executor::budget::unconstrained;
pub use executor::{JoinError, JoinHandle};
pub use handler::{Connection, DatagramHandler, Handler, MovedState};
pub use main_error::MainError;
pub use runtime::{
    block_on, core_count, core_index, core_stats, count_requests, current_backend, drain_deadline,
    is_shutting_down, log_to_stderr, move_connection, move_wanted, on_give_back, queue_delay,
    shutdown_signal, spawn_blocking, spawn_local, submit_to, track_queue_delay, until_stopped,
    waited, Blocking, CoreContext, ListenerStats, MoveMeter, MoveOutcome, MovePolicy, MoveRefusal,
    Readiness, Server, ServerBuilder, ServerHandle, ShutdownSignal, StatsReader, StatsSnapshot,
    Steering, SteeringStats, Stopper, SubmitError,
};
