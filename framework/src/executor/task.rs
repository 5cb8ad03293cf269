//! A task's identity and its waker.
//!
//! The future itself never leaves its core: it sits in the executor's slab.
//! What a [`Waker`] carries is a [`TaskHeader`]: the slab key, the
//! scheduling flag and the owner core's inbox. Waking on the owner thread
//! pushes the key onto the local run queue (no lock); waking from any other
//! thread goes through the owner's inbox and unparks the core.

use std::sync::Arc;
use std::task::Wake;

use crate::runtime::context;
use crate::runtime::shared::CoreShared;
use crate::sync::TaskState;

/// Names one task on one core; the generation tells a reused slab slot
/// apart from the task that held it before, so stale wakes are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TaskKey {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

pub(crate) struct TaskHeader {
    pub(crate) key: TaskKey,
    pub(crate) state: TaskState,
    pub(crate) owner: Arc<CoreShared>,
}

impl Wake for TaskHeader {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.state.wake() {
            return;
        }
        if context::schedule_local(self.owner.id, self.key) {
            return;
        }
        self.owner.wake_remote(self.key);
    }
}
