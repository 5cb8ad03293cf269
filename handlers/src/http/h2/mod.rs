//! HTTP/2 for the [`HttpHandler`](super::HttpHandler): one connection's
//! frames are read and written by `percore_http2`'s sans-IO server
//! connection, fed by the connection loop ([`conn`]) from the socket's
//! reads. Each stream's request is served by the same [`Service`] as on
//! HTTP/1, with a [`Request`] and a [`Response`] backed by the stream
//! ([`StreamBody`], [`StreamOut`]).
//!
//! A connection is one task: its frames and all its streams are polled
//! by one future ([`serve`]), so streams are served concurrently on the
//! connection's core with nothing shared across threads. The streams that
//! arrive in one read are all taken before any is served, and their
//! answers leave together, in one write (`streams::Streams` says how a stream
//! that ends at once costs no task of its own).
//!
//! # Memory
//!
//! As the HTTP/1 loop does, an idle connection keeps no buffer: reads
//! are the core's leases, only a partial frame's bytes are copied out
//! (and freed once used), the output buffer is freed once written, and
//! the stream store once empty. What stays is the protocol's small
//! state and its HPACK table, sized by the client's indexing (at most
//! the 4 KiB announced).
//!
//! The connection is HTTP/2 when TLS agreed on `h2` by ALPN, or when a
//! clear-text connection begins with the client's preface (prior
//! knowledge, `h2c`), which the HTTP/1 loop sees in its first read and
//! hands over with the bytes it read ([`is_preface`]).

mod body;
mod conn;
mod connect;
mod flood;
pub(crate) mod io;
mod out;
mod shared;
mod stream;
mod streams;
mod tunnel;

use std::future::Future;
use std::io as stdio;
use std::pin::Pin;

use percore::net::Stream;

use super::layer::Layer;
use super::service::Service;
use super::wire::StopSlot;
pub(crate) use body::StreamBody;
pub(crate) use out::StreamOut;
pub(crate) use tunnel::H2Tunnel;

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
    Box::pin(conn::serve_connection(layer, conn, read, stop))
}
