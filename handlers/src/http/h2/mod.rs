//! HTTP/2 for the [`HttpHandler`](super::HttpHandler): one connection's
//! frames are hyperium's `h2` crate's, over [`Io`], the connection's
//! percore stream as tokio's I/O traits. Each stream's request is served
//! by the same [`Service`] as on HTTP/1, with a [`Request`] and a
//! [`Response`] backed by the stream ([`StreamBody`], [`StreamOut`]).
//!
//! A connection is one task: its frames and all its streams are polled
//! by one future ([`serve`]), so streams are served concurrently on the
//! connection's core with nothing shared across threads. The streams that
//! arrive together are all taken before any is served, and their answers
//! leave together, in one write ([`Streams`] says how a stream that ends
//! at once costs no task of its own).
//!
//! The connection is HTTP/2 when TLS agreed on `h2` by ALPN, or when a
//! clear-text connection begins with the client's preface (prior
//! knowledge, `h2c`), which the HTTP/1 loop sees in its first read and
//! hands over with the bytes it read ([`is_preface`]).

mod body;
mod connect;
mod flood;
pub(crate) mod io;
mod out;
mod stream;
mod streams;
mod tunnel;

use std::future::{poll_fn, Future};
use std::io as stdio;
use std::pin::Pin;
use std::task::Poll;

use percore::net::Stream;

use super::layer::Layer;
use super::service::Service;
use super::wire::StopSlot;
pub(crate) use body::StreamBody;
use flood::FloodGuard;
use io::Io;
pub(crate) use out::StreamOut;
use streams::Streams;
pub(crate) use tunnel::H2Tunnel;

/// Streams taken at once whose room a connection keeps when it goes idle.
const KEPT_ACCEPTS: usize = 16;

/// The client's connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Whether a clear-text connection's first bytes are (the start of) the
/// HTTP/2 preface: at least `PRI ` and nothing that differs from it. No
/// HTTP/1 request begins so (`PRI` is reserved for the preface).
pub(crate) fn is_preface(bytes: &[u8]) -> bool {
    let n = bytes.len().min(PREFACE.len());
    n >= 4 && bytes[..n] == PREFACE[..n]
}

/// Whether a TLS connection agreed on `h2` by ALPN.
pub(crate) fn chosen_by_alpn(conn: &Stream) -> bool {
    conn.is_tls() && conn.tls_alpn().as_deref() == Some(b"h2")
}

/// A connection's HTTP/2 loop, boxed: the HTTP/1 loop that hands over to
/// it keeps only room for the box.
pub(crate) type Boxed<'a> = Pin<Box<dyn Future<Output = stdio::Result<()>> + 'a>>;

/// Serves HTTP/2 on a connection that chose it by ALPN.
pub(crate) async fn serve_alpn<S: Service>(layer: &Layer<S>, conn: Stream) -> stdio::Result<()> {
    let stop = layer.stop.register();
    serve(layer, &conn, Vec::new(), &stop).await
}

/// Serves HTTP/2 on `conn` until the client leaves, it stays idle past
/// the idle timeout, or the server stops (GOAWAY, then the streams begun
/// are served to their end, until the server's drain deadline). `read` is what the
/// HTTP/1 loop read before it saw the preface.
pub(crate) fn serve<'a, S: Service>(
    layer: &'a Layer<S>,
    conn: &'a Stream,
    read: Vec<u8>,
    stop: &'a StopSlot,
) -> Boxed<'a> {
    Box::pin(serve_connection(layer, conn, read, stop))
}

async fn serve_connection<S: Service>(
    layer: &Layer<S>,
    conn: &Stream,
    read: Vec<u8>,
    stop: &StopSlot,
) -> stdio::Result<()> {
    let config = &layer.config;
    let peer = conn.peer_addr().ok();
    let mut builder = h2::server::Builder::new();
    let limits = &config.h2;
    builder
        .max_concurrent_streams(limits.max_concurrent_streams)
        .initial_window_size(limits.stream_window)
        .initial_connection_window_size(limits.connection_window)
        .max_header_list_size(u32::try_from(layer.max_head).unwrap_or(u32::MAX))
        .max_send_buffer_size(limits.send_buffer)
        .max_pending_accept_reset_streams(limits.pending_resets)
        .max_local_error_reset_streams(Some(limits.error_resets));
    if limits.connect_protocol {
        // SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441 §3): WebSockets and
        // other upgrades by extended CONNECT.
        builder.enable_connect_protocol();
    }
    let guard = FloodGuard::new(limits.flood_allowance);
    let handshake =
        builder.handshake::<_, bytes::Bytes>(Io::new(conn, read, &guard, PREFACE.len()));
    let mut h2 = match percore::time::timeout(config.head_timeout, handshake).await {
        Ok(Ok(h2)) => h2,
        Ok(Err(e)) => return ended(layer, e),
        // A client that never finishes its preface and settings.
        Err(_) => return Ok(()),
    };
    layer.counters.h2_connection();
    let mut streams = Streams::new();
    let mut stopping = false;
    // Reset as the last stream ends: the idle timeout runs while the
    // connection has none, and bounds the wait for its end after GOAWAY.
    let mut idle = Box::pin(percore::time::sleep(config.idle_timeout));
    let mut busy = false;
    let mut cut = false;
    // `h2` ended the connection: no more frames either way.
    let mut closed = false;
    // The streams `h2` hands out are all taken before any is served, so
    // that the answers of the streams that arrived together are queued
    // together and leave in one write when `h2` is polled next, not one
    // write each (served as each was taken, every answer was flushed by
    // the next accept's poll of the connection).
    let mut accepted = Vec::new();
    let served = poll_fn(|cx| loop {
        if !cut && guard.flooded() {
            // FAULTS L3: frames that carry nothing, far beyond the
            // payload. GOAWAY at once; the streams begun are dropped.
            cut = true;
            let tally = guard.received_tally();
            tracing::info!(
                peer = ?peer,
                overhead = tally.overhead,
                payload = tally.payload,
                "HTTP/2 flood: GOAWAY ENHANCE_YOUR_CALM"
            );
            layer.counters.h2_cut();
            layer.counters.h2_goaways.add(1);
            h2.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
            streams.clear();
            accepted.clear();
        }
        if accepted.is_empty() {
            streams.poll(cx);
        }
        if busy && streams.is_empty() && accepted.is_empty() {
            busy = false;
            if accepted.capacity() > KEPT_ACCEPTS {
                // A burst's room is not kept for an idle connection.
                accepted = Vec::new();
            }
            idle.as_mut()
                .reset(percore::time::now() + config.idle_timeout);
        }
        if !busy && idle.as_mut().poll(cx).is_ready() {
            if stopping {
                // A client that neither opens streams nor ends the
                // connection an idle period after its GOAWAY (it never
                // acknowledged the PING that completes the shutdown).
                return Poll::Ready(Ok(()));
            }
            h2.graceful_shutdown();
            layer.counters.h2_goaways.add(1);
            stopping = true;
            idle.as_mut()
                .reset(percore::time::now() + config.idle_timeout);
            continue;
        }
        if !stopping && stop.poll_stopped(cx) {
            // GOAWAY: no new streams; those begun are served, until the
            // server's drain deadline ends the connection's task.
            h2.graceful_shutdown();
            layer.counters.h2_goaways.add(1);
            stopping = true;
            idle.as_mut()
                .reset(percore::time::now() + config.idle_timeout);
            continue;
        }
        if closed {
            // The streams' tasks finish what follows their frames (a
            // WebSocket's count, an access-log line), for the linger
            // timeout at most: a service still waiting then is dropped.
            let lingered = idle.as_mut().poll(cx).is_ready();
            return if streams.is_empty() || lingered {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            };
        }
        match h2.poll_accept(cx) {
            Poll::Ready(Some(Ok(taken))) => {
                accepted.push(taken);
                busy = true;
            }
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
            // Every stream's frames are done (after a GOAWAY, say):
            // their tasks may still have work after them.
            Poll::Ready(None) => {
                for (request, respond) in accepted.drain(..) {
                    streams.start(|| stream::serve(layer, peer, request, respond), cx);
                }
                closed = true;
                idle.as_mut()
                    .reset(percore::time::now() + config.linger_timeout);
            }
            // No more for now: the new streams are served, then `h2` is
            // polled again to send what they queued.
            Poll::Pending if !accepted.is_empty() => {
                for (request, respond) in accepted.drain(..) {
                    streams.start(|| stream::serve(layer, peer, request, respond), cx);
                }
            }
            Poll::Pending => return Poll::Pending,
        }
    })
    .await;
    match served {
        // The connection closed with every stream done, as h2 ends it.
        Ok(()) => Ok(()),
        Err(e) => ended(layer, e),
    }
}

/// The end of a connection by an `h2` error: a client that went away or
/// broke the protocol (it got GOAWAY, and is counted) is no error of the
/// server's.
fn ended<S>(layer: &Layer<S>, e: h2::Error) -> stdio::Result<()> {
    if e.is_go_away() && e.is_library() {
        layer.counters.h2_cut();
        layer.counters.h2_goaways.add(1);
    }
    if e.is_io() {
        let e = e
            .into_io()
            .unwrap_or_else(|| stdio::Error::other("h2 I/O error"));
        return match e.kind() {
            stdio::ErrorKind::ConnectionReset
            | stdio::ErrorKind::BrokenPipe
            | stdio::ErrorKind::UnexpectedEof
            | stdio::ErrorKind::NotConnected => Ok(()),
            _ => Err(e),
        };
    }
    tracing::debug!(error = %e, "HTTP/2 connection ended");
    Ok(())
}
