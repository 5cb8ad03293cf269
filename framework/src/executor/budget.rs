//! Cooperative yielding: a cap on the I/O one task poll may complete.
//!
//! An operation whose I/O is always ready (a client that pipelines without
//! pause, on epoll, where a speculative `recv` keeps succeeding) never
//! returns `Pending` on its own, so its task would keep the core from every
//! other task. Each I/O poll spends one unit; with none left, the operation
//! wakes its task and returns `Pending`, which sends the task to the back
//! of the run queue. The executor refills the budget before every poll.

use std::cell::Cell;
use std::task::{Context, Poll};

/// I/O polls one task poll may make before it must yield.
const TASK_BUDGET: u32 = 128;

thread_local! {
    static BUDGET: Cell<u32> = const { Cell::new(TASK_BUDGET) };
}

/// Refills the budget for the next task poll.
pub(crate) fn reset() {
    BUDGET.with(|b| b.set(TASK_BUDGET));
}

/// Spends one unit; `Pending` (with the task re-woken) when none is left.
pub(crate) fn poll_proceed(cx: &mut Context<'_>) -> Poll<()> {
    BUDGET.with(|b| {
        let left = b.get();
        if left == 0 {
            cx.waker().wake_by_ref();
            Poll::Pending
        } else {
            b.set(left - 1);
            Poll::Ready(())
        }
    })
}

/// Runs `f` with no I/O budget: its I/O polls never yield for lack of one.
/// What the task had left is restored afterwards.
///
/// For a poll that must see a socket's state rather than yield, such as
/// checking, with a single poll, whether an idle pooled connection was
/// closed by its peer: spent budget would answer `Pending` without looking.
/// Not for loops of I/O, which is what the budget is for.
///
/// # Examples
///
/// ```no_run
/// # #[allow(dead_code)]
/// # async fn f(conn: percore::net::TcpStream) -> Option<percore::net::TcpStream> {
/// use std::future::Future;
/// use std::task::{Context, Waker};
///
/// let mut read = std::pin::pin!(conn.read());
/// let mut cx = Context::from_waker(Waker::noop());
/// // Nothing to read, no end of stream: the idle connection may be reused.
/// let quiet = percore::unconstrained(|| read.as_mut().poll(&mut cx).is_pending());
/// drop(read);
/// quiet.then_some(conn)
/// # }
/// ```
pub fn unconstrained<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            BUDGET.with(|b| b.set(self.0));
        }
    }
    let _restore = Restore(BUDGET.with(|b| b.replace(u32::MAX)));
    f()
}
