//! [`Compat`]: a future that may use tokio resources, polled on a percore
//! core with tokio's runtime context entered.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use crate::runtime::handle;

pin_project! {
    /// Runs a future that needs tokio's reactor or timers (a database
    /// driver's query, an HTTP client's request, `tokio::time::sleep`) on
    /// the percore core that polls it.
    ///
    /// Each poll, and the drop, enter the context of the runtime from
    /// [`handle`](crate::handle): the tokio resources the future creates
    /// register there, the runtime's thread watches them, and a readiness
    /// event or an expired timer wakes the percore task from that thread.
    /// Everything else the future does (its percore I/O, its computing)
    /// stays on the core.
    ///
    /// Made by [`compat`](crate::compat) or
    /// [`CompatExt::compat`](crate::CompatExt::compat).
    #[must_use = "futures do nothing unless polled"]
    #[derive(Debug)]
    pub struct Compat<F> {
        #[pin]
        inner: Option<F>,
    }

    impl<F> PinnedDrop for Compat<F> {
        fn drop(this: Pin<&mut Self>) {
            // Some tokio resources find their runtime from the context
            // when they are dropped: dropping inside it keeps them working.
            let _guard = handle().enter();
            this.project().inner.set(None);
        }
    }
}

impl<F> Compat<F> {
    /// Wraps `future`.
    pub fn new(future: F) -> Self {
        Compat {
            inner: Some(future),
        }
    }

    /// The wrapped future, pinned: to call its methods between polls
    /// (hyper's `graceful_shutdown`, say).
    pub fn get_pin_mut(self: Pin<&mut Self>) -> Pin<&mut F> {
        self.project()
            .inner
            .as_pin_mut()
            .expect("the future is only taken by drop")
    }
}

impl<F: Future> Future for Compat<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _guard = handle().enter();
        self.get_pin_mut().poll(cx)
    }
}

/// Wraps `future` in a [`Compat`].
pub fn compat<F: Future>(future: F) -> Compat<F> {
    Compat::new(future)
}

/// `.compat()` on any future.
pub trait CompatExt: Future + Sized {
    /// Wraps the future in a [`Compat`].
    fn compat(self) -> Compat<Self> {
        Compat::new(self)
    }
}

impl<F: Future> CompatExt for F {}

/// [`percore::spawn_local`] of a future that may use tokio resources: a
/// task of this core, with tokio's context entered whenever it runs. How a
/// tokio-based client's background future (tokio-postgres's `Connection`)
/// is driven from a core.
///
/// # Panics
///
/// Outside a percore core thread.
pub fn spawn_local<F>(future: F) -> percore::JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    percore::spawn_local(Compat::new(future))
}
