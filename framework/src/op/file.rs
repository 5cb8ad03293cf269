//! File and path operations on io_uring: one SQE, one completion.
//!
//! Unlike a socket's operations, these need no per-file state in the
//! driver: the future owns everything the kernel reads or writes (the
//! buffer, the path, the `statx` record, a reference to the file), and if
//! it is dropped with the operation in flight, all of that moves into the
//! operation's slot and is freed only after the completion. The epoll
//! backend never comes here: it runs files through `fs`'s thread pool.

use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use io_uring::squeue;

use crate::driver::uring::{OpKey, OpKind, Retained};
use crate::driver::{current, Driver};

/// One submitted operation; resolves to the completion's result and the
/// data it kept alive.
///
/// `!Send`: its key names a slot of the driver of the core that submitted
/// it, and only that core may collect or release it.
pub(crate) struct Submit<T: 'static> {
    data: Option<T>,
    sqe: Option<squeue::Entry>,
    kind: OpKind,
    /// The submitting core's id and the operation's slot, once pushed.
    key: Option<(usize, OpKey)>,
    _local: PhantomData<Rc<()>>,
}

impl<T: 'static> Submit<T> {
    /// An operation to push at the first poll.
    ///
    /// # Safety
    ///
    /// - every pointer in `sqe` points into memory owned by `data` that
    ///   stays where it is when `data` moves (heap memory), for as long as
    ///   `data` lives;
    /// - the fd `sqe` names, if any, stays open until `data` is dropped
    ///   (`data` holds a reference to it), or is one the kernel takes over
    ///   (a close).
    pub(crate) unsafe fn new(data: T, sqe: squeue::Entry, kind: OpKind) -> Self {
        Submit {
            data: Some(data),
            sqe: Some(sqe),
            kind,
            key: None,
            _local: PhantomData,
        }
    }
}

// `data` is never pinned: the kernel sees only the heap memory it owns.
impl<T: 'static> Unpin for Submit<T> {}

impl<T: 'static> Future for Submit<T> {
    type Output = (io::Result<i32>, T);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // No field is pinned: the SQE's pointers go into `data`'s heap.
        let this = self.get_mut();
        if this.key.is_none() && crate::executor::budget::poll_proceed(cx).is_pending() {
            return Poll::Pending;
        }
        let result = current::with_io(|core| match &mut *core.driver.borrow_mut() {
            Driver::Uring(d) => {
                let key = match this.key {
                    Some((id, key)) if id == core.id => key,
                    Some(_) => return Poll::Ready(Err(super::foreign_core())),
                    None => {
                        let Some(sqe) = this.sqe.take() else {
                            unreachable!("an unsubmitted operation keeps its SQE")
                        };
                        // SAFETY: `new`'s contract: the SQE points into
                        // `data`, which this future holds until the
                        // completion or hands to the slot in its `Drop`.
                        let key = unsafe { d.push(sqe, this.kind, false, Retained::None) };
                        this.key = Some((core.id, key));
                        key
                    }
                };
                d.poll_op(key, cx).map(|(cqe, _)| {
                    this.key = None;
                    Ok(cqe.res)
                })
            }
            Driver::Epoll(_) => Poll::Ready(Err(io::Error::other(
                "an io_uring file operation polled on an epoll core",
            ))),
        });
        result.map(|res| {
            let Some(data) = this.data.take() else {
                panic!("Submit polled after completion")
            };
            let res = res.and_then(|res| {
                if res < 0 {
                    Err(io::Error::from_raw_os_error(-res))
                } else {
                    Ok(res)
                }
            });
            (res, data)
        })
    }
}

impl<T: 'static> Drop for Submit<T> {
    fn drop(&mut self) {
        let (Some((id, key)), Some(data)) = (self.key.take(), self.data.take()) else {
            return;
        };
        let mut extra = Some(Retained::Owned(Box::new(data)));
        let leftover = current::try_with_io(|core| match &mut *core.driver.borrow_mut() {
            Driver::Uring(d) if core.id == id => {
                d.release(key, extra.take().unwrap_or(Retained::None))
            }
            _ => None,
        });
        // Dropped outside the driver's borrow: it may hold a buffer whose
        // own drop reaches the driver.
        drop(leftover);
        if let Some(extra) = extra {
            tracing::error!(
                "a file operation's future was dropped away from its core; its buffer is leaked"
            );
            std::mem::forget(extra);
        }
    }
}
