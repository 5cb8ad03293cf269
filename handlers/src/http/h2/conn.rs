//! One HTTP/2 connection's loop: socket reads fed to the protocol, the
//! streams it opens served, their frames written.
//!
//! Each turn of the loop: the write in flight is polled; then, with no
//! write in flight (so that a client that does not read cannot make the
//! output grow), a read is fed to the protocol, whose events are filed
//! with their streams; the new streams are started (each polled once,
//! most end there) and the woken ones polled; then everything they
//! wrote leaves in one write.
//!
//! Reads are the core's leases: only the bytes of a frame cut by the
//! read's end are copied, to wait for the rest. Once no stream is left,
//! the connection keeps no buffer (see the module docs of [`super`]).
//!
//! The connection ends when the client leaves (end of stream, or its
//! GOAWAY once its streams are done), after a protocol error (GOAWAY
//! with the error's code), after a flood (FAULTS L3: GOAWAY
//! `ENHANCE_YOUR_CALM`, the streams dropped), at the idle timeout
//! (GOAWAY `NO_ERROR`), or at a stop (GOAWAY `NO_ERROR`, then the
//! streams begun are served, until the server's drain deadline).

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;

use percore::net::{Stream, WriteAll};
use percore_http2::frame::ErrorCode;
use percore_http2::server::{Config as ProtoConfig, Connection};

use super::flood::{FloodGuard, FrameMeter};
use super::shared::{give_buffer, Shared};
use super::stream;
use super::streams::Streams;
use super::PREFACE;
use crate::http::layer::Layer;
use crate::http::service::Service;
use crate::http::wire::StopSlot;

/// What the protocol announces and enforces, from the layer's config.
fn proto_config<S>(layer: &Layer<S>) -> ProtoConfig {
    let limits = &layer.config.h2;
    ProtoConfig {
        max_concurrent_streams: limits.max_concurrent_streams,
        initial_window_size: limits.stream_window,
        connection_window_size: limits.connection_window,
        max_header_list_size: u32::try_from(layer.max_head).unwrap_or(u32::MAX),
        max_rapid_resets: u32::try_from(limits.pending_resets).unwrap_or(u32::MAX),
        enable_connect_protocol: limits.connect_protocol,
        ..ProtoConfig::default()
    }
}

/// Bytes received and not yet used: a frame cut by a read's end.
struct Input {
    rest: Vec<u8>,
}

impl Input {
    /// Feeds `bytes` to the protocol after what was kept, keeping what
    /// it does not use yet.
    fn feed(&mut self, shared: &Shared, bytes: &[u8]) -> Result<(), ErrorCode> {
        let mut proto = shared.proto.borrow_mut();
        if self.rest.is_empty() {
            let used = proto
                .receive(bytes, |e| shared.dispatch(e))
                .map_err(|e| e.code)?;
            self.rest.extend_from_slice(&bytes[used..]);
        } else {
            self.rest.extend_from_slice(bytes);
            let used = proto
                .receive(&self.rest, |e| shared.dispatch(e))
                .map_err(|e| e.code)?;
            self.rest.drain(..used);
        }
        Ok(())
    }
}

pub(super) async fn serve_connection<S: Service>(
    layer: &Layer<S>,
    conn: &Stream,
    read: Vec<u8>,
    stop: &StopSlot,
) -> io::Result<()> {
    let config = &layer.config;
    let peer = conn.peer_addr().ok();
    let shared = Rc::new(Shared::new(
        Connection::new(proto_config(layer)),
        config.h2.send_buffer,
    ));
    let guard = FloodGuard::new(config.h2.flood_allowance);
    let mut inbound = FrameMeter::skipping(PREFACE.len());
    let mut outbound = FrameMeter::default();
    let mut input = Input { rest: Vec::new() };
    let mut replay = Some(read);
    let mut streams = Streams::new();
    let mut writing: Option<WriteAll<'_, Vec<u8>>> = None;
    let mut spare = Vec::new();
    // The head timeout until the client's preface and SETTINGS are in;
    // then the idle timeout, running while no stream is served, and the
    // linger timeout once the client is gone.
    let mut timer = Box::pin(percore::time::sleep(config.head_timeout));
    let mut handshaken = false;
    let mut busy = false;
    let mut stopping = false;
    let mut cut = false;
    // No more reads: the output is written, then the connection closed.
    let mut closing = false;
    // The socket is done: the streams finish what follows their frames.
    let mut lost = false;
    poll_fn(|cx| loop {
        let mut progress = false;
        if let Some(write) = writing.as_mut() {
            if let Poll::Ready((res, mut buf)) = Pin::new(write).poll(cx) {
                writing = None;
                buf.clear();
                spare = buf;
                shared.wake_drained();
                progress = true;
                if res.is_err() {
                    lose(&shared, &mut lost, &mut timer, config.linger_timeout);
                }
            }
        }
        if lost {
            // The streams' tasks finish what follows their frames (a
            // WebSocket's count, an access-log line), for the linger
            // timeout at most: a service still waiting then is dropped.
            streams.poll(cx);
            if streams.is_empty() || timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Ok(()));
            }
            return Poll::Pending;
        }
        if !cut && guard.flooded() {
            // FAULTS L3: frames that carry nothing, far beyond the
            // payload. GOAWAY at once; the streams begun are dropped.
            let tally = guard.received_tally();
            tracing::info!(
                peer = ?peer,
                overhead = tally.overhead,
                payload = tally.payload,
                "HTTP/2 flood: GOAWAY ENHANCE_YOUR_CALM"
            );
            cut_off(layer, &shared, &mut streams, ErrorCode::EnhanceYourCalm);
            (cut, closing, progress) = (true, true, true);
        }
        if !stopping && stop.poll_stopped(cx) {
            // GOAWAY: no new streams; those begun are served, until the
            // server's drain deadline ends the connection's task.
            stopping = true;
            if !closing {
                shared.proto.borrow_mut().go_away(ErrorCode::NoError, b"");
                layer.counters.h2_goaways.add(1);
            }
            progress = true;
        }
        if !busy && !closing && timer.as_mut().poll(cx).is_ready() {
            if !handshaken {
                // A client that never finishes its preface and settings.
                return Poll::Ready(Ok(()));
            }
            if !shared.proto.borrow().is_going_away() {
                shared.proto.borrow_mut().go_away(ErrorCode::NoError, b"");
                layer.counters.h2_goaways.add(1);
            }
            (closing, progress) = (true, true);
        }
        if !closing && writing.is_none() {
            let read = match replay.take() {
                Some(bytes) => Poll::Ready(Ok(Some(Received::Replay(bytes)))),
                None => {
                    let mut read = conn.read();
                    Pin::new(&mut read)
                        .poll(cx)
                        .map_ok(|lease| lease.map(Received::Lease))
                }
            };
            match read {
                Poll::Ready(Ok(Some(bytes))) => {
                    progress = true;
                    if !guard.received(&mut inbound, &bytes) {
                        shared.lend_output();
                        let fed = input.feed(&shared, &bytes);
                        shared.release_orphans();
                        if let Err(code) = fed {
                            tracing::debug!(?code, "HTTP/2 connection error");
                            layer.counters.h2_cut();
                            layer.counters.h2_goaways.add(1);
                            shared.end();
                            streams.clear();
                            closing = true;
                        } else if shared.error_resets.get() > config.h2.error_resets {
                            cut_off(layer, &shared, &mut streams, ErrorCode::EnhanceYourCalm);
                            (cut, closing) = (true, true);
                        }
                    }
                    if !handshaken && shared.proto.borrow().handshaken() {
                        handshaken = true;
                        layer.counters.h2_connection();
                        timer
                            .as_mut()
                            .reset(percore::time::now() + config.idle_timeout);
                    }
                    if !closing {
                        let mut accepted = std::mem::take(&mut *shared.accepted.borrow_mut());
                        for (id, head) in accepted.drain(..) {
                            busy = true;
                            let shared = Rc::clone(&shared);
                            streams.start(|| stream::serve(layer, peer, shared, id, head), cx);
                        }
                        *shared.accepted.borrow_mut() = accepted;
                    }
                }
                Poll::Ready(Ok(None)) | Poll::Ready(Err(_)) => {
                    lose(&shared, &mut lost, &mut timer, config.linger_timeout);
                    continue;
                }
                Poll::Pending => {}
            }
        }
        streams.poll(cx);
        if writing.is_none() && !shared.proto.borrow_mut().output().is_empty() {
            let out = std::mem::replace(
                shared.proto.borrow_mut().output(),
                std::mem::take(&mut spare),
            );
            guard.sent(&mut outbound, &out);
            let mut write = conn.write_all(out);
            // The first poll starts the send: on epoll it is the
            // syscall, and frames that fit the socket's buffer are done.
            match Pin::new(&mut write).poll(cx) {
                Poll::Ready((res, mut buf)) => {
                    buf.clear();
                    spare = buf;
                    shared.wake_drained();
                    if res.is_err() {
                        lose(&shared, &mut lost, &mut timer, config.linger_timeout);
                    }
                }
                Poll::Pending => writing = Some(write),
            }
            progress = true;
        }
        if busy && streams.is_empty() {
            busy = false;
            // Idle: no buffer is kept (the protocol's output, the
            // stream store, a partial frame once used).
            shared.release_idle();
            if input.rest.is_empty() {
                input.rest = Vec::new();
            }
            give_buffer(std::mem::take(&mut spare));
            timer
                .as_mut()
                .reset(percore::time::now() + config.idle_timeout);
            progress = true;
        }
        let leaving = stopping || shared.client_left() || shared.proto.borrow().is_going_away();
        if !closing && leaving && !busy {
            // Every stream begun is served: the connection is done.
            (closing, progress) = (true, true);
        }
        if closing && writing.is_none() && shared.proto.borrow_mut().output().is_empty() {
            let _ = conn.shutdown_write();
            return Poll::Ready(Ok(()));
        }
        if !progress {
            return Poll::Pending;
        }
    })
    .await
}

/// Bytes to feed: the HTTP/1 loop's, then each read's lease.
enum Received {
    Replay(Vec<u8>),
    Lease(percore::buf::RecvBuf),
}

impl std::ops::Deref for Received {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Received::Replay(bytes) => bytes,
            Received::Lease(lease) => lease,
        }
    }
}

/// Ends the connection now with GOAWAY `code`, dropping its streams.
fn cut_off<S, F: Future<Output = ()>>(
    layer: &Layer<S>,
    shared: &Shared,
    streams: &mut Streams<F>,
    code: ErrorCode,
) {
    shared.proto.borrow_mut().go_away(code, b"");
    layer.counters.h2_cut();
    layer.counters.h2_goaways.add(1);
    shared.end();
    streams.clear();
}

/// The socket is done: every stream fails, and has the linger timeout
/// to finish.
fn lose(
    shared: &Shared,
    lost: &mut bool,
    timer: &mut Pin<Box<percore::time::Sleep>>,
    linger: std::time::Duration,
) {
    *lost = true;
    shared.end();
    timer.as_mut().reset(percore::time::now() + linger);
}
