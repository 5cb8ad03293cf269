//! The HTTP/2 client of the `h2_server` cells: `conns` connections in the
//! clear by prior knowledge, each with `streams` GETs in flight, every
//! answer read to its end.
//!
//! Why the `h2` crate (hyperium's, the one hyper's HTTP/2 is made of) on
//! the client's tokio current_thread runtime, and not raw frames on
//! blocking sockets as the HTTP/1.1 single-connection client has: many
//! streams on few connections need HPACK, flow control (the connection's
//! window is given back as the answers are read) and the server's
//! SETTINGS honoured, which a hand-made client would get subtly wrong; the
//! crate is already built for hyper, and the client's cost falls on the
//! client's CPU, not in the server CPU-seconds the cells compare.
//!
//! What it measures: requests answered 200 in the window, all connections
//! made (and each checked with one GET whose body must be the 20-byte JSON
//! answer) before it opens. What it does not: send bodies, use TLS, or
//! upgrade from HTTP/1.1.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;

use super::{block_on, connect_async, task_error, IO_TIMEOUT, MAX_OPS};
use crate::http;
use crate::probe::{Load, Probe};

fn h2_error(e: h2::Error) -> io::Error {
    if e.is_io() {
        return e
            .into_io()
            .unwrap_or_else(|| io::Error::other("HTTP/2 I/O error"));
    }
    io::Error::other(format!("HTTP/2: {e}"))
}

/// One `GET /` on `send`, its answer read to its end; with `check`, its
/// body must be the 20-byte JSON answer.
async fn get(send: &mut SendRequest<Bytes>, uri: &::http::Uri, check: bool) -> io::Result<()> {
    poll_fn(|cx| send.poll_ready(cx)).await.map_err(h2_error)?;
    let request = ::http::Request::get(uri.clone())
        .body(())
        .map_err(io::Error::other)?;
    let (response, _) = send.send_request(request, true).map_err(h2_error)?;
    let response = response.await.map_err(h2_error)?;
    if response.status() != ::http::StatusCode::OK {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("HTTP/2 answer {}, not 200", response.status()),
        ));
    }
    let mut body = response.into_body();
    let mut seen = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(h2_error)?;
        // Given back at once: the connection's window never closes.
        let _ = body.flow_control().release_capacity(chunk.len());
        if check {
            seen.extend_from_slice(&chunk);
        }
    }
    if check && seen != http::BODY {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "HTTP/2 body is {:?}, not the expected {:?}",
                String::from_utf8_lossy(&seen),
                String::from_utf8_lossy(http::BODY)
            ),
        ));
    }
    Ok(())
}

/// `conns` HTTP/2 connections × `streams` concurrent GET loops each, for
/// `window`. ops = requests answered.
pub fn h2_concurrent(
    addr: SocketAddr,
    conns: usize,
    streams: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    block_on(window + IO_TIMEOUT * 2, async {
        let uri: ::http::Uri = format!("http://{addr}/")
            .parse()
            .map_err(io::Error::other)?;
        let mut senders = Vec::with_capacity(conns);
        let mut drivers = Vec::with_capacity(conns);
        for _ in 0..conns {
            let tcp = connect_async(addr).await?;
            let (mut send, connection) = h2::client::handshake(tcp).await.map_err(h2_error)?;
            drivers.push(tokio::spawn(connection));
            tokio::time::timeout(IO_TIMEOUT, get(&mut send, &uri, true))
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no HTTP/2 answer"))??;
            senders.push(send);
        }
        probe.start();
        let deadline = Instant::now() + window;
        let mut set = tokio::task::JoinSet::new();
        for send in &senders {
            for _ in 0..streams {
                let (mut send, uri) = (send.clone(), uri.clone());
                set.spawn(async move {
                    let mut ops = 0u64;
                    while Instant::now() < deadline && ops < MAX_OPS {
                        get(&mut send, &uri, false).await?;
                        ops += 1;
                    }
                    Ok::<u64, io::Error>(ops)
                });
            }
        }
        let mut ops = 0u64;
        let mut failed = None;
        while let Some(r) = set.join_next().await {
            match r.map_err(task_error).and_then(|r| r) {
                Ok(n) => ops += n,
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        probe.stop();
        drop(senders);
        for d in drivers {
            // With every sender gone the connections end; no need to wait.
            d.abort();
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(Load {
                ops,
                ..Load::default()
            }),
        }
    })
}
