//! The sending side of a WebSocket: a bounded queue of encoded frames, the
//! writer that empties it onto the stream, and [`Sender`], the handle
//! other tasks (a broadcast) queue messages through.
//!
//! Frames are encoded into one `Vec` as they are queued, and the writer
//! sends the whole of it in one write while the next frames gather in
//! another: a burst of small messages goes out in few sends. The queue is
//! bounded ([`WsConfig::max_send_queue`]): a send that would go past it
//! means the client reads slower than it is sent to, and the connection
//! is dropped (FAULTS M3) instead of its queue growing.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::io;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Poll, Waker};

use super::close::CloseCode;
use super::config::WsConfig;
use super::frame::{encode, encode_head, op, MAX_CONTROL_PAYLOAD};
use super::message::Message;
use super::stats;
use crate::http::tunnel::Tunnel;

/// What a connection's reader, writer and senders share.
pub(crate) struct Shared {
    /// The byte stream: an HTTP/1.1 connection or an HTTP/2 stream.
    pub(crate) stream: Tunnel,
    pub(crate) config: WsConfig,
    out: RefCell<Queue>,
    /// The writer, waiting for frames.
    writer: Cell<Option<Waker>>,
    /// A task waiting for the queue to empty ([`Sender::flushed`]).
    drained: Cell<Option<Waker>>,
    /// With `permessage-deflate` negotiated, what compresses messages.
    #[cfg(feature = "ws-deflate")]
    deflater: RefCell<Option<super::deflate::Deflater>>,
}

/// The frames waiting to be sent, and the connection's sending state.
#[derive(Default)]
struct Queue {
    frames: Vec<u8>,
    /// The server's close frame is queued: nothing more may follow it.
    close: Option<CloseCode>,
    /// The connection is being dropped (a slow reader, or a failed
    /// write): nothing more is queued or sent.
    dead: bool,
    /// The writer has a batch in flight.
    writing: bool,
    /// The route's future ended: the writer ends once the close is out.
    finishing: bool,
}

impl Shared {
    pub(crate) fn new(stream: Tunnel, config: WsConfig) -> Self {
        Self {
            stream,
            config,
            out: RefCell::new(Queue::default()),
            writer: Cell::new(None),
            drained: Cell::new(None),
            #[cfg(feature = "ws-deflate")]
            deflater: RefCell::new(None),
        }
    }

    /// Compresses the messages sent from now on, as negotiated.
    #[cfg(feature = "ws-deflate")]
    pub(crate) fn with_deflater(mut self, deflater: super::deflate::Deflater) -> Self {
        self.deflater = RefCell::new(Some(deflater));
        self
    }

    /// Whether messages go out compressed.
    pub(crate) fn deflates(&self) -> bool {
        #[cfg(feature = "ws-deflate")]
        return self.deflater.borrow().is_some();
        #[cfg(not(feature = "ws-deflate"))]
        false
    }

    /// Queues a data message.
    ///
    /// # Errors
    ///
    /// `NotConnected` once the close is queued or the connection dropped;
    /// `WouldBlock` when the queue is full: the client is then a slow
    /// reader, and the connection is dropped.
    pub(crate) fn send(&self, msg: &Message) -> io::Result<()> {
        let mut out = self.out.borrow_mut();
        if out.dead || out.close.is_some() {
            return Err(closed());
        }
        let len = msg.len();
        // A message larger than the whole queue still goes alone.
        if !out.frames.is_empty() && out.frames.len() + len + 10 > self.config.max_send_queue {
            out.dead = true;
            drop(out);
            stats::with(|c| c.slow_dropped.add(1));
            self.wake_writer();
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "send queue full: the client reads too slowly, and is dropped",
            ));
        }
        let opcode = if msg.is_text() { op::TEXT } else { op::BINARY };
        #[cfg(feature = "ws-deflate")]
        if let Some(deflater) = self.deflater.borrow_mut().as_mut() {
            deflater.encode(opcode, msg.as_bytes(), &mut out.frames);
        } else {
            encode(&mut out.frames, opcode, msg.as_bytes());
        }
        #[cfg(not(feature = "ws-deflate"))]
        encode(&mut out.frames, opcode, msg.as_bytes());
        drop(out);
        stats::with(|c| {
            c.messages_out.add(1);
            c.bytes_out.add(len as u64);
        });
        self.wake_writer();
        Ok(())
    }

    /// Queues a control frame (a ping or a pong), unless the close is.
    pub(crate) fn control(&self, opcode: u8, payload: &[u8]) {
        let mut out = self.out.borrow_mut();
        if out.dead || out.close.is_some() {
            return;
        }
        let payload = &payload[..payload.len().min(MAX_CONTROL_PAYLOAD)];
        encode(&mut out.frames, opcode, payload);
        drop(out);
        self.wake_writer();
    }

    /// Queues the server's close frame (once): `code` and a reason cut to
    /// fit the 125 bytes of a control frame. `None` sends an empty one
    /// (the answer to a client's close that carried no code). Returns
    /// whether this call queued it.
    pub(crate) fn close(&self, code: Option<CloseCode>, reason: &str) -> bool {
        let mut out = self.out.borrow_mut();
        if out.dead || out.close.is_some() {
            return false;
        }
        out.close = Some(code.unwrap_or(CloseCode::NO_STATUS));
        match code {
            None => encode_head(&mut out.frames, op::CLOSE, 0),
            Some(code) => {
                let reason = cut(reason, MAX_CONTROL_PAYLOAD - 2);
                encode_head(&mut out.frames, op::CLOSE, 2 + reason.len());
                out.frames.extend_from_slice(&code.0.to_be_bytes());
                out.frames.extend_from_slice(reason.as_bytes());
            }
        }
        drop(out);
        self.wake_writer();
        true
    }

    /// The code of the close frame queued, if one is.
    pub(crate) fn close_queued(&self) -> Option<CloseCode> {
        self.out.borrow().close
    }

    /// Whether the connection is being dropped.
    pub(crate) fn is_dead(&self) -> bool {
        self.out.borrow().dead
    }

    /// Marks the connection dropped, waking the writer to end.
    pub(crate) fn kill(&self) {
        self.out.borrow_mut().dead = true;
        self.wake_writer();
    }

    fn wake_writer(&self) {
        if let Some(waker) = self.writer.take() {
            waker.wake();
        }
    }

    /// Sends what is queued, batch after batch, until the close is out
    /// after the route's future ended ([`finish`](Self::finish)), or the
    /// connection is dropped (the error). Never dropped in the middle of
    /// a batch while the connection lives, which would cut a frame.
    pub(crate) async fn write_loop(&self) -> io::Result<()> {
        let mut spare = Vec::new();
        loop {
            let batch = poll_fn(|cx| {
                let mut out = self.out.borrow_mut();
                if out.dead {
                    return Poll::Ready(None);
                }
                if out.frames.is_empty() {
                    out.writing = false;
                    if out.finishing && out.close.is_some() {
                        return Poll::Ready(Some(None));
                    }
                    if let Some(waker) = self.drained.take() {
                        waker.wake();
                    }
                    self.writer.set(Some(cx.waker().clone()));
                    return Poll::Pending;
                }
                out.writing = true;
                let batch = std::mem::replace(&mut out.frames, std::mem::take(&mut spare));
                Poll::Ready(Some(Some(batch)))
            })
            .await;
            let batch = match batch {
                Some(Some(batch)) => batch,
                // The close is out after everything else.
                Some(None) => return Ok(()),
                None => return Err(self.dropped()),
            };
            let mut batch = self.write(batch).await?;
            batch.clear();
            // The larger of the two buffers is kept for the next batch.
            if batch.capacity() <= 4 * self.config.max_send_queue.max(64 * 1024) {
                spare = batch;
            }
        }
    }

    /// Writes `batch` whole, within the write timeout from its start;
    /// gives it back. Ends early (the connection reset) when the
    /// connection is dropped meanwhile: a slow reader's queue filled up
    /// while this write waited for it.
    pub(crate) async fn write(&self, batch: Vec<u8>) -> io::Result<Vec<u8>> {
        let mut write = pin!(self.stream.write_all(batch));
        let mut sleep = pin!(percore::time::sleep(self.config.write_timeout));
        let written = poll_fn(|cx| {
            if let Poll::Ready(done) = write.as_mut().poll(cx) {
                return Poll::Ready(Some(done));
            }
            if self.out.borrow().dead {
                return Poll::Ready(None);
            }
            self.writer.set(Some(cx.waker().clone()));
            sleep.as_mut().poll(cx).map(|()| None)
        })
        .await;
        match written {
            Some((Ok(()), batch)) => Ok(batch),
            Some((Err(e), _)) => {
                self.kill();
                Err(e)
            }
            None => {
                self.kill();
                Err(self.dropped())
            }
        }
    }

    /// The route's future ended: queues the close (`code`, unless one
    /// is queued) and lets the writer end once it is out.
    pub(crate) fn finish(&self, code: CloseCode) -> bool {
        let queued = self.close(Some(code), "");
        self.out.borrow_mut().finishing = true;
        self.wake_writer();
        queued
    }

    /// Why the writer ended: a slow reader's drop, or a write that made
    /// no progress within the write timeout.
    fn dropped(&self) -> io::Error {
        // A reset, not a close: what was queued for a client that does
        // not read is not trickled out to it for minutes.
        self.stream.reset();
        io::Error::new(
            io::ErrorKind::TimedOut,
            "the client read too slowly for its send queue, and was dropped",
        )
    }

    /// Waits until everything queued so far was written.
    pub(crate) async fn flushed(&self) -> io::Result<()> {
        poll_fn(|cx| {
            let out = self.out.borrow();
            if out.dead {
                return Poll::Ready(Err(closed()));
            }
            if out.frames.is_empty() && !out.writing {
                return Poll::Ready(Ok(()));
            }
            self.drained.set(Some(cx.waker().clone()));
            Poll::Pending
        })
        .await
    }
}

/// A handle that queues messages on a WebSocket from anywhere on its core
/// (another task, a broadcast): cheap to clone, and harmless after the
/// connection ended (its sends then fail).
#[derive(Clone)]
pub struct Sender(pub(crate) Rc<Shared>);

impl Sender {
    /// Queues `msg`; it goes out in order with the connection's other
    /// frames. Does not wait: see [`WebSocket::send`](super::WebSocket::send).
    ///
    /// # Errors
    ///
    /// `NotConnected` when the connection is closing or gone;
    /// `WouldBlock` when its send queue is full, which drops it.
    pub fn send(&self, msg: &Message) -> io::Result<()> {
        self.0.send(msg)
    }

    /// Whether the connection is closing or gone: sends fail.
    pub fn is_closed(&self) -> bool {
        self.0.is_dead() || self.0.close_queued().is_some()
    }

    /// Waits until what was queued so far was written to the socket.
    ///
    /// # Errors
    ///
    /// `NotConnected` if the connection was dropped first.
    pub async fn flushed(&self) -> io::Result<()> {
        self.0.flushed().await
    }
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("closed", &self.is_closed())
            .finish()
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the WebSocket is closed")
}

/// The longest prefix of `s` within `max` bytes, on a character boundary.
fn cut(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
