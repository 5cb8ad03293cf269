//! Choosing the backend once, before any core starts.
//!
//! `PERCORE_BACKEND=uring|epoll|auto` overrides what the program asked for.
//! `Auto` builds a ring of the real size with the real flags (the same as a
//! core will) and decides by the error's cause: `EPERM`/`EACCES` (seccomp,
//! `kernel.io_uring_disabled`), `ENOSYS` (no io_uring in this kernel),
//! `EINVAL` (flags or sizes this kernel rejects) and `ENOMEM` fall back to
//! epoll for the whole server, logged once with the reason.

use std::io;

use crate::core::config::CoreConfig;
use crate::driver::uring::fault;
use crate::Backend;

fn reason(errno: Option<i32>) -> &'static str {
    match errno {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            "denied (seccomp filter or kernel.io_uring_disabled)"
        }
        Some(libc::ENOSYS) => "not supported by this kernel",
        Some(libc::EINVAL) => "set-up parameters rejected by this kernel",
        Some(libc::ENOMEM) => "out of memory or locked-memory limit (ulimit -l)",
        _ => "unavailable",
    }
}

/// The backend requested by the environment, if any (unset or empty:
/// none).
///
/// # Errors
///
/// A value that names no backend: refused like a bad flag rather than
/// ignored, since an operator who set it expects it to hold.
fn env_override() -> io::Result<Option<Backend>> {
    let value = std::env::var("PERCORE_BACKEND").unwrap_or_default();
    if value.is_empty() {
        return Ok(None);
    }
    value.parse().map(Some).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("PERCORE_BACKEND={value:?}: {e}"),
        )
    })
}

/// Resolves `requested` (after the environment override) to `Uring` or
/// `Epoll`.
///
/// # Errors
///
/// A `PERCORE_BACKEND` that names no backend, and an explicit `Uring`
/// whose ring cannot be set up: the error names the cause and the way out.
pub(crate) fn resolve(requested: Backend, config: &CoreConfig) -> io::Result<Backend> {
    let requested = match env_override()? {
        Some(forced) => {
            if forced != requested {
                tracing::info!(
                    "PERCORE_BACKEND={forced} overrides the {requested} backend asked for"
                );
            }
            forced
        }
        None => requested,
    };
    match requested {
        Backend::Epoll => Ok(Backend::Epoll),
        Backend::Uring => match probe(config) {
            Ok(()) => Ok(Backend::Uring),
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!(
                    "io_uring backend requested but io_uring_setup failed: {e} — io_uring is {}; \
                     ask for Backend::Epoll or Backend::Auto (the example servers: --backend \
                     epoll|auto), or set PERCORE_BACKEND=auto",
                    reason(e.raw_os_error())
                ),
            )),
        },
        Backend::Auto => match probe(config) {
            Ok(()) => Ok(Backend::Uring),
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "io_uring {}: falling back to the epoll backend",
                    reason(e.raw_os_error())
                );
                Ok(Backend::Epoll)
            }
        },
    }
}

/// Builds and drops a ring of the real size.
///
/// On a thread of its own: the kernel's deferred clean-up of a torn-down
/// ring can interrupt one later blocking syscall of the thread that made it
/// with `EINTR`, and the caller's thread (an application's main thread, a
/// test) should not inherit that.
fn probe(config: &CoreConfig) -> io::Result<()> {
    if let Some(e) = fault::setup_error() {
        return Err(e);
    }
    let entries = config.ring.entries;
    let cq_entries = config.ring.cq_entries.max(entries * 2);
    std::thread::Builder::new()
        .name("percore-probe".into())
        .spawn(move || {
            let mut builder =
                io_uring::IoUring::<io_uring::squeue::Entry, io_uring::cqueue::Entry>::builder();
            builder.setup_cqsize(cq_entries);
            builder.build(entries).map(drop)
        })?
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the io_uring probe thread panicked")))
}
