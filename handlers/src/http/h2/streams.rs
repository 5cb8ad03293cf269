//! [`Streams`]: the streams of one connection being served, as futures
//! of the connection's task.
//!
//! Most streams end in their first poll (a service that answers at once,
//! as most do): such a stream is made in the core's pooled room for its
//! future ([`Pooled`], reused from one stream to the next, so it is
//! neither allocated nor copied in), polled once, and done, with no task
//! of its own. Only a stream that has to wait (for its request body, the
//! client's window, a slow service) goes into a `FuturesUnordered`,
//! which polls it when it is woken.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::stream::{FuturesUnordered, StreamExt};

use crate::http::conn::pooled::Pooled;

/// The streams of one connection.
pub(super) struct Streams<F> {
    waiting: FuturesUnordered<Pooled<F>>,
}

impl<F: Future<Output = ()>> Streams<F> {
    pub(super) fn new() -> Self {
        Self {
            waiting: FuturesUnordered::new(),
        }
    }

    /// Starts serving the stream `make` makes, polling it once at once
    /// with `cx`; one that does not end there waits in the set (which
    /// polls it again with a waker of its own).
    #[inline(always)]
    pub(super) fn start(&mut self, make: impl FnOnce() -> F, cx: &mut Context<'_>) {
        let mut stream = Pooled::with(make);
        if Pin::new(&mut stream).poll(cx).is_pending() {
            self.waiting.push(stream);
        }
    }

    /// Polls the streams that were woken, until none is ready.
    pub(super) fn poll(&mut self, cx: &mut Context<'_>) {
        while let Poll::Ready(Some(())) = self.waiting.poll_next_unpin(cx) {}
    }

    /// Whether no stream is waiting.
    pub(super) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Drops every stream, as when the connection is cut.
    pub(super) fn clear(&mut self) {
        self.waiting.clear();
    }
}
