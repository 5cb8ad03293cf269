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
use std::pin::Pin;
use std::task::{Context, Poll};

use io_uring::squeue;

use super::lifecycle::{Op, OpAble, Sqe};
use crate::driver::current::Io;
use crate::driver::epoll::{self, SourceKey};
use crate::driver::uring::{self, Cqe, OpKind, Retained};

/// One submitted operation; resolves to the completion's result and the
/// data it kept alive.
///
/// `!Send`: its key names a slot of the driver of the core that submitted
/// it, and only that core may collect or release it.
pub(crate) struct Submit<T: 'static>(Op<'static, Owned<T>>);

/// A file operation's SQE and what it points into.
pub(crate) struct Owned<T: 'static> {
    data: Option<T>,
    sqe: Option<squeue::Entry>,
    kind: OpKind,
}

// `data` is never pinned: the kernel sees only the heap memory it owns.
impl<T: 'static> Unpin for Owned<T> {}

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
        Submit(Op::on_file(Owned {
            data: Some(data),
            sqe: Some(sqe),
            kind,
        }))
    }
}

// SAFETY: `Submit::new`'s contract: the SQE points into `data`'s heap
// memory, which `dropped_in_flight` hands to the slot whole, and names an
// fd that `data` keeps open (or the kernel takes over).
unsafe impl<T: 'static> OpAble for Owned<T> {
    type Output = i32;

    fn uring_sqe(&mut self, _core: &Io, _d: &uring::Driver) -> Sqe {
        let Some(entry) = self.sqe.take() else {
            panic!("Submit polled after completion")
        };
        Sqe {
            entry,
            kind: self.kind,
            retained: Retained::None,
        }
    }

    fn uring_done(&mut self, cqe: Cqe, _retained: Retained) -> Option<io::Result<i32>> {
        Some(if cqe.res < 0 {
            Err(io::Error::from_raw_os_error(-cqe.res))
        } else {
            Ok(cqe.res)
        })
    }

    fn poll_epoll(
        &mut self,
        _core: &Io,
        _d: &mut epoll::Driver,
        _source: SourceKey,
        _cx: &mut Context<'_>,
    ) -> Poll<io::Result<i32>> {
        unreachable!("a file operation has no socket to wait for")
    }

    fn dropped_in_flight(&mut self) -> Retained {
        match self.data.take() {
            Some(data) => Retained::Owned(Box::new(data)),
            None => Retained::None,
        }
    }
}

impl<T: 'static> Future for Submit<T> {
    type Output = (io::Result<i32>, T);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let op = &mut self.get_mut().0;
        let res = std::task::ready!(op.poll(cx));
        let Some(data) = op.data_mut().data.take() else {
            panic!("Submit polled after completion")
        };
        Poll::Ready((res, data))
    }
}
