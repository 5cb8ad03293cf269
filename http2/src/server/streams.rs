//! The open streams of one connection: a small vector, searched
//! linearly, since a connection holds few streams at once and an idle
//! one holds none.

use crate::frame::StreamId;

/// One stream that is open or half-closed (§5.1).
#[derive(Debug)]
pub(super) struct Stream {
    pub(super) id: StreamId,
    /// END_STREAM or RST received: half-closed (remote).
    pub(super) recv_closed: bool,
    /// END_STREAM sent: half-closed (local).
    pub(super) send_closed: bool,
    /// Response HEADERS sent: the stream is answered, so a reset from
    /// the peer is a cancel and not part of a rapid-reset flood.
    pub(super) answered: bool,
    /// What the peer may still send on this stream (§6.9).
    pub(super) recv_window: i64,
    /// Received bytes released by the application, not yet granted back.
    pub(super) recv_unacked: u32,
    /// What this end may still send (§6.9); may go negative after a
    /// SETTINGS_INITIAL_WINDOW_SIZE decrease (§6.9.2).
    pub(super) send_window: i64,
    /// What the request's `content-length` says is left of its body:
    /// DATA beyond it, or END_STREAM short of it, is malformed (§8.1.1).
    pub(super) length_left: Option<u64>,
}

/// The streams of one connection.
#[derive(Debug, Default)]
pub(super) struct Streams {
    open: Vec<Stream>,
}

impl Streams {
    pub(super) fn len(&self) -> usize {
        self.open.len()
    }

    pub(super) fn get(&mut self, id: StreamId) -> Option<&mut Stream> {
        self.open.iter_mut().find(|s| s.id == id)
    }

    pub(super) fn find(&self, id: StreamId) -> Option<&Stream> {
        self.open.iter().find(|s| s.id == id)
    }

    pub(super) fn insert(&mut self, stream: Stream) {
        self.open.push(stream);
    }

    pub(super) fn remove(&mut self, id: StreamId) -> Option<Stream> {
        let at = self.open.iter().position(|s| s.id == id)?;
        Some(self.open.swap_remove(at))
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Stream> {
        self.open.iter_mut()
    }

    /// Bytes allocated by the store.
    pub(super) fn allocated(&self) -> usize {
        self.open.capacity() * std::mem::size_of::<Stream>()
    }

    /// Frees the store's memory when no stream is open.
    pub(super) fn release_if_empty(&mut self) {
        if self.open.is_empty() {
            self.open = Vec::new();
        }
    }
}
