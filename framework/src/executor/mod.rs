//! The single-threaded task executor of one core.
//!
//! Tasks are `!Send` futures kept in a slab; the run queue holds keys.
//! A task is polled with its own waker (see [`task`]); a panic inside a poll
//! is caught, counted, and ends only that task: one bad connection must not
//! take down the other connections of its core.

pub(crate) mod budget;
mod join;
pub(crate) mod task;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

pub use join::{JoinError, JoinHandle};
use task::{TaskHeader, TaskKey};

use crate::runtime::shared::CoreShared;
use crate::slab::Slab;

type LocalFuture = Pin<Box<dyn Future<Output = ()>>>;

struct TaskSlot {
    generation: u32,
    /// `None` while the task is being polled.
    future: Option<LocalFuture>,
    waker: Option<Waker>,
    header: Arc<TaskHeader>,
    /// Reports the task's end without output to its join handle.
    cancel: Box<dyn Fn(JoinError)>,
}

pub(crate) struct Executor {
    tasks: RefCell<Slab<TaskSlot>>,
    queue: RefCell<VecDeque<TaskKey>>,
    next_generation: std::cell::Cell<u32>,
    panics: std::cell::Cell<u64>,
}

/// How many tasks one loop turn polls before it goes back to the driver, so
/// that I/O completions and timers are not starved by busy tasks.
const POLL_BUDGET: usize = 256;

impl Executor {
    pub(crate) fn new() -> Self {
        Executor {
            tasks: RefCell::new(Slab::with_capacity(1024)),
            queue: RefCell::new(VecDeque::with_capacity(1024)),
            next_generation: std::cell::Cell::new(0),
            panics: std::cell::Cell::new(0),
        }
    }

    pub(crate) fn spawn<F>(&self, owner: &Arc<CoreShared>, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let shared: join::Shared<F::Output> = Rc::new(RefCell::new(join::Slot::Running(None)));
        let output = shared.clone();
        let wrapped = async move {
            let value = future.await;
            join::finish(&output, Ok(value));
        };
        let on_cancel = shared.clone();
        let cancel = Box::new(move |why: JoinError| {
            if matches!(&*on_cancel.borrow(), join::Slot::Running(_)) {
                join::finish(&on_cancel, Err(why));
            }
        });
        let mut tasks = self.tasks.borrow_mut();
        let generation = self.next_generation.get().wrapping_add(1);
        self.next_generation.set(generation);
        let key = TaskKey {
            index: tasks.vacant_key() as u32,
            generation,
        };
        let header = Arc::new(TaskHeader {
            key,
            state: crate::sync::TaskState::new_scheduled(),
            owner: owner.clone(),
        });
        let waker = Waker::from(header.clone());
        tasks.insert(TaskSlot {
            generation,
            future: Some(Box::pin(wrapped)),
            waker: Some(waker),
            header,
            cancel,
        });
        self.queue.borrow_mut().push_back(key);
        JoinHandle { shared }
    }

    pub(crate) fn schedule(&self, key: TaskKey) {
        self.queue.borrow_mut().push_back(key);
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
            let Some(key) = self.queue.borrow_mut().pop_front() else {
                break;
            };
            if self.poll_task(key) {
                ran += 1;
            }
        }
        ran
    }

    fn poll_task(&self, key: TaskKey) -> bool {
        let (mut future, waker) = {
            let mut tasks = self.tasks.borrow_mut();
            let Some(slot) = tasks.get_mut(key.index as usize) else {
                return false;
            };
            if slot.generation != key.generation {
                return false;
            }
            let Some(future) = slot.future.take() else {
                return false;
            };
            let Some(waker) = slot.waker.take() else {
                unreachable!("a task's waker is only taken while it is polled")
            };
            // Here rather than after the borrow ends: the header is not
            // cloned (two atomic operations on a cold line) just for this.
            slot.header.state.start_poll();
            (future, waker)
        };
        budget::reset();
        let mut cx = Context::from_waker(&waker);
        let result = catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx)));
        match result {
            Ok(Poll::Pending) => {
                let mut tasks = self.tasks.borrow_mut();
                if let Some(slot) = tasks.get_mut(key.index as usize) {
                    slot.future = Some(future);
                    slot.waker = Some(waker);
                }
            }
            Ok(Poll::Ready(())) => self.finish(key, false, future),
            Err(_) => {
                self.panics.set(self.panics.get() + 1);
                tracing::error!("task panicked; its connection is closed and the core goes on");
                self.finish(key, true, future);
            }
        }
        true
    }

    fn finish(&self, key: TaskKey, panicked: bool, future: LocalFuture) {
        let slot = self.tasks.borrow_mut().remove(key.index as usize);
        // Drop the future outside the slab borrow: its destructors may
        // spawn, wake or cancel I/O.
        drop(future);
        if let Some(slot) = slot {
            slot.header.state.close();
            if panicked {
                (slot.cancel)(JoinError::Panicked);
            }
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
                if let Some(mut slot) = slot {
                    slot.header.state.close();
                    drop(slot.future.take());
                    (slot.cancel)(JoinError::Cancelled);
                }
            }
        }
        self.queue.borrow_mut().clear();
    }
}
