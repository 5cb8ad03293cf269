//! One lifecycle for every kernel operation.
//!
//! An operation supplies what is its own ([`OpAble`]): its SQE and what
//! its completion means on io_uring, its readiness attempt on epoll, and
//! what the kernel may still touch should its future be dropped. [`Op`]
//! owns the rest, once for all of them:
//! - the task's I/O budget, spent before each submission;
//! - the check that the core polling it is the one that owns it (a
//!   socket's core, or the core that submitted it), and the choice of
//!   the backend;
//! - the completion key while the operation is in flight;
//! - the drop in flight: what the kernel may touch moves into the
//!   operation's slot, kept to the completion; away from the core that
//!   holds the slot it is leaked, never freed under the kernel.
//!
//! A socket's standing operations (its receive, its accept) belong to the
//! socket, not to a future; they pass the same gate, [`poll_socket`] and
//! [`on_core`].

use std::cell::Cell;
use std::io;
use std::marker::PhantomData;
use std::rc::Rc;
use std::task::{Context, Poll};

use io_uring::squeue;

use super::{SocketIo, Standing};
use crate::driver::current::{self, Io};
use crate::driver::epoll::{self, SourceKey};
use crate::driver::uring::{self, Cqe, OpKey, OpKind, Retained};
use crate::driver::Driver;
use crate::executor::budget;

/// What one operation supplies to its [`Op`].
///
/// # Safety
///
/// An implementation promises, of the SQE [`uring_sqe`](Self::uring_sqe)
/// builds:
/// - every pointer in it points into memory the driver owns, into the
///   [`Retained`] returned with it, or into heap memory that `self` owns
///   and that stays in place when `self` moves;
/// - [`dropped_in_flight`](Self::dropped_in_flight) moves all of that
///   memory `self` owns into the [`Retained`] it returns;
/// - the fd it names stays open until the SQE is submitted: the
///   [`Retained`]s keep it, or it is a socket's, which
///   [`deregister`](super::deregister) keeps open that long.
pub(crate) unsafe trait OpAble {
    /// What the operation yields: a count, nothing, a raw result.
    type Output;

    /// io_uring: the SQE to push, and what its slot keeps from the start.
    /// `core`'s driver is borrowed (it is `d`); the rest of `core` is free.
    fn uring_sqe(&mut self, core: &Io, d: &uring::Driver) -> Sqe;

    /// io_uring: what the completion means; `None` to go again (a wait
    /// for readiness that came).
    fn uring_done(&mut self, cqe: Cqe, retained: Retained) -> Option<io::Result<Self::Output>>;

    /// io_uring: an attempt before each submission, for an operation the
    /// ring only waits for; `None` to submit.
    fn uring_try(&mut self) -> Option<io::Result<Self::Output>> {
        None
    }

    /// epoll: waits for the socket's readiness and makes the call.
    fn poll_epoll(
        &mut self,
        core: &Io,
        d: &mut epoll::Driver,
        source: SourceKey,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<Self::Output>>;

    /// What the slot must keep when the future is dropped in flight.
    fn dropped_in_flight(&mut self) -> Retained;

    /// The bytes a result sent, for the core's counter.
    fn bytes_out(_out: &Self::Output) -> Option<u64> {
        None
    }
}

/// An operation's SQE and what its slot keeps from the start.
pub(crate) struct Sqe {
    pub(crate) entry: squeue::Entry,
    pub(crate) kind: OpKind,
    pub(crate) retained: Retained,
}

/// One operation, polled to completion as often as it is resubmitted.
///
/// `!Send`: its key names a slot of one core's driver, and only that core
/// may collect or release it.
pub(crate) struct Op<'a, T: OpAble> {
    /// The socket, whose core alone may run the operation; `None` for a
    /// file operation, which the io_uring core that submits it runs.
    socket: Option<&'a SocketIo>,
    /// While in flight: the submitting core's id and the slot.
    key: Option<(usize, OpKey)>,
    data: T,
    _local: PhantomData<Rc<()>>,
}

impl<'a, T: OpAble> Op<'a, T> {
    /// An operation on `socket`.
    pub(crate) fn on_socket(socket: &'a SocketIo, data: T) -> Self {
        Op {
            socket: Some(socket),
            key: None,
            data,
            _local: PhantomData,
        }
    }

    /// A file or path operation: io_uring only (epoll runs those on its
    /// pool).
    pub(crate) fn on_file(data: T) -> Self {
        Op {
            socket: None,
            key: None,
            data,
            _local: PhantomData,
        }
    }

    pub(crate) fn data(&self) -> &T {
        &self.data
    }

    /// The operation's own state; what the kernel may touch must not be
    /// taken while [`in_flight`](Self::in_flight).
    pub(crate) fn data_mut(&mut self) -> &mut T {
        &mut self.data
    }

    pub(crate) fn in_flight(&self) -> bool {
        self.key.is_some()
    }

    /// Polls the operation, submitting it first if it is not in flight.
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T::Output>> {
        if self.key.is_none() && budget::poll_proceed(cx).is_pending() {
            return Poll::Pending;
        }
        current::with_io(|core| {
            let result = match (&mut *core.driver.borrow_mut(), self.socket) {
                (_, Some(io)) if !io.belongs_to(core) => Poll::Ready(Err(super::foreign_core())),
                (Driver::Uring(d), Some(SocketIo::Uring { .. })) => self.poll_uring(core, d, cx),
                (Driver::Epoll(d), Some(SocketIo::Epoll { source, .. })) => {
                    self.data.poll_epoll(core, d, *source, cx)
                }
                (Driver::Uring(d), None) => match self.key {
                    Some((id, _)) if id != core.id => Poll::Ready(Err(super::foreign_core())),
                    _ => self.poll_uring(core, d, cx),
                },
                (Driver::Epoll(_), None) => Poll::Ready(Err(io::Error::other(
                    "an io_uring file operation polled on an epoll core",
                ))),
                _ => Poll::Ready(Err(other_backend())),
            };
            if let Poll::Ready(Ok(out)) = &result {
                if let Some(n) = T::bytes_out(out) {
                    core.stats.bytes_out.add(n);
                }
            }
            result
        })
    }

    fn poll_uring(
        &mut self,
        core: &Io,
        d: &mut uring::Driver,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T::Output>> {
        loop {
            let key = match self.key {
                Some((_, key)) => key,
                None => {
                    if let Some(res) = self.data.uring_try() {
                        return Poll::Ready(res);
                    }
                    let sqe = self.data.uring_sqe(core, d);
                    // By `OpAble`'s contract the SQE points into the driver,
                    // into `sqe.retained` (the slot's from now on), or into
                    // `self.data`'s heap memory, which this `Op` holds to the
                    // completion or hands to the slot in its `Drop`.
                    // SAFETY: that memory and the fd outlive the operation.
                    let key = unsafe { d.push(sqe.entry, sqe.kind, false, sqe.retained) };
                    self.key = Some((core.id, key));
                    key
                }
            };
            let (cqe, retained) = std::task::ready!(d.poll_op(key, cx));
            self.key = None;
            if let Some(res) = self.data.uring_done(cqe, retained) {
                return Poll::Ready(res);
            }
        }
    }
}

impl<T: OpAble> Drop for Op<'_, T> {
    fn drop(&mut self) {
        if let Some((id, key)) = self.key.take() {
            let extra = self.data.dropped_in_flight();
            hand_over(id, key, extra);
        }
    }
}

/// Hands a dropped future's operation to its slot on core `id`, with
/// `extra` (what the kernel may still read or write), kept to the
/// completion. Should the slot be out of reach (the core is gone, or
/// this is another core), `extra` is leaked: the kernel may still use
/// it, so it must never be freed.
fn hand_over(id: usize, key: OpKey, extra: Retained) {
    let mut extra = Some(extra);
    let leftover = current::try_with_io(|core| match &mut *core.driver.borrow_mut() {
        Driver::Uring(d) if core.id == id => d.release(key, extra.take().unwrap_or(Retained::None)),
        _ => None,
    });
    // Dropped outside the driver's borrow: it may hold a buffer whose own
    // drop reaches the driver.
    drop(leftover);
    if let Some(extra) = extra {
        if !matches!(extra, Retained::None) {
            tracing::error!(
                "an operation's future was dropped away from its core; its buffer is leaked"
            );
            std::mem::forget(extra);
        }
    }
}

/// A core's driver, paired with a socket's state for the same backend.
pub(crate) enum Side<'a> {
    Uring {
        d: &'a mut uring::Driver,
        standing: &'a Cell<Standing>,
        pool_reads: &'a Cell<bool>,
    },
    Epoll {
        d: &'a mut epoll::Driver,
        source: SourceKey,
    },
}

/// Pairs `driver` with `io`: the error of a socket away from its core
/// (or, which cannot be on its core, of the other backend) otherwise.
fn pair<'a>(core: &Io, driver: &'a mut Driver, io: &'a SocketIo) -> io::Result<Side<'a>> {
    if !io.belongs_to(core) {
        return Err(super::foreign_core());
    }
    match (driver, io) {
        (
            Driver::Uring(d),
            SocketIo::Uring {
                standing,
                pool_reads,
                ..
            },
        ) => Ok(Side::Uring {
            d,
            standing,
            pool_reads,
        }),
        (Driver::Epoll(d), SocketIo::Epoll { source, .. }) => {
            Ok(Side::Epoll { d, source: *source })
        }
        _ => Err(other_backend()),
    }
}

/// Runs `f` with this core's I/O and its driver paired with `io`; the
/// error of a socket used away from its core instead.
///
/// # Panics
///
/// Outside a percore core.
pub(crate) fn on_core<R>(io: &SocketIo, f: impl FnOnce(&Io, Side<'_>) -> R) -> io::Result<R> {
    current::with_io(|core| {
        let mut driver = core.driver.borrow_mut();
        pair(core, &mut driver, io).map(|side| f(core, side))
    })
}

/// [`on_core`] for destructors: `None` outside a core, or away from the
/// socket's.
pub(crate) fn try_on_core<R>(io: &SocketIo, f: impl FnOnce(Side<'_>) -> R) -> Option<R> {
    current::try_with_io(|core| {
        let mut driver = core.driver.borrow_mut();
        pair(core, &mut driver, io).ok().map(f)
    })
    .flatten()
}

/// The gate of a socket's standing operation: the task's budget, then
/// [`on_core`].
pub(crate) fn poll_socket<T>(
    io: &SocketIo,
    cx: &mut Context<'_>,
    f: impl FnOnce(&Io, Side<'_>, &mut Context<'_>) -> Poll<io::Result<T>>,
) -> Poll<io::Result<T>> {
    if budget::poll_proceed(cx).is_pending() {
        return Poll::Pending;
    }
    on_core(io, |core, side| f(core, side, cx)).unwrap_or_else(|e| Poll::Ready(Err(e)))
}

fn other_backend() -> io::Error {
    io::Error::other("socket used on a core of another backend")
}
