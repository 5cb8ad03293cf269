//! [`labeled`]: runs a future under a [`StallLabel`], so that a stall while
//! it is polled names it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::core::context;
use crate::core::watch::StallLabel;

/// Runs `future` under `label`: while the core polls it, a stall report
/// names the label (`label="GET /users/{id}"`) beside its backtrace. The
/// label is set on each poll and the one before put back after it, so
/// other tasks polled between are not named by it. It costs two relaxed
/// stores a poll. Outside a core it does nothing.
///
/// percore-handlers' router labels each route's handler so.
pub fn labeled<F: Future>(label: StallLabel, future: F) -> Labeled<F> {
    Labeled { label, future }
}

pin_project_lite::pin_project! {
    /// The future of [`labeled`].
    #[must_use = "futures do nothing unless polled"]
    pub struct Labeled<F> {
        label: StallLabel,
        #[pin]
        future: F,
    }
}

impl<F: Future> Future for Labeled<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let id = this.label.id();
        let before = context::try_with_core(|core| core.shared.watch.swap_label(id));
        let out = this.future.poll(cx);
        if let Some(before) = before {
            context::try_with_core(|core| core.shared.watch.swap_label(before));
        }
        out
    }
}
