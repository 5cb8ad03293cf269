//! Catching a panic in a service's future, so that the client gets a
//! `500` instead of a connection that closes without a word.

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

/// What a panic carried, to be resumed once the answer is out (the
/// executor then counts and logs it as for any handler).
pub(crate) type Panic = Box<dyn Any + Send>;

/// Polls `F` inside `catch_unwind`. Taking the future pinned by the caller
/// (`F` is a `Pin<&mut _>`, which is `Unpin`) keeps this free of `unsafe`.
pub(crate) struct CatchUnwind<F>(pub(crate) F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Panic>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Unwind safety: after a panic the connection only writes an error
        // answer and closes; the service's half-updated state (its request
        // and response) is never read again.
        match catch_unwind(AssertUnwindSafe(|| Pin::new(&mut self.0).poll(cx))) {
            Ok(poll) => poll.map(Ok),
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}
