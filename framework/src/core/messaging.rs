//! Running code on another core of the same server.
//!
//! [`submit_to`] sends a closure to a peer core's bounded mailbox (waiting
//! for room when it is full), the peer runs it as a task at its next loop
//! turn, and the result comes back through a one-shot channel. The mailbox
//! and the wake-up of the peer go through the same inbox-and-parker path as
//! remote task wakes, which the loom models check.

use std::fmt;
use std::future::{poll_fn, Future};
use std::task::Poll;

use super::context;
use super::shared::Message;
use crate::sync::{oneshot, PushError};

/// Why a cross-core call produced no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubmitError {
    /// No core with that index in this server.
    NoSuchCore,
    /// The target core stopped (or the call panicked) before it answered.
    NoReply,
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SubmitError::NoSuchCore => "no core with that index",
            SubmitError::NoReply => {
                "the target core stopped or the call panicked before it answered"
            }
        })
    }
}

impl std::error::Error for SubmitError {}

/// Runs `f` on core `core` (an index, `0..core_count()`) and returns what
/// the future it makes resolves to.
///
/// `f` crosses threads (it must be `Send`); the future it returns runs on
/// the target core and need not be. Each core's mailbox holds 1,024
/// calls; when the target's is full the caller waits for room: senders
/// slow down rather than queues growing.
///
/// `f` runs outside any handler: the state it reaches on the target core
/// is that core thread's own, so keep state that other cores ask for in a
/// `thread_local!` (each core is a thread of its own), as the `counter`
/// example does, rather than in the handler.
///
/// At a stop, a core whose own connections are done stays, answering
/// calls, until every core of the server has drained (or its drain
/// deadline passes), so connections still draining elsewhere get their
/// answers.
///
/// # Errors
///
/// [`SubmitError::NoSuchCore`] for a bad index; [`SubmitError::NoReply`] if
/// the target stopped before running `f` (after the stop's drain deadline,
/// or a core that failed) or the call panicked.
///
/// # Panics
///
/// Outside a percore core thread.
pub async fn submit_to<F, Fut, T>(core: usize, f: F) -> Result<T, SubmitError>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + 'static,
    T: Send + 'static,
{
    let target = context::with_core(|c| c.shared.peer(core)).ok_or(SubmitError::NoSuchCore)?;
    let (tx, rx) = oneshot::channel();
    // `f` is called in the task, not before: a future made outside and
    // awaited inside would be held twice (rustc keeps the captured one
    // beside the awaited one).
    let message: Message = Box::new(move || {
        drop(crate::executor::current::with_executor(|executor| {
            executor.spawn(async move { tx.send(f().await) })
        }));
    });
    let mut pending = Some(message);
    poll_fn(|cx| {
        let Some(message) = pending.take() else {
            return Poll::Ready(Err(SubmitError::NoReply));
        };
        match target.side().send(message, Some(cx.waker())) {
            Ok(()) => Poll::Ready(Ok(())),
            Err(PushError::Full(message)) => {
                pending = Some(message);
                Poll::Pending
            }
            Err(PushError::Closed(_)) => Poll::Ready(Err(SubmitError::NoReply)),
        }
    })
    .await?;
    poll_fn(|cx| rx.poll_recv(cx))
        .await
        .ok_or(SubmitError::NoReply)
}

/// This core's index in its server (0 for a `block_on` core).
///
/// # Panics
///
/// Outside a percore core thread.
pub fn core_index() -> usize {
    context::with_core(|c| c.shared.index())
}

/// How many cores the current server runs (1 for a `block_on` core).
///
/// # Panics
///
/// Outside a percore core thread.
pub fn core_count() -> usize {
    context::with_core(|c| c.shared.peer_count())
}
