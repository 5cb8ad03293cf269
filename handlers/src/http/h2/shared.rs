//! [`Shared`]: what one HTTP/2 connection's loop and the streams it
//! serves share, all in the connection's one task: the sans-IO protocol
//! state (`percore_http2`'s [`Connection`]) and, for each stream being
//! served, what arrived for it and the wakers of its reader and writer.
//!
//! The loop feeds received bytes to the protocol, which calls back with
//! events; [`Shared::dispatch`] files each one with its stream (a head
//! being decoded, request body bytes, trailers, a reset, window to send)
//! and wakes whoever waits on it. The streams answer by writing frames
//! into the protocol's output, which the loop sends.
//!
//! A stream's body bytes wait in its slot until the service reads them;
//! only then is their flow-control window given back, so what a slot
//! holds is bounded by the stream's receive window.

use std::cell::{Cell, RefCell};
use std::task::{Context, Waker};

use percore_http2::frame::{ErrorCode, StreamId};
use percore_http2::server::{Connection, Event};

use crate::http::conn::lend::Pool;

thread_local! {
    /// The core's buffers for field blocks, output and answers, lent to
    /// its connections while they are busy: a steady state allocates
    /// none, and an idle connection holds none.
    static BUFFERS: Pool<Vec<u8>> = const { Pool::new() };
}

/// A buffer of the core's, empty.
pub(super) fn take_buffer() -> Vec<u8> {
    BUFFERS.with(Pool::take)
}

/// Gives a buffer back to the core.
pub(super) fn give_buffer(buf: Vec<u8>) {
    BUFFERS.with(|pool| pool.give(buf));
}

/// A buffer of the core's, given back when dropped.
#[derive(Default)]
pub(super) struct Lent(pub(super) Vec<u8>);

impl Lent {
    pub(super) fn take() -> Self {
        Lent(take_buffer())
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        give_buffer(std::mem::take(&mut self.0));
    }
}

/// A field block as received, in one of the core's buffers: each field
/// as its name's and its value's lengths (4 bytes each), then both.
#[derive(Default)]
pub(crate) struct Head {
    /// Taken from the core at the first field, given back with the head.
    bytes: Lent,
    count: usize,
    /// No body follows (END_STREAM on the block).
    pub(super) end_stream: bool,
    /// The list passed the header list size limit: only what fits is here.
    pub(super) too_large: bool,
}

impl Head {
    fn push(&mut self, name: &[u8], value: &[u8]) {
        let bytes = &mut self.bytes.0;
        if bytes.capacity() == 0 {
            *bytes = take_buffer();
        }
        bytes.extend_from_slice(&(name.len() as u32).to_ne_bytes());
        bytes.extend_from_slice(&(value.len() as u32).to_ne_bytes());
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(value);
        self.count += 1;
    }

    /// The fields, in order, pseudo-header fields first.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        let mut rest = &self.bytes.0[..];
        std::iter::from_fn(move || {
            let len = |b: &[u8]| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize;
            if rest.len() < 8 {
                return None;
            }
            let (name_len, value_len) = (len(&rest[..4]), len(&rest[4..8]));
            let (name, tail) = rest[8..].split_at(name_len);
            let (value, tail) = tail.split_at(value_len);
            rest = tail;
            Some((name, value))
        })
    }

    /// The value of the first field named `name`.
    pub(super) fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The number of fields.
    pub(super) fn len(&self) -> usize {
        self.count
    }
}

/// One stream being served.
struct Slot {
    id: StreamId,
    /// Request body bytes received and not yet read.
    data: Vec<u8>,
    /// END_STREAM received: no more body.
    end: bool,
    trailers: Option<Head>,
    /// Reset by either end, or the connection is gone.
    reset: bool,
    reader: Option<Waker>,
    writer: Option<Waker>,
}

/// What a stream's reader finds.
pub(super) enum Received {
    /// Body bytes: the slot's buffer, swapped with the reader's.
    Data,
    /// The body's end, with the trailer fields if any.
    End(Option<Head>),
    /// The stream was reset or the connection is gone.
    Gone,
    /// Nothing yet: the reader's waker is kept.
    Wait,
}

/// One connection's protocol state and streams, shared within its task.
pub(crate) struct Shared {
    pub(super) proto: RefCell<Connection>,
    slots: RefCell<Vec<Slot>>,
    /// The connection ended: every stream's reads and writes fail.
    gone: Cell<bool>,
    /// Writers waiting for the output to drain below `send_bound`.
    drained: RefCell<Vec<Waker>>,
    send_bound: usize,
    /// A field block being received, and its stream.
    building: RefCell<Option<(StreamId, Head)>>,
    /// Streams whose head arrived, not yet started.
    pub(super) accepted: RefCell<Vec<(StreamId, Head)>>,
    /// DATA on streams no longer served, to give back to the connection.
    orphaned: Cell<u32>,
    /// Streams this end reset for the client's errors.
    pub(super) error_resets: Cell<usize>,
    /// The client sent GOAWAY: it opens no more streams.
    left: Cell<bool>,
}

impl Shared {
    pub(super) fn new(proto: Connection, send_bound: usize) -> Self {
        Shared {
            proto: RefCell::new(proto),
            slots: RefCell::new(Vec::new()),
            gone: Cell::new(false),
            drained: RefCell::new(Vec::new()),
            send_bound,
            building: RefCell::new(None),
            accepted: RefCell::new(Vec::new()),
            orphaned: Cell::new(0),
            error_resets: Cell::new(0),
            left: Cell::new(false),
        }
    }

    /// Files one event of the protocol. Runs inside
    /// [`Connection::receive`], so the protocol itself is not touched.
    pub(super) fn dispatch(&self, event: Event<'_>) {
        match event {
            Event::Field {
                stream,
                name,
                value,
                ..
            } => {
                let mut building = self.building.borrow_mut();
                match &mut *building {
                    Some((id, head)) if *id == stream => head.push(name, value),
                    _ => {
                        let mut head = Head::default();
                        head.push(name, value);
                        *building = Some((stream, head));
                    }
                }
            }
            Event::Headers {
                stream,
                end_stream,
                trailers,
                too_large,
            } => {
                let mut head = match self.building.borrow_mut().take() {
                    Some((id, head)) if id == stream => head,
                    _ => Head::default(),
                };
                head.end_stream = end_stream;
                head.too_large = too_large;
                if trailers {
                    self.with_slot(stream, |slot| {
                        slot.trailers = Some(head);
                        slot.end = true;
                        wake(&mut slot.reader);
                    });
                } else {
                    // The slot is made now: DATA may follow in this read.
                    self.open(stream, end_stream);
                    self.accepted.borrow_mut().push((stream, head));
                }
            }
            Event::Data {
                stream,
                data,
                end_stream,
            } => {
                let filed = self.with_slot(stream, |slot| {
                    slot.data.extend_from_slice(data);
                    slot.end |= end_stream;
                    wake(&mut slot.reader);
                });
                if filed.is_none() {
                    // A stream not (or no longer) served: its bytes are
                    // dropped and their window given back.
                    let n = self.orphaned.get().saturating_add(data.len() as u32);
                    self.orphaned.set(n);
                }
            }
            Event::Reset { stream, remote, .. } => {
                if !remote {
                    self.error_resets.set(self.error_resets.get() + 1);
                }
                let mut building = self.building.borrow_mut();
                if building.as_ref().is_some_and(|(id, _)| *id == stream) {
                    *building = None;
                }
                drop(building);
                let mut accepted = self.accepted.borrow_mut();
                let before = accepted.len();
                accepted.retain(|(id, _)| *id != stream);
                if accepted.len() < before {
                    // Never started: nothing else will forget its slot.
                    let mut slots = self.slots.borrow_mut();
                    slots.retain(|slot| slot.id != stream);
                    return;
                }
                drop(accepted);
                self.with_slot(stream, |slot| {
                    slot.reset = true;
                    wake(&mut slot.reader);
                    wake(&mut slot.writer);
                });
            }
            Event::SendCapacity { stream } => {
                for slot in self.slots.borrow_mut().iter_mut() {
                    if stream.is_zero() || slot.id == stream {
                        wake(&mut slot.writer);
                    }
                }
            }
            // The client leaves: the loop ends the connection once its
            // streams are done.
            Event::GoAway { .. } => self.left.set(true),
        }
    }

    /// Gives back the window of DATA that arrived for no served stream.
    pub(super) fn release_orphans(&self) {
        let n = self.orphaned.replace(0);
        if n > 0 {
            self.proto.borrow_mut().release(StreamId::ZERO, n);
        }
    }

    fn with_slot<R>(&self, id: StreamId, f: impl FnOnce(&mut Slot) -> R) -> Option<R> {
        let mut slots = self.slots.borrow_mut();
        slots.iter_mut().find(|s| s.id == id).map(f)
    }

    /// Makes the slot of a stream whose head arrived.
    fn open(&self, id: StreamId, end: bool) {
        self.slots.borrow_mut().push(Slot {
            id,
            data: Vec::new(),
            end,
            trailers: None,
            reset: false,
            reader: None,
            writer: None,
        });
    }

    /// Forgets a stream whose service is done, resetting it if the
    /// protocol still has it open: CANCEL if its answer is unfinished,
    /// NO_ERROR if only the client's side is (§8.1: the answer is whole,
    /// the rest of the request is not wanted).
    pub(super) fn close(&self, id: StreamId) {
        let mut slots = self.slots.borrow_mut();
        if let Some(at) = slots.iter().position(|s| s.id == id) {
            let slot = slots.swap_remove(at);
            let unread = slot.data.len() as u32;
            drop(slots);
            let mut proto = self.proto.borrow_mut();
            if unread > 0 {
                proto.release(id, unread);
            }
            match proto.stream_ends(id) {
                Some((_, false)) => proto.reset(id, ErrorCode::Cancel),
                Some((false, true)) => proto.reset(id, ErrorCode::NoError),
                _ => {}
            }
        }
    }

    /// The connection ended: every stream fails from now on.
    pub(super) fn end(&self) {
        self.gone.set(true);
        for slot in self.slots.borrow_mut().iter_mut() {
            slot.reset = true;
            wake(&mut slot.reader);
            wake(&mut slot.writer);
        }
        self.wake_drained();
    }

    /// Whether the client sent GOAWAY.
    pub(super) fn client_left(&self) -> bool {
        self.left.get()
    }

    /// Whether `id` was reset or the connection is gone.
    pub(super) fn failed(&self, id: StreamId) -> bool {
        self.gone.get() || self.with_slot(id, |s| s.reset).unwrap_or(true)
    }

    /// Takes what arrived for `id`: body bytes are swapped into `buf`
    /// (which must be empty), and their window given back.
    pub(super) fn receive(
        &self,
        id: StreamId,
        buf: &mut Vec<u8>,
        cx: &mut Context<'_>,
    ) -> Received {
        let received = self
            .with_slot(id, |slot| {
                if slot.reset {
                    Received::Gone
                } else if !slot.data.is_empty() {
                    std::mem::swap(&mut slot.data, buf);
                    Received::Data
                } else if slot.end {
                    Received::End(slot.trailers.take())
                } else {
                    slot.reader = Some(cx.waker().clone());
                    Received::Wait
                }
            })
            .unwrap_or(Received::Gone);
        if matches!(received, Received::Data) {
            self.proto.borrow_mut().release(id, buf.len() as u32);
        }
        received
    }

    /// Keeps the waker of `id`'s writer, woken when its windows grow.
    pub(super) fn wait_capacity(&self, id: StreamId, cx: &mut Context<'_>) {
        self.with_slot(id, |slot| slot.writer = Some(cx.waker().clone()));
    }

    /// Whether the output holds at least the bound: a sender waits (with
    /// its waker kept) until the loop has written it.
    pub(super) fn output_full(&self, cx: &mut Context<'_>) -> bool {
        if self.gone.get() || self.proto.borrow_mut().output().len() < self.send_bound {
            return false;
        }
        self.drained.borrow_mut().push(cx.waker().clone());
        true
    }

    /// The output was written: senders waiting for it go on.
    pub(super) fn wake_drained(&self) {
        let mut drained = self.drained.borrow_mut();
        if !drained.is_empty() {
            for waker in drained.drain(..) {
                waker.wake();
            }
            *drained = Vec::new();
        }
    }

    /// Frees what an idle connection does not need.
    pub(super) fn release_idle(&self) {
        let mut slots = self.slots.borrow_mut();
        if slots.is_empty() {
            *slots = Vec::new();
        }
        let mut accepted = self.accepted.borrow_mut();
        if accepted.is_empty() {
            *accepted = Vec::new();
        }
        let mut proto = self.proto.borrow_mut();
        if proto.output().is_empty() {
            give_buffer(std::mem::take(proto.output()));
        }
        proto.release_idle();
    }

    /// Gives the output a buffer of the core's before frames are written.
    pub(super) fn lend_output(&self) {
        let mut proto = self.proto.borrow_mut();
        if proto.output().capacity() == 0 {
            *proto.output() = take_buffer();
        }
    }
}

fn wake(waker: &mut Option<Waker>) {
    if let Some(waker) = waker.take() {
        waker.wake();
    }
}
