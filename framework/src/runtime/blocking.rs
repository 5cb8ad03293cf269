//! [`spawn_blocking`]: a blocking call run off the core, its result
//! delivered back through the cross-core reply channel.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::sync::oneshot;

/// Runs `f` on a thread of its own, off the core, and completes with
/// what it returns; the core runs its other tasks meanwhile.
///
/// For the rare call that blocks and has no non-blocking form, such as
/// resolving a host name with [`std::net::ToSocketAddrs`]. Each call
/// starts a new thread: callers that may make many should share their
/// calls (as the HTTP client's per-core name cache does). Dropping the
/// future does not stop the thread; its result is then dropped.
///
/// The future may be polled on any thread: its waker is called from the
/// blocking thread, which reaches a core through its remote wake queue.
///
/// # Errors
///
/// The thread could not be started, or `f` panicked.
///
/// # Examples
///
/// ```no_run
/// use std::net::{SocketAddr, ToSocketAddrs};
///
/// async fn lookup(host: String) -> std::io::Result<Vec<SocketAddr>> {
///     let addrs = percore::spawn_blocking(move || (host.as_str(), 80).to_socket_addrs()).await??;
///     Ok(addrs.collect())
/// }
/// # let _ = lookup;
/// ```
pub fn spawn_blocking<T, F>(f: F) -> Blocking<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let started = std::thread::Builder::new()
        .name("percore-blocking".into())
        .spawn(move || tx.send(f()));
    Blocking {
        state: match started {
            Ok(_) => Ok(rx),
            Err(e) => Err(Some(e)),
        },
    }
}

/// The result of a [`spawn_blocking`] call, to await.
#[derive(Debug)]
#[must_use = "the result is lost unless awaited"]
pub struct Blocking<T> {
    /// The reply channel, or why no thread started (taken when reported).
    state: Result<oneshot::Receiver<T>, Option<io::Error>>,
}

impl<T> Future for Blocking<T> {
    type Output = io::Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        // No field is pinned: the receiver is a shared handle.
        let this = self.get_mut();
        match &mut this.state {
            Ok(rx) => rx.poll_recv(cx).map(|value| {
                // The sender dropped unsent: the thread unwound.
                value.ok_or_else(|| io::Error::other("the blocking call panicked"))
            }),
            Err(e) => Poll::Ready(Err(e
                .take()
                .unwrap_or_else(|| io::Error::other("polled after completion")))),
        }
    }
}
