//! [`Streams`]: the streams of one connection being served, as futures
//! of the connection's task.
//!
//! Most streams end in their first poll (a service that answers at once,
//! as most do): such a stream is served in a slot kept from one stream to
//! the next, and costs no allocation and no task of its own. Only a stream
//! that has to wait (for its request body, the client's window, a slow
//! service) takes its slot into a `FuturesUnordered`, which polls it when
//! it is woken.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::stream::{FuturesUnordered, StreamExt};

/// A stream's future, pinned in a box that outlives it: the slot is
/// reused once the future has ended.
type Room<F> = Pin<Box<Option<F>>>;

/// The streams of one connection.
pub(super) struct Streams<F> {
    waiting: FuturesUnordered<Slot<F>>,
    /// The slot of the last stream that ended in its first poll.
    spare: Option<Room<F>>,
}

impl<F: Future<Output = ()>> Streams<F> {
    pub(super) fn new() -> Self {
        Self {
            waiting: FuturesUnordered::new(),
            spare: None,
        }
    }

    /// Starts serving `stream`, polling it once at once with `cx`; one
    /// that does not end there waits in the set (which polls it again
    /// with a waker of its own).
    pub(super) fn start(&mut self, stream: F, cx: &mut Context<'_>) {
        let mut room = self.spare.take().unwrap_or_else(|| Box::pin(None));
        room.set(Some(stream));
        let ended = match room.as_mut().as_pin_mut() {
            Some(stream) => stream.poll(cx).is_ready(),
            None => true,
        };
        if ended {
            room.set(None);
            self.spare = Some(room);
        } else {
            self.waiting.push(Slot(room));
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

/// A waiting stream in its room.
struct Slot<F>(Room<F>);

impl<F: Future<Output = ()>> Future for Slot<F> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.0.as_mut().as_pin_mut() {
            Some(stream) => stream.poll(cx),
            None => Poll::Ready(()),
        }
    }
}
