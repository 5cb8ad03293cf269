//! [`WebSocket`]: one accepted WebSocket connection, and [`run`], its life
//! in the connection's task: the route's future beside the writer, then
//! the closing handshake.

use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::Instant;

use bytes::BytesMut;

use super::close::CloseCode;
use super::config::WsConfig;
use super::frame::{op, Decoder, Event};
use super::message::Message;
use super::outbox::{Sender, Shared};
use super::stats;
use crate::http::Upgraded;

/// An accepted WebSocket: receive with [`recv`](Self::recv), send with
/// [`send`](Self::send) (or, from other tasks, through a
/// [`sender`](Self::sender)).
///
/// The connection is read only while `recv` is awaited, so a route loops
/// on it even when it only sends: that is also where pings are answered,
/// the client's close is seen, the client is pinged when silent and the
/// timeouts are kept. Sending never waits: frames go into a bounded
/// queue that a writer empties beside the route (see
/// [`WsConfig::max_send_queue`]); [`flushed`](Self::flushed) waits for
/// it to be written.
pub struct WebSocket {
    shared: Rc<Shared>,
    reader: Rc<RefCell<Reader>>,
}

/// The receiving side's state.
struct Reader {
    input: BytesMut,
    decoder: Decoder,
    /// When the client last sent a byte.
    heard: Instant,
    /// When the client last sent a data message.
    spoke: Instant,
    /// When the server pinged a silent client, if it did and has not
    /// heard from it since.
    pinged: Option<Instant>,
    /// When the server queued its close frame: the client's is due
    /// within the close timeout.
    closing: Option<Instant>,
    /// The server stopping was seen.
    stopping: bool,
    /// The client's close arrived, or the stream ended or failed: nothing
    /// more is read.
    done: bool,
    /// The code that ended the connection, counted once at its end.
    ended_with: Option<CloseCode>,
}

/// What woke a wait for input.
enum Woke {
    Read(io::Result<Option<crate::http::Chunk>>),
    Deadline,
    Stop,
}

impl WebSocket {
    /// Receives the next data message. Pings are answered and pongs
    /// taken on the way. `Ok(None)` once the connection closed cleanly:
    /// the client's close frame arrived (and was answered), or the server
    /// closed (its stop, a [`close`](Self::close), an idle timeout) and
    /// the client answered or its close timeout passed.
    ///
    /// # Errors
    ///
    /// `InvalidData` for a frame that breaks RFC 6455 or a limit (the
    /// client was sent the close code: 1002, 1007, 1009), `TimedOut` for
    /// a client that did not answer a ping, `UnexpectedEof` for one that
    /// left without a close frame, or the stream's error. The connection
    /// is then over.
    #[expect(
        clippy::await_holding_refcell_ref,
        reason = "only `recv` and the close after the route's future ended read; \
                  both take the reader with `try_borrow_mut`, so a second reader \
                  gets an error, never a panic"
    )]
    pub async fn recv(&mut self) -> io::Result<Option<Message>> {
        let Ok(mut guard) = self.reader.try_borrow_mut() else {
            return Err(io::Error::other("the WebSocket is being read elsewhere"));
        };
        let reader = &mut *guard;
        loop {
            if reader.done {
                return Ok(None);
            }
            match reader.decoder.decode(&mut reader.input) {
                Err(violation) => {
                    reader.done = true;
                    reader.end(violation.code);
                    self.shared.close(Some(violation.code), violation.reason);
                    return Err(io::Error::new(io::ErrorKind::InvalidData, violation));
                }
                Ok(Some(event)) => {
                    if let Some(msg) = self.event(reader, event) {
                        return Ok(Some(msg));
                    }
                    continue;
                }
                Ok(None) => {}
            }
            match self.wait(reader).await {
                Woke::Read(Ok(Some(buf))) => {
                    reader.input.extend_from_slice(&buf);
                    reader.heard = percore::time::now();
                    reader.pinged = None;
                }
                Woke::Read(Ok(None)) => {
                    reader.done = true;
                    if reader.closing.is_some() {
                        // Our close went out; a client that then just
                        // leaves ends it as well as its close would.
                        return Ok(None);
                    }
                    reader.end(CloseCode::ABNORMAL);
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the client left without a close frame",
                    ));
                }
                Woke::Read(Err(e)) => {
                    reader.done = true;
                    reader.end(CloseCode::ABNORMAL);
                    self.shared.kill();
                    return Err(e);
                }
                Woke::Stop => {
                    reader.stopping = true;
                    self.close_with(reader, CloseCode::GOING_AWAY, "server stopping");
                }
                Woke::Deadline => {
                    if let Some(e) = self.deadline(reader) {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// Handles a control frame; gives a data message.
    fn event(&self, reader: &mut Reader, event: Event) -> Option<Message> {
        match event {
            Event::Message { text, data } => {
                reader.spoke = percore::time::now();
                if reader.closing.is_some() {
                    // After the server's close, data is dropped (§5.5.1).
                    return None;
                }
                stats::with(|c| {
                    c.messages_in.add(1);
                    c.bytes_in.add(data.len() as u64);
                });
                Some(Message::decoded(text, data))
            }
            Event::Ping(payload) => {
                self.shared.control(op::PONG, &payload);
                None
            }
            Event::Pong(_) => None,
            Event::Close(close) => {
                reader.done = true;
                match close {
                    // The answer echoes the client's code (§5.5.1).
                    Some((code, _)) => {
                        reader.end(code);
                        self.shared.close(Some(code), "");
                    }
                    None => {
                        reader.end(CloseCode::NO_STATUS);
                        self.shared.close(None, "");
                    }
                }
                None
            }
        }
    }

    /// Waits for input, the next deadline or the server's stop.
    async fn wait(&self, reader: &mut Reader) -> Woke {
        let deadline = reader.deadline(&self.shared.config);
        let mut read = self.shared.stream.read();
        let mut sleep = pin!(percore::time::sleep_until(deadline));
        let mut stop = (!reader.stopping).then(percore::shutdown_signal);
        poll_fn(|cx| {
            if let Poll::Ready(read) = std::pin::Pin::new(&mut read).poll(cx) {
                return Poll::Ready(Woke::Read(read));
            }
            if let Some(stop) = stop.as_mut() {
                if std::pin::Pin::new(stop).poll(cx).is_ready() {
                    return Poll::Ready(Woke::Stop);
                }
            }
            sleep.as_mut().poll(cx).map(|()| Woke::Deadline)
        })
        .await
    }

    /// A deadline passed: pings a silent client, or ends the connection
    /// of one that did not answer, idled or did not close in time.
    fn deadline(&self, reader: &mut Reader) -> Option<io::Error> {
        let config = &self.shared.config;
        let now = percore::time::now();
        if let Some(since) = reader.closing {
            if now >= since + config.close_timeout {
                reader.done = true;
                return None;
            }
            return None;
        }
        if let Some(pinged) = reader.pinged {
            if now >= pinged + config.pong_timeout {
                reader.done = true;
                self.close_with(reader, CloseCode::GOING_AWAY, "ping timeout");
                return Some(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client did not answer a ping",
                ));
            }
        } else if now >= reader.heard + config.ping_interval {
            reader.pinged = Some(now);
            self.shared.control(op::PING, b"");
        }
        if config
            .idle_timeout
            .is_some_and(|idle| now >= reader.spoke + idle)
        {
            self.close_with(reader, CloseCode::GOING_AWAY, "idle timeout");
        }
        None
    }

    /// Queues the server's close and waits for the client's.
    fn close_with(&self, reader: &mut Reader, code: CloseCode, reason: &str) {
        if self.shared.close(Some(code), reason) {
            reader.end(code);
        }
        reader.closing.get_or_insert(percore::time::now());
    }

    /// Queues `msg` to be sent, after what is queued already. Does not
    /// wait for the socket.
    ///
    /// # Errors
    ///
    /// `NotConnected` once the connection is closing; `WouldBlock` when
    /// the send queue is full ([`WsConfig::max_send_queue`]): the client
    /// reads too slowly, and is dropped (its connection ends).
    pub fn send(&self, msg: Message) -> io::Result<()> {
        self.shared.send(&msg)
    }

    /// Queues a text message.
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send).
    pub fn send_text(&self, text: &str) -> io::Result<()> {
        self.send(Message::text(text))
    }

    /// A handle that sends on this connection from other tasks of the
    /// core.
    pub fn sender(&self) -> Sender {
        Sender(self.shared.clone())
    }

    /// Waits until what was queued so far was written to the socket: a
    /// producer of large messages paces itself on it, within the queue.
    ///
    /// # Errors
    ///
    /// `NotConnected` if the connection was dropped first.
    pub async fn flushed(&self) -> io::Result<()> {
        self.shared.flushed().await
    }

    /// Begins the closing handshake with `code` and `reason` (cut to 123
    /// bytes): nothing more can be sent, and [`recv`](Self::recv) gives
    /// `None` once the client answers (or its close timeout passes).
    pub fn close(&mut self, code: CloseCode, reason: &str) {
        if let Ok(mut reader) = self.reader.try_borrow_mut() {
            self.close_with(&mut reader, code, reason);
        } else {
            self.shared.close(Some(code), reason);
        }
    }

    /// Whether `permessage-deflate` was negotiated: messages may then
    /// travel compressed both ways (always `false` without the
    /// `ws-deflate` feature).
    pub fn is_deflated(&self) -> bool {
        self.shared.deflates()
    }

    /// The client's address.
    ///
    /// # Errors
    ///
    /// When the socket is no longer connected.
    pub fn peer_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.shared.stream.peer_addr()
    }

    /// Whether the WebSocket runs on an HTTP/2 stream (RFC 8441) rather
    /// than an HTTP/1.1 connection of its own.
    pub fn is_h2(&self) -> bool {
        self.shared.stream.connection().is_none()
    }

    /// The HTTP/1.1 connection the WebSocket runs on, for what only a
    /// connection has (its TLS state, socket options); `None` on HTTP/2,
    /// where it is one stream of a shared connection.
    pub fn connection(&self) -> Option<&percore::Connection> {
        self.shared.stream.connection()
    }
}

impl std::fmt::Debug for WebSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSocket").finish_non_exhaustive()
    }
}

impl Reader {
    /// The next moment something is due: the close timeout while
    /// closing, else the pong timeout, the next ping or the idle timeout.
    fn deadline(&self, config: &WsConfig) -> Instant {
        if let Some(since) = self.closing {
            return since + config.close_timeout;
        }
        let ping = match self.pinged {
            Some(pinged) => pinged + config.pong_timeout,
            None => self.heard + config.ping_interval,
        };
        match config.idle_timeout {
            Some(idle) => ping.min(self.spoke + idle),
            None => ping,
        }
    }

    /// Notes the code that ends the connection, the first one only.
    fn end(&mut self, code: CloseCode) {
        self.ended_with.get_or_insert(code);
    }
}

/// The life of an accepted WebSocket on its connection: `then`'s future
/// beside the writer, then the close.
pub(crate) async fn run<F, Fut>(
    upgraded: Upgraded,
    config: WsConfig,
    #[cfg(feature = "ws-deflate")] deflate: Option<super::deflate::Negotiated>,
    then: F,
) -> io::Result<()>
where
    F: FnOnce(WebSocket) -> Fut,
    Fut: Future<Output = io::Result<()>>,
{
    let (stream, read) = upgraded.into_parts();
    let h2 = stream.connection().is_none();
    let shared = Shared::new(stream, config);
    let decoder = Decoder::new(config.max_frame, config.max_message);
    #[cfg(feature = "ws-deflate")]
    let (shared, decoder) = match deflate {
        Some(d) => (
            shared.with_deflater(d.deflater()),
            decoder.with_inflater(d.inflater()),
        ),
        None => (shared, decoder),
    };
    let shared = Rc::new(shared);
    let now = percore::time::now();
    let reader = Rc::new(RefCell::new(Reader {
        input: BytesMut::from(&read[..]),
        decoder,
        heard: now,
        spoke: now,
        pinged: None,
        closing: None,
        stopping: false,
        done: false,
        ended_with: None,
    }));
    stats::with(|c| {
        c.opened.add(1);
        if h2 {
            c.opened_h2.add(1);
        }
    });
    let ws = WebSocket {
        shared: shared.clone(),
        reader: reader.clone(),
    };
    let mut route = pin!(then(ws));
    let mut writer = pin!(shared.write_loop());
    let mut routed: Option<io::Result<()>> = None;
    // The route's future and the writer, until the writer ends: with the
    // close out after the route's future ended, or with the connection
    // dropped (the route's future is then dropped too).
    let written = poll_fn(|cx| {
        if routed.is_none() {
            if let Poll::Ready(result) = route.as_mut().poll(cx) {
                let code = match result {
                    Ok(()) => CloseCode::NORMAL,
                    Err(_) => CloseCode::INTERNAL,
                };
                if shared.finish(code) {
                    if let Ok(mut r) = reader.try_borrow_mut() {
                        r.end(code);
                    }
                }
                routed = Some(result);
            }
        }
        writer.as_mut().poll(cx)
    })
    .await;
    if written.is_ok() {
        // The client's close, read within the close timeout, so that the
        // client sees the stream end after the handshake, not before.
        let mut ws = WebSocket {
            shared: shared.clone(),
            reader: reader.clone(),
        };
        if let Ok(mut r) = reader.try_borrow_mut() {
            r.closing.get_or_insert(percore::time::now());
        }
        while let Ok(Some(_)) = ws.recv().await {}
        if shared.stream.shutdown_write().is_ok() {
            shared.stream.linger(shared.config.close_timeout).await;
        }
    }
    let code = reader.try_borrow().ok().and_then(|r| r.ended_with);
    let code = code
        .or(shared.close_queued())
        .unwrap_or(CloseCode::ABNORMAL);
    stats::with(|c| c.close(code));
    match (routed, written) {
        (Some(Err(e)), _) => Err(e),
        // A slow reader or a failed write is the client's doing, not the
        // route's failure.
        (_, Err(e)) => {
            tracing::debug!(error = %e, "WebSocket dropped");
            Ok(())
        }
        _ => Ok(()),
    }
}
