//! The handle through which a spawned task's output comes back.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use super::task::TaskKey;

/// Why a task produced no output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum JoinError {
    /// The task panicked; the panic was caught and counted by its core.
    Panicked,
    /// The core shut down before the task finished.
    Cancelled,
    /// [`JoinHandle::abort`] dropped the task before it finished.
    Aborted,
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked => f.write_str("task panicked"),
            JoinError::Cancelled => f.write_str("task cancelled by core shutdown"),
            JoinError::Aborted => f.write_str("task aborted"),
        }
    }
}

impl std::error::Error for JoinError {}

pub(crate) enum Slot<T> {
    Running(Option<Waker>),
    Done(Result<T, JoinError>),
    Taken,
}

pub(crate) type Shared<T> = Rc<RefCell<Slot<T>>>;

pub(crate) fn finish<T>(shared: &Shared<T>, result: Result<T, JoinError>) {
    let previous = std::mem::replace(&mut *shared.borrow_mut(), Slot::Done(result));
    if let Slot::Running(Some(waker)) = previous {
        waker.wake();
    }
}

/// Awaits the output of a task started with [`spawn_local`](crate::spawn_local).
///
/// Dropping the handle detaches the task: it keeps running to completion.
/// [`abort`](Self::abort) ends it early.
pub struct JoinHandle<T> {
    pub(crate) shared: Shared<T>,
    pub(crate) key: TaskKey,
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = self.shared.borrow_mut();
        match &mut *slot {
            Slot::Running(waker) => {
                match waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            Slot::Done(_) => match std::mem::replace(&mut *slot, Slot::Taken) {
                Slot::Done(result) => Poll::Ready(result),
                _ => unreachable!("matched Done above"),
            },
            Slot::Taken => panic!("JoinHandle polled after it returned Ready"),
        }
    }
}

impl<T> JoinHandle<T> {
    /// Takes the output if the task has finished (for the core's root task,
    /// which is not polled as a future).
    pub(crate) fn try_take(&self) -> Option<Result<T, JoinError>> {
        let mut slot = self.shared.borrow_mut();
        match std::mem::replace(&mut *slot, Slot::Taken) {
            Slot::Done(result) => Some(result),
            other => {
                *slot = other;
                None
            }
        }
    }

    /// Ends the task now, if it has not finished: its future is dropped
    /// (which cancels its I/O, as dropping any percore future does), and
    /// awaiting the handle gives [`JoinError::Aborted`] (or
    /// [`JoinError::Panicked`] if a destructor of the future panics). A
    /// task that already finished keeps its output. A task aborting itself
    /// through its own handle runs on to its next await, unless it
    /// finishes first; it is dropped when the core comes back to it, after
    /// the tasks already queued, and is not finished until then.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # #[allow(dead_code)]
    /// # async fn f() {
    /// use std::time::Duration;
    /// use percore::{spawn_local, JoinError};
    ///
    /// let ticker = spawn_local(async {
    ///     loop {
    ///         percore::time::sleep(Duration::from_secs(1)).await;
    ///     }
    /// });
    /// ticker.abort();
    /// assert_eq!(ticker.await, Err(JoinError::Aborted));
    /// # }
    /// ```
    pub fn abort(&self) {
        if self.is_finished() {
            return;
        }
        super::current::try_with_executor(|executor| executor.abort(self.key));
    }

    /// Whether the task has finished (its output is ready to take).
    pub fn is_finished(&self) -> bool {
        !matches!(&*self.shared.borrow(), Slot::Running(_))
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}
