//! The table of in-flight operations, keyed by `user_data`.
//!
//! A slot is created when an SQE is pushed and removed only after the
//! kernel's final completion for it (a completion without
//! `IORING_CQE_F_MORE`). Everything the kernel may touch — the buffer, the
//! socket address, the fd — is owned by the slot (`Retained`) or by the
//! future that polls it; if that future is dropped first, the slot becomes
//! `Orphaned`, takes ownership of the future's resources, and is cleaned up
//! when the completion arrives. That is what makes dropping a future with an
//! operation in flight safe.

use std::any::Any;
use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::task::Waker;

use crate::sys::RawAddr;

/// The `user_data` of an operation: its slot in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpKey(pub(crate) usize);

/// One completion as the kernel reported it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cqe {
    pub(crate) res: i32,
    pub(crate) flags: u32,
}

/// What an operation does, so an orphaned completion can be cleaned up:
/// an accepted fd closed, a selected buffer given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpKind {
    Accept,
    Recv,
    Send,
    Connect,
}

/// Resources the kernel may still use while the operation is in flight.
/// The fields are never read: holding them is the point.
#[allow(dead_code)]
pub(crate) enum Retained {
    None,
    /// Keeps the socket open until the kernel is done with it.
    Fd(Rc<OwnedFd>),
    /// The address a `connect` reads, and its socket.
    Connect(Rc<OwnedFd>, Box<RawAddr>),
    /// A buffer that belonged to a dropped future (any owned buffer type);
    /// boxed only on that rare path.
    Buffer(Rc<OwnedFd>, Box<dyn Any>),
    /// A pool buffer that a single-shot receive writes into.
    PoolBuf(Rc<OwnedFd>, Box<[u8]>),
}

pub(crate) enum OpState {
    /// Single-shot: waiting for the completion.
    Waiting(Option<Waker>),
    /// Single-shot: completed, not yet collected.
    Done(Cqe),
    /// Multishot: completions queue up until collected. `ended` once a
    /// completion without `F_MORE` arrived.
    Stream {
        queue: VecDeque<Cqe>,
        waker: Option<Waker>,
        ended: bool,
        /// An `AsyncCancel` was submitted for back-pressure; its `ECANCELED`
        /// ending is not an error.
        cancelling: bool,
    },
    /// The owner is gone; clean up each completion until the final one.
    Orphaned,
}

pub(crate) struct Op {
    pub(crate) kind: OpKind,
    pub(crate) state: OpState,
    pub(crate) retained: Retained,
}
