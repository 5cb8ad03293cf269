//! The single-threaded task executor of one core.
//!
//! Tasks are `!Send` futures kept in a slab; the run queue holds keys.
//! A task is polled with its own waker (see [`task`]); a panic inside a poll
//! is caught, counted, and ends only that task: one bad connection must not
//! take down the other connections of its core.

pub(crate) mod budget;
pub(crate) mod current;
mod join;
pub(crate) mod owner;
pub(crate) mod task;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;

pub use join::{JoinError, JoinHandle};
use task::{Runnable, Task, TaskKey};

use crate::slab::Slab;
use owner::Owner;

struct TaskSlot {
    task: Arc<dyn Runnable>,
    /// Reports the task's end without output to its join handle.
    cancel: Box<dyn Fn(JoinError)>,
}

pub(crate) struct Executor {
    /// The core this executor runs, as its tasks' wakers see it.
    pub(crate) owner: Arc<Owner>,
    tasks: RefCell<Slab<TaskSlot>>,
    queue: RefCell<VecDeque<Arc<dyn Runnable>>>,
    next_generation: std::cell::Cell<u32>,
    panics: std::cell::Cell<u64>,
}

/// How many tasks one loop turn polls before it goes back to the driver, so
/// that I/O completions and timers are not starved by busy tasks.
const POLL_BUDGET: usize = 256;

impl Executor {
    pub(crate) fn new(owner: Arc<Owner>) -> Self {
        Executor {
            owner,
            tasks: RefCell::new(Slab::with_capacity(1024)),
            queue: RefCell::new(VecDeque::with_capacity(1024)),
            next_generation: std::cell::Cell::new(0),
            panics: std::cell::Cell::new(0),
        }
    }

    pub(crate) fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let shared: join::Shared<F::Output> = Rc::new(RefCell::new(join::Slot::Running(None)));
        let on_cancel = shared.clone();
        let cancel = Box::new(move |why: JoinError| {
            if matches!(&*on_cancel.borrow(), join::Slot::Running(_)) {
                join::finish(&on_cancel, Err(why));
            }
        });
        let key = self.insert(Some(shared.clone()), cancel, future);
        JoinHandle { shared, key }
    }

    /// Spawns a task whose output nobody awaits (a connection's): no join
    /// slot, no cancel report, so nothing but the task is allocated.
    pub(crate) fn spawn_detached<F>(&self, future: F)
    where
        F: Future<Output = ()> + 'static,
    {
        // A closure that captures nothing: boxing it allocates nothing.
        self.insert(None, Box::new(|_| {}), future);
    }

    fn insert<F>(
        &self,
        output: Option<join::Shared<F::Output>>,
        cancel: Box<dyn Fn(JoinError)>,
        future: F,
    ) -> TaskKey
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let mut tasks = self.tasks.borrow_mut();
        let generation = self.next_generation.get().wrapping_add(1);
        self.next_generation.set(generation);
        let key = TaskKey {
            index: tasks.vacant_key() as u32,
            generation,
        };
        let task: Arc<dyn Runnable> = Task::new(key, self.owner.clone(), output, future);
        tasks.insert(TaskSlot {
            task: task.clone(),
            cancel,
        });
        self.queue.borrow_mut().push_back(task);
        key
    }

    /// Queues a task woken on its own core.
    pub(crate) fn schedule(&self, task: Arc<dyn Runnable>) {
        self.queue.borrow_mut().push_back(task);
    }

    /// Queues the task `key` names, woken from another thread, if it still
    /// exists.
    pub(crate) fn schedule_remote(&self, key: TaskKey) {
        let task = match self.tasks.borrow().get(key.index as usize) {
            Some(slot) if slot.task.header().key == key => slot.task.clone(),
            _ => return,
        };
        self.schedule(task);
    }

    pub(crate) fn has_ready(&self) -> bool {
        !self.queue.borrow().is_empty()
    }

    pub(crate) fn panics(&self) -> u64 {
        self.panics.get()
    }

    /// Polls ready tasks, at most [`POLL_BUDGET`]; returns how many ran.
    pub(crate) fn run_ready(&self) -> usize {
        let mut ran = 0;
        while ran < POLL_BUDGET {
            let Some(task) = self.queue.borrow_mut().pop_front() else {
                break;
            };
            self.poll_task(task);
            ran += 1;
        }
        ran
    }

    fn poll_task(&self, task: Arc<dyn Runnable>) {
        let key = task.header().key;
        self.owner.polling(key);
        budget::reset();
        // The queue's reference goes into the poll (it becomes the waker).
        let result = catch_unwind(AssertUnwindSafe(|| task.poll()));
        match result {
            Ok(Poll::Pending) => {}
            Ok(Poll::Ready(())) => self.finish(key, false),
            Err(payload) => self.panicked(key, &*payload),
        }
    }

    /// Ends a task that panicked, in its poll or in its destructor.
    fn panicked(&self, key: TaskKey, payload: &(dyn std::any::Any + Send)) {
        self.count_panic(
            payload,
            "task panicked; its connection, if it served one, is closed and the core goes on",
        );
        self.finish(key, true);
    }

    /// Counts and logs a panic of user code caught on this core outside a
    /// task's poll (a waker, a destructor, a log subscriber).
    pub(crate) fn record_panic(&self, payload: &(dyn std::any::Any + Send)) {
        self.count_panic(
            payload,
            "a waker or destructor panicked outside a task; the core goes on",
        );
    }

    fn count_panic(&self, payload: &(dyn std::any::Any + Send), what: &'static str) {
        self.panics.set(self.panics.get() + 1);
        // The log may be all an operator has: the panic hook's line goes
        // to stderr, which a service manager may not keep.
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(a payload that is not a string)");
        // A subscriber may panic too (the fmt layer does when stderr's
        // reader is gone): the panic is counted, and the core goes on.
        let _ = catch_unwind(|| tracing::error!(panic = message, "{what}"));
    }

    /// Records every panic that user code outside a task's poll (a waker, a
    /// destructor) raised since the last call.
    pub(crate) fn record_caught(&self) {
        crate::unwind::take(|payload| self.record_panic(payload));
    }

    /// Runs `f`, which runs user code (a destructor, a waker), recording
    /// its panic instead of unwinding: the core's loop and its stop must
    /// go on. Returns whether `f` finished.
    fn guarded(&self, f: impl FnOnce()) -> bool {
        let finished = crate::unwind::catching(f);
        self.record_caught();
        finished
    }

    /// Drops a removed task: its future, then the report to its join
    /// handle, then the slot (whose join slot may hold a detached task's
    /// output). Each of these may run user code that panics; each panic is
    /// recorded, and the steps after it still run, so the join handle
    /// always learns how the task ended. `why` is what the handle hears
    /// unless the task already handed over its output.
    fn drop_task(&self, slot: TaskSlot, why: JoinError) {
        let mut dropped_now = true;
        let future_ok = self.guarded(|| dropped_now = slot.task.abort());
        if !dropped_now {
            // Only a task whose own poll is under way cannot drop its
            // future here: it is dropped at its next turn instead.
            tracing::error!(
                "a task was ended during its own poll; its future is dropped at its next turn"
            );
            self.schedule(slot.task.clone());
        }
        let why = if future_ok { why } else { JoinError::Panicked };
        self.guarded(|| (slot.cancel)(why));
        self.guarded(move || drop(slot));
    }

    fn finish(&self, key: TaskKey, panicked: bool) {
        let slot = {
            let mut tasks = self.tasks.borrow_mut();
            match tasks.get(key.index as usize) {
                Some(slot) if slot.task.header().key == key => tasks.remove(key.index as usize),
                _ => None,
            }
        };
        let Some(slot) = slot else {
            return;
        };
        slot.task.header().state.close();
        // Outside the slab borrow: its destructors may spawn, wake or
        // cancel I/O. A task that returned without its output was aborted
        // during its own poll (see `abort`); one that finished has handed
        // its output over, and the join handle ignores this.
        let why = if panicked {
            JoinError::Panicked
        } else {
            JoinError::Aborted
        };
        self.drop_task(slot, why);
    }

    /// Ends the task `key` names, if it still runs (`JoinHandle::abort`):
    /// its future is dropped now, or, if the task is aborting itself from
    /// its own poll, at its next turn in the run queue, where it is put
    /// again for that.
    pub(crate) fn abort(&self, key: TaskKey) {
        let task = match self.tasks.borrow().get(key.index as usize) {
            Some(slot) if slot.task.header().key == key => slot.task.clone(),
            _ => return,
        };
        // Outside the slab borrow: the future's destructors may spawn, wake
        // or cancel I/O. One that panics ends its own task, as a panic in a
        // poll does, not the task that called `abort`, whose handle would
        // otherwise never resolve.
        match catch_unwind(AssertUnwindSafe(|| task.abort())) {
            Ok(true) => self.finish(key, false),
            Ok(false) => self.schedule(task),
            Err(payload) => self.panicked(key, &*payload),
        }
    }

    /// Drops every task (core shutdown). Their destructors cancel their I/O;
    /// join handles report [`JoinError::Cancelled`].
    pub(crate) fn cancel_all(&self) {
        loop {
            let keys: Vec<usize> = self.tasks.borrow().keys().collect();
            if keys.is_empty() {
                break;
            }
            for index in keys {
                let slot = self.tasks.borrow_mut().remove(index);
                if let Some(slot) = slot {
                    slot.task.header().state.close();
                    // A destructor that panics ends only its own task: it
                    // must not unwind out of the core's stop, which still
                    // has to drain the I/O in flight before the driver
                    // (and the buffers the kernel may still use) is freed.
                    self.drop_task(slot, JoinError::Cancelled);
                }
            }
        }
        // The queue holds tasks whose futures are gone: dropping them runs
        // no user code.
        let queued = std::mem::take(&mut *self.queue.borrow_mut());
        drop(queued);
    }
}

impl Drop for Executor {
    /// Futures are dropped here, on their own thread, even when the core
    /// did not shut down in order: a waker held elsewhere may outlive the
    /// executor, and must not be the one to drop a `!Send` future.
    fn drop(&mut self) {
        self.cancel_all();
    }
}
