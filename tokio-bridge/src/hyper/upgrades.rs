//! Serving hyper with upgrades (axum's `WebSocketUpgrade`), through a
//! pipe: [`serve_with_upgrades`].
//!
//! hyper hands an upgraded connection's I/O to whoever awaits
//! `hyper::upgrade::on`, boxed as `Send`, and axum awaits it in a task of
//! its own made with `tokio::spawn`: on the tokio runtime's thread, not
//! on the core. A percore stream cannot go there. Its operations belong
//! to its core's ring (or epoll set), and a wrapper that let it be `Send`
//! while checking on each poll that it stays on its thread would only
//! turn that into a panic (or a leak, at a drop elsewhere) at every
//! upgrade. So hyper gets one end of a [`tokio::io::duplex`] pipe, which
//! is `Send` and needs no reactor, and a pump on the core copies bytes
//! between the other end and the percore stream, passing on each
//! direction's end. No `unsafe` is needed: nothing `!Send` leaves the
//! core.
//!
//! The cost: every byte is copied once more each way, through a buffer
//! behind a mutex, and the upgraded protocol's own work (WebSocket
//! framing, the route's code) runs on the tokio runtime's thread, shared
//! by every core. Connections that are never upgraded pay the copy too,
//! which is why this is a choice ([`HyperHandler::with_upgrades`]) and
//! not [`serve`]'s default; percore-handlers' own WebSocket server runs
//! on the core without either cost.
//!
//! [`HyperHandler::with_upgrades`]: super::HyperHandler::with_upgrades
//! [`serve`]: super::serve

use std::future::{poll_fn, Future};
use std::io;
use std::pin::pin;
use std::task::Poll;

use http_body::Body;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use hyper_util::server::conn::auto;
use percore::Connection;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::{client_left, BoxError, Exec};
use crate::Compat;

/// Bytes the pipe holds each way before a writer waits.
const PIPE: usize = 64 * 1024;

/// [`serve`](super::serve), with upgrades: a service that answers 101
/// (axum's `WebSocketUpgrade`) gets the connection, wherever its task
/// runs. See the [module docs](self) for how, and what it costs.
///
/// Needs the `hyper` feature.
///
/// # Errors
///
/// As [`serve`](super::serve).
pub async fn serve_with_upgrades<S, B>(
    conn: Connection,
    builder: &auto::Builder<Exec>,
    service: S,
) -> io::Result<()>
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + 'static,
    S::Future: 'static,
    S::Error: Into<BoxError>,
    B: Body + 'static,
    B::Error: Into<BoxError>,
{
    let (hyper_end, pump_end) = tokio::io::duplex(PIPE);
    let http = async {
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(hyper_end), service);
        let mut conn = pin!(conn);
        let mut stop = pin!(percore::shutdown_signal());
        let mut stopping = false;
        let res = poll_fn(|cx| {
            if !stopping && stop.as_mut().poll(cx).is_ready() {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            conn.as_mut().poll(cx)
        })
        .await;
        match res {
            Ok(()) => Ok(()),
            Err(e) if client_left(&*e) => Ok(()),
            Err(e) => Err(io::Error::other(e)),
        }
    };
    let (served, pumped) = Compat::new(percore::future::join(http, pump(conn, pump_end))).await;
    served?;
    match pumped {
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
            ) =>
        {
            Ok(())
        }
        other => other,
    }
}

/// Copies both ways between `stream` and the pipe's end. The client's
/// end of stream is passed on as a half-close, and the copy the other
/// way goes on; the end of what comes out of the pipe (hyper done with
/// the connection, or the upgraded protocol closing it) is passed on
/// too, and ends the pump, so that a connection hyper has finished with
/// is closed even if its client never closes its side.
async fn pump(stream: Connection, pipe: DuplexStream) -> io::Result<()> {
    let (mut from_pipe, mut to_pipe) = tokio::io::split(pipe);
    let inbound = async {
        while let Some(buf) = stream.read().await? {
            to_pipe.write_all(&buf).await?;
        }
        to_pipe.shutdown().await
    };
    let outbound = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            buf.resize(16 * 1024, 0);
            let n = from_pipe.read(&mut buf).await?;
            if n == 0 {
                return match stream.shutdown_write() {
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
                    res => res,
                };
            }
            buf.truncate(n);
            let (res, back) = stream.write_all(buf).await;
            res?;
            buf = back;
        }
    };
    let (mut inbound, mut outbound) = (pin!(inbound), pin!(outbound));
    let mut client_done = false;
    poll_fn(|cx| {
        if !client_done {
            if let Poll::Ready(res) = inbound.as_mut().poll(cx) {
                res?;
                client_done = true;
            }
        }
        outbound.as_mut().poll(cx)
    })
    .await
}
