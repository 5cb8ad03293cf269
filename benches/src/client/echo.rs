//! The echo clients of `socket_latency`, `socket_throughput` and their
//! Unix-socket twins `local_socket_latency` and `local_socket_throughput`:
//! ping-pong on one connection or many, and bulk echo on one.
//!
//! Each client connects over the transport of its [`Target`], then runs a
//! loop written once over std's or tokio's I/O traits and monomorphised
//! per stream type. So a TCP cell and its Unix twin differ by the socket
//! alone, and the TCP clients run the same code as before the Unix ones
//! existed (their halves are still `TcpStream::split`'s, with no lock).

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{
    block_on, connect, connect_async, connect_unix, connect_unix_async, payload, task_error,
    IO_TIMEOUT, MAX_BYTES, MAX_OPS,
};
use crate::probe::{Load, Probe};
use crate::target::Target;

// ---------------------------------------------------------- ping-pong ----

/// Ping-pong of `size` bytes on one blocking connection. ops = round trips.
pub fn pingpong(
    target: &Target,
    size: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    match target {
        Target::Unix(path) => pingpong_on(connect_unix(path)?, size, window, probe),
        tcp => pingpong_on(connect(tcp.tcp()?)?, size, window, probe),
    }
}

fn pingpong_on<S: Read + Write>(
    mut s: S,
    size: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    let out = payload(size);
    let mut back = vec![0u8; size];
    s.write_all(&out)?;
    s.read_exact(&mut back)?;
    if back != out {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "echo returned other bytes",
        ));
    }
    probe.start();
    let deadline = Instant::now() + window;
    let mut ops = 0u64;
    while ops < MAX_OPS {
        s.write_all(&out)?;
        s.read_exact(&mut back)?;
        ops += 1;
        if Instant::now() >= deadline {
            break;
        }
    }
    probe.stop();
    Ok(Load {
        ops,
        bytes: ops * size as u64,
        ..Load::default()
    })
}

/// `conns` connections, each ping-ponging `size` bytes, multiplexed on one
/// tokio current_thread runtime. ops = round trips over all connections.
pub fn concurrent_pingpong(
    target: &Target,
    conns: usize,
    size: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    block_on(window + IO_TIMEOUT * 2, async {
        match target {
            Target::Unix(path) => {
                let streams = open(conns, || connect_unix_async(path)).await?;
                ping_all(streams, size, window, probe).await
            }
            tcp => {
                let addr = tcp.tcp()?;
                let streams = open(conns, || connect_async(addr)).await?;
                ping_all(streams, size, window, probe).await
            }
        }
    })
}

/// `n` connections made one after the other with `connect`.
async fn open<S, F, C>(n: usize, connect: C) -> io::Result<Vec<S>>
where
    C: Fn() -> F,
    F: std::future::Future<Output = io::Result<S>>,
{
    let mut streams = Vec::with_capacity(n);
    for _ in 0..n {
        streams.push(connect().await?);
    }
    Ok(streams)
}

async fn ping_all<S>(
    mut streams: Vec<S>,
    size: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    for s in &mut streams {
        let mut b = vec![0u8; size];
        s.write_all(&payload(size)).await?;
        s.read_exact(&mut b).await?;
    }
    probe.start();
    let deadline = Instant::now() + window;
    let mut set = tokio::task::JoinSet::new();
    for mut s in streams {
        set.spawn(async move {
            let out = payload(size);
            let mut back = vec![0u8; size];
            let mut ops = 0u64;
            while ops < MAX_OPS {
                s.write_all(&out).await?;
                s.read_exact(&mut back).await?;
                ops += 1;
                if Instant::now() >= deadline {
                    break;
                }
            }
            Ok::<u64, io::Error>(ops)
        });
    }
    let mut ops = 0;
    while let Some(r) = set.join_next().await {
        ops += r.map_err(task_error)??;
    }
    probe.stop();
    Ok(Load {
        ops,
        bytes: ops * size as u64,
        ..Load::default()
    })
}

// --------------------------------------------------------------- bulk ----

/// Unidirectional throughput: the client writes a `chunk`, the server echoes
/// it, the client reads it all back, then the next chunk (write and read
/// overlap within a chunk, so large chunks cannot deadlock). ops = chunks,
/// bytes = chunk bytes sent.
pub fn chunk_roundtrip(
    target: &Target,
    chunk: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    block_on(window + IO_TIMEOUT * 2, async {
        match target {
            Target::Unix(path) => {
                let mut s = connect_unix_async(path).await?;
                let (r, w) = s.split();
                lockstep(r, w, chunk, window, probe).await
            }
            tcp => {
                let mut s = connect_async(tcp.tcp()?).await?;
                let (r, w) = s.split();
                lockstep(r, w, chunk, window, probe).await
            }
        }
    })
}

async fn lockstep<R, W>(
    mut r: R,
    mut w: W,
    chunk: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let out = payload(chunk);
    let mut back = vec![0u8; chunk];
    let mut ops = 0u64;
    probe.start();
    let deadline = Instant::now() + window;
    while ops < MAX_OPS && ops * (chunk as u64) < MAX_BYTES {
        let (a, b) = tokio::join!(w.write_all(&out), r.read_exact(&mut back));
        a?;
        b?;
        ops += 1;
        if Instant::now() >= deadline {
            break;
        }
    }
    probe.stop();
    Ok(Load {
        ops,
        bytes: ops * chunk as u64,
        ..Load::default()
    })
}

/// Bidirectional throughput on one connection: the client writes `chunk`s
/// without waiting and reads the echo concurrently, until the deadline and
/// then until every written byte came back. bytes = sent + received.
pub fn bidirectional(
    target: &Target,
    chunk: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    block_on(window + IO_TIMEOUT * 2, async {
        match target {
            Target::Unix(path) => {
                let mut s = connect_unix_async(path).await?;
                let (r, w) = s.split();
                both_ways(r, w, chunk, window, probe).await
            }
            tcp => {
                let mut s = connect_async(tcp.tcp()?).await?;
                let (r, w) = s.split();
                both_ways(r, w, chunk, window, probe).await
            }
        }
    })
}

async fn both_ways<R, W>(
    mut r: R,
    mut w: W,
    chunk: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let out = payload(chunk);
    let mut back = vec![0u8; chunk.max(64 * 1024)];
    let written = Cell::new(0u64);
    let done = Cell::new(false);
    let mut last_read = Instant::now();
    probe.start();
    let deadline = Instant::now() + window;
    let writer = async {
        let mut ops = 0u64;
        while Instant::now() < deadline && written.get() < MAX_BYTES {
            w.write_all(&out).await?;
            written.set(written.get() + chunk as u64);
            ops += 1;
        }
        done.set(true);
        Ok::<u64, io::Error>(ops)
    };
    let reader = async {
        let mut got = 0u64;
        while !(done.get() && got >= written.get()) {
            let n = tokio::time::timeout(IO_TIMEOUT, r.read(&mut back))
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "echo stalled"))??;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "server closed",
                ));
            }
            got += n as u64;
            last_read = Instant::now();
        }
        Ok::<u64, io::Error>(got)
    };
    let (ops, got) = tokio::join!(writer, reader);
    let (ops, got) = (ops?, got?);
    probe.stop_at(last_read);
    Ok(Load {
        ops,
        bytes: written.get() + got,
        ..Load::default()
    })
}
