//! Which backends a test can run on here, one test at a time.

use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use percore::Backend;

/// Held exclusively by a test that reads process-wide state (fds, RSS,
/// CPU time, allocations), shared by the tests that read none: those run
/// alongside each other, never alongside an exclusive one. A test binary
/// holds the tests of many files, so a lock per file would not do.
static LOCK: RwLock<()> = RwLock::new(());

/// This test alone in its test binary (see the module docs). Not to be
/// taken again by a test that holds it, or [`shared`]: it would wait for
/// itself.
pub fn serial() -> RwLockWriteGuard<'static, ()> {
    // A failed test poisons the lock; the next test still runs.
    LOCK.write().unwrap_or_else(|e| e.into_inner())
}

/// Alongside the other [`shared`] tests, never beside a [`serial`] one.
pub fn shared() -> RwLockReadGuard<'static, ()> {
    LOCK.read().unwrap_or_else(|e| e.into_inner())
}

/// `Some(backend)` when the test can run on `backend` here; otherwise
/// prints `skipped: <reason>` and returns `None`.
pub fn require(backend: Backend) -> Option<Backend> {
    if let Ok(forced) = std::env::var("PERCORE_BACKEND") {
        if forced.parse::<Backend>().ok() != Some(backend) {
            println!("skipped: PERCORE_BACKEND={forced} overrides the {backend} backend");
            return None;
        }
    }
    if backend == Backend::Uring {
        if let Some(reason) = uring_unavailable() {
            println!("skipped: io_uring unavailable: {reason}");
            return None;
        }
    }
    Some(backend)
}

/// Why io_uring cannot be used in this process, if it cannot: a
/// `block_on` core is built with the real ring the servers use.
///
/// The probe runs on a thread of its own: after a thread's ring is torn
/// down, the kernel's deferred clean-up can interrupt one later blocking
/// syscall of that thread with `EINTR`, which would surprise a test's
/// blocking client reads.
pub fn uring_unavailable() -> Option<String> {
    static REASON: OnceLock<Option<String>> = OnceLock::new();
    REASON
        .get_or_init(|| {
            std::thread::spawn(|| {
                match percore::block_on(Backend::Uring, async { percore::current_backend() }) {
                    Ok(Backend::Uring) => None,
                    Ok(other) => Some(format!("the runtime chose {other}")),
                    Err(e) => Some(e.to_string()),
                }
            })
            .join()
            .unwrap_or_else(|_| Some("the io_uring probe panicked".to_owned()))
        })
        .clone()
}
