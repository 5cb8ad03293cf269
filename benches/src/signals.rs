//! How the server binaries (`tokio_baseline`, `axum_api`) wait for the
//! signal that stops them: SIGINT and SIGTERM are blocked in every thread
//! and taken by `sigwait` on the main thread, so that the runtimes'
//! threads never see them and the server stops gracefully instead.

/// SIGINT and SIGTERM, blocked; see [`block_stop_signals`].
#[derive(Clone, Copy)]
pub struct StopSignals(libc::sigset_t);

impl std::fmt::Debug for StopSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopSignals(SIGINT, SIGTERM)")
    }
}

/// Blocks SIGINT and SIGTERM in the calling thread, and so in every thread
/// it starts afterwards: call it first thing in `main`.
pub fn block_stop_signals() -> StopSignals {
    // SAFETY: sigset_t is plain data, initialised by sigemptyset before use;
    // pthread_sigmask only reads the set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        StopSignals(set)
    }
}

impl StopSignals {
    /// Waits until SIGINT or SIGTERM arrives.
    pub fn wait(&self) {
        let mut sig = 0;
        // SAFETY: the set was initialised by `block_stop_signals`; `sig`
        // outlives the call.
        unsafe { libc::sigwait(&self.0, &mut sig) };
    }
}
