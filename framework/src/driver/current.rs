//! The current thread's I/O: its core's driver, and what operations need
//! beside it (the receive pool, the registered write pool, the spaces of
//! gathered sends, the byte counters).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use super::msg_space::MsgSpaces;
use super::pool::HeapPool;
use super::uring::FixedPool;
use super::Driver;
use crate::current::{self, Guard};
use crate::stats::CoreStats;

/// One core's I/O state.
pub(crate) struct Io {
    /// The core's unique id: a socket remembers which core's driver it
    /// belongs to.
    pub(crate) id: usize,
    pub(crate) driver: RefCell<Driver>,
    pub(crate) pool: Rc<HeapPool>,
    pub(crate) fixed: Option<Rc<FixedPool>>,
    /// Message headers and iovec arrays for gathered sends.
    pub(crate) msg_spaces: MsgSpaces,
    pub(crate) stats: Arc<CoreStats>,
}

thread_local! {
    static CURRENT: Cell<*const Io> = const { Cell::new(std::ptr::null()) };
}

/// Makes `io` this thread's I/O until the guard is dropped.
///
/// # Safety
///
/// As [`current::enter`]: `io` outlives the guard, which stays on this
/// thread.
pub(crate) unsafe fn enter(io: &Io) -> Guard<Io> {
    // SAFETY: this function's contract.
    unsafe { current::enter(&CURRENT, io) }
}

/// Runs `f` with this thread's I/O.
///
/// # Panics
///
/// Outside a percore core thread: percore I/O only works on the core that
/// owns it.
#[inline]
pub(crate) fn with_io<R>(f: impl FnOnce(&Io) -> R) -> R {
    current::with(&CURRENT, |io| f(io.expect(current::OUTSIDE)))
}

/// Like [`with_io`], but `None` outside a core (or while it is freed),
/// for destructors.
#[inline]
pub(crate) fn try_with_io<R>(f: impl FnOnce(&Io) -> R) -> Option<R> {
    current::with(&CURRENT, |io| io.map(f))
}
