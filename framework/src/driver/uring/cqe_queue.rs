//! The completions a multishot operation has queued for its owner.

use std::collections::VecDeque;

use super::ops::Cqe;

/// A multishot's completions not yet collected, in arrival order.
///
/// Boxed: the slot of every armed receive (one per idle connection) holds
/// 8 bytes for it, not a `VecDeque`'s 32. Its room is lent only while
/// completions wait in it, and goes back to the core's spares once they
/// are taken (see `spare`), so moving it never allocates.
#[derive(Default)]
#[allow(clippy::box_collection)] // The box is the point: 8 bytes inline.
pub(crate) struct CqeQueue(Option<Box<VecDeque<Cqe>>>);

impl CqeQueue {
    /// A queue with room for `completions` before it grows.
    pub(crate) fn with_room(completions: usize) -> CqeQueue {
        CqeQueue(Some(Box::new(VecDeque::with_capacity(completions))))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|queue| queue.is_empty())
    }

    pub(crate) fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |queue| queue.len())
    }

    /// Whether it has room of its own: a spare taken, or a queue grown.
    pub(crate) fn has_room(&self) -> bool {
        self.0.as_ref().is_some_and(|queue| queue.capacity() > 0)
    }

    pub(crate) fn push_back(&mut self, cqe: Cqe) {
        self.0.get_or_insert_with(Box::default).push_back(cqe);
    }

    pub(crate) fn pop_front(&mut self) -> Option<Cqe> {
        self.0.as_mut()?.pop_front()
    }

    pub(crate) fn clear(&mut self) {
        if let Some(queue) = &mut self.0 {
            queue.clear();
        }
    }

    /// Takes every queued completion, keeping the room.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = Cqe> + '_ {
        self.0.iter_mut().flat_map(|queue| queue.drain(..))
    }
}
