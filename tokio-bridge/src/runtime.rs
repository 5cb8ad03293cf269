//! The tokio runtime whose reactor and timers serve the tokio resources of
//! every core: one per process, on a thread of its own.
//!
//! A tokio resource (a socket, a timer) registers with the runtime whose
//! context is entered when it is created, and that runtime's thread waits
//! for the kernel's readiness events and for the timers' deadlines. When
//! one fires, the runtime's thread wakes the task that awaits it: a
//! percore task, whose waker queues it on its own core from another
//! thread (the core's remote-wake path). The future itself is only ever
//! polled on its core.

use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle};

/// The runtime every [`Compat`](crate::Compat) enters.
static HANDLE: OnceLock<Handle> = OnceLock::new();

/// The name of the thread that drives the runtime [`handle`] starts.
pub const THREAD_NAME: &str = "percore-tokio";

/// The tokio runtime that drives the tokio resources of percore handlers.
///
/// The first call starts it, unless [`install`] gave one before: a
/// current-thread runtime with I/O and timers enabled, driven by a thread
/// of its own ([`THREAD_NAME`]) for the life of the process. That thread
/// also runs what handlers `tokio::spawn`.
///
/// # Panics
///
/// If the runtime or its thread cannot be created (out of memory or
/// threads, at start).
pub fn handle() -> &'static Handle {
    HANDLE.get_or_init(start)
}

/// Makes `handle` the runtime that [`Compat`](crate::Compat) enters, for a
/// program that already runs tokio (a multi-thread runtime, say) and wants
/// its tokio resources there. Call it before the first [`handle`]; the
/// runtime must stay alive, and driven, as long as handlers use it.
///
/// # Errors
///
/// `handle` back, if a runtime was already in use.
pub fn install(handle: Handle) -> Result<(), Handle> {
    let mut offered = Some(handle);
    HANDLE.get_or_init(|| offered.take().expect("taken only here"));
    match offered {
        None => Ok(()),
        Some(handle) => Err(handle),
    }
}

fn start() -> Handle {
    let runtime = Builder::new_current_thread()
        .enable_all()
        .thread_name(THREAD_NAME)
        .build()
        .expect("percore-tokio: the tokio runtime cannot start (out of memory or fds?)");
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name(THREAD_NAME.into())
        .spawn(move || {
            // A current-thread runtime drives its reactor, its timers and
            // its spawned tasks only while something blocks on it.
            runtime.block_on(std::future::pending::<()>());
        })
        .expect("percore-tokio: the runtime's thread cannot start");
    handle
}
