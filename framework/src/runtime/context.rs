//! The current thread's core, for code that runs inside it.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use super::core::Core;
use crate::executor::task::Runnable;

thread_local! {
    static CURRENT: RefCell<Option<Rc<Core>>> = const { RefCell::new(None) };
    static CURRENT_ID: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Makes `core` this thread's core until the guard is dropped.
pub(crate) fn enter(core: Rc<Core>) -> EnterGuard {
    let id = core.shared.id;
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        assert!(
            c.is_none(),
            "a percore core is already running on this thread"
        );
        *c = Some(core);
    });
    CURRENT_ID.with(|c| c.set(id));
    EnterGuard(())
}

pub(crate) struct EnterGuard(());

impl Drop for EnterGuard {
    fn drop(&mut self) {
        CURRENT_ID.with(|c| c.set(usize::MAX));
        let core = CURRENT.with(|c| c.borrow_mut().take());
        drop(core);
    }
}

/// Runs `f` with this thread's core.
///
/// # Panics
///
/// Outside a percore core thread: percore I/O and timers only work on the
/// core that owns them.
pub(crate) fn with_core<R>(f: impl FnOnce(&Core) -> R) -> R {
    CURRENT.with(|c| {
        let c = c.borrow();
        let core = c.as_ref().expect(
            "percore I/O, timers and spawn_local need a percore core thread \
             (inside a Handler, or percore::block_on)",
        );
        f(core)
    })
}

/// Like [`with_core`], but `None` outside a core (or during thread exit),
/// for destructors.
pub(crate) fn try_with_core<R>(f: impl FnOnce(&Core) -> R) -> Option<R> {
    CURRENT
        .try_with(|c| {
            let c = c.try_borrow().ok()?;
            c.as_ref().map(|core| f(core))
        })
        .ok()
        .flatten()
}

/// Queues `task` locally if this thread runs core `owner`; hands it back
/// when the wake must go through the owner's remote queue.
pub(crate) fn schedule_local(
    owner: usize,
    task: Arc<dyn Runnable>,
) -> Result<(), Arc<dyn Runnable>> {
    if CURRENT_ID.try_with(|c| c.get()).unwrap_or(usize::MAX) != owner {
        return Err(task);
    }
    let mut task = Some(task);
    try_with_core(|core| {
        if let Some(task) = task.take() {
            core.executor.schedule(task);
        }
    });
    task.map_or(Ok(()), Err)
}
