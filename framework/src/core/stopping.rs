//! [`shutdown_signal`]: a task's view of its server's graceful stop.
//! Here, below the server, so that the server's own accept loops wait on
//! it too; [`runtime`](crate::runtime) re-exports it.

use std::future::Future;
use std::task::Poll;

use super::context;

/// Completes when the server this core belongs to begins its graceful stop
/// (at once if it already has). Handlers use it to finish keep-alive
/// connections early. Cheap to create and drop per connection.
///
/// Without it, a connection waiting for its client's next bytes holds the
/// stop until the drain deadline cancels it; [`until_stopped`](crate::runtime::until_stopped) ends such a
/// wait at the stop.
///
/// # Panics
///
/// When polled outside a percore core thread.
pub fn shutdown_signal() -> ShutdownSignal {
    ShutdownSignal { key: None }
}

/// The future of [`shutdown_signal`].
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct ShutdownSignal {
    key: Option<usize>,
}

impl Future for ShutdownSignal {
    type Output = ();

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<()> {
        let this = &mut *self;
        if context::with_core(|core| core.poll_shutdown(&mut this.key, cx.waker())) {
            if let Some(key) = this.key.take() {
                context::try_with_core(|core| core.drop_shutdown_waiter(key));
            }
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Drop for ShutdownSignal {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            context::try_with_core(|core| core.drop_shutdown_waiter(key));
        }
    }
}
