//! The load generators: in-process clients for every workload, run on the
//! client CPU against a server on the server CPU over 127.0.0.1.
//!
//! What it measures: per iteration, operations and bytes inside a window the
//! client marks after its connections are open and validated (one echo or
//! one HTTP exchange each). Single-connection request/response loops use
//! blocking std sockets (the cheapest client); many-connection loops use one
//! tokio current_thread runtime; the open-loop HTTP client is a busy-polling
//! epoll loop so that send times are kept to the microsecond. What it does
//! not: run clients on more than one CPU, or measure anything over a real
//! network. Every loop stops by itself: at its deadline, at its operation
//! cap, or with an error after `IO_TIMEOUT` of silence.

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::http;
use crate::probe::{Load, Probe};

mod keepalive;
mod open_loop;
pub use keepalive::{
    check_fan_out, fan_out_concurrent, fan_out_single, http_concurrent, http_single,
};
pub use open_loop::open_loop;

/// Silence after which a client gives up on a connection.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Upper bound of operations of any loop in one iteration.
pub const MAX_OPS: u64 = 50_000_000;
/// Upper bound of bytes a throughput loop writes in one iteration.
pub const MAX_BYTES: u64 = 64 << 30;
/// How long an open-loop run waits for outstanding answers after sending.
pub const DRAIN: Duration = Duration::from_secs(2);

fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(s)
}

async fn connect_async(addr: SocketAddr) -> io::Result<tokio::net::TcpStream> {
    let s = tokio::time::timeout(IO_TIMEOUT, tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Runs `f` on a fresh current_thread runtime on the calling thread, giving
/// up after `limit`.
pub fn block_on<F, T>(limit: Duration, f: F) -> io::Result<T>
where
    F: std::future::Future<Output = io::Result<T>>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        tokio::time::timeout(limit, f)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "client gave up (time limit)"))?
    })
}

fn task_error(e: tokio::task::JoinError) -> io::Error {
    io::Error::other(format!("client task failed: {e}"))
}

fn payload(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i % 251) as u8).collect()
}

// ---------------------------------------------------------------- echo ----

/// Ping-pong of `size` bytes on one blocking connection. ops = round trips.
pub fn pingpong(
    addr: SocketAddr,
    size: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    let mut s = connect(addr)?;
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
    addr: SocketAddr,
    conns: usize,
    size: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    block_on(window + IO_TIMEOUT * 2, async {
        let mut streams = Vec::with_capacity(conns);
        for _ in 0..conns {
            let mut s = connect_async(addr).await?;
            let mut b = vec![0u8; size];
            s.write_all(&payload(size)).await?;
            s.read_exact(&mut b).await?;
            streams.push(s);
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
    })
}

/// Unidirectional throughput: the client writes a `chunk`, the server echoes
/// it, the client reads it all back, then the next chunk (write and read
/// overlap within a chunk, so large chunks cannot deadlock). ops = chunks,
/// bytes = chunk bytes sent.
pub fn chunk_roundtrip(
    addr: SocketAddr,
    chunk: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    block_on(window + IO_TIMEOUT * 2, async {
        let mut s = connect_async(addr).await?;
        let out = payload(chunk);
        let mut back = vec![0u8; chunk];
        let (mut r, mut w) = s.split();
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
    })
}

/// Bidirectional throughput on one connection: the client writes `chunk`s
/// without waiting and reads the echo concurrently, until the deadline and
/// then until every written byte came back. bytes = sent + received.
pub fn bidirectional(
    addr: SocketAddr,
    chunk: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    block_on(window + IO_TIMEOUT * 2, async {
        let mut s = connect_async(addr).await?;
        let out = payload(chunk);
        let mut back = vec![0u8; chunk.max(64 * 1024)];
        let (mut r, mut w) = s.split();
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
    })
}

/// Streaming echo on one connection: a writer thread writes `chunk`s as fast
/// as it can while the calling thread reads the echo. bytes = bytes echoed
/// back; the window ends when the last byte written came back.
pub fn streaming(
    addr: SocketAddr,
    chunk: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    let mut s = connect(addr)?;
    let mut w = s.try_clone()?;
    // Short read timeout: the reader polls the writer's "done" flag between reads.
    s.set_read_timeout(Some(Duration::from_millis(20)))?;
    let written = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let out = payload(chunk);
    let mut back = vec![0u8; 64 * 1024];
    probe.start();
    let t0 = Instant::now();
    let deadline = t0 + window;
    let (ops, got, last_read) = std::thread::scope(|scope| {
        let writer = std::thread::Builder::new()
            .name("bench-writer".into())
            .spawn_scoped(scope, || {
                let mut ops = 0u64;
                let r = (|| {
                    while Instant::now() < deadline && written.load(Ordering::Relaxed) < MAX_BYTES {
                        w.write_all(&out)?;
                        written.fetch_add(chunk as u64, Ordering::Release);
                        ops += 1;
                    }
                    Ok::<(), io::Error>(())
                })();
                done.store(true, Ordering::Release);
                r.map(|()| ops)
            })?;
        let mut got = 0u64;
        let mut last_read = t0;
        let mut silent_since = Instant::now();
        let read_result = loop {
            if done.load(Ordering::Acquire) && got >= written.load(Ordering::Acquire) {
                break Ok(());
            }
            match s.read(&mut back) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(0) => {
                    break Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "server closed",
                    ))
                }
                Ok(n) => {
                    got += n as u64;
                    last_read = Instant::now();
                    silent_since = last_read;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if silent_since.elapsed() > IO_TIMEOUT {
                        break Err(io::Error::new(io::ErrorKind::TimedOut, "echo stalled"));
                    }
                }
                Err(e) => break Err(e),
            }
        };
        if read_result.is_err() {
            // Unblock the writer if it is stuck on a full socket.
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        let ops = writer
            .join()
            .map_err(|_| io::Error::other("writer thread panicked"))??;
        read_result.map(|()| (ops, got, last_read))
    })?;
    probe.stop_at(last_read);
    Ok(Load {
        ops,
        bytes: got,
        ..Load::default()
    })
}

// ------------------------------------------------------- accept churn ----

const CHURN_MSG: [u8; 16] = *b"churn-0123456789";

/// Sequential connect, one 16-byte echo, close. ops = connections.
pub fn churn_sequential(
    addr: SocketAddr,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    let mut back = [0u8; 16];
    let mut ops = 0u64;
    probe.start();
    let deadline = Instant::now() + window;
    while ops < MAX_OPS {
        let mut s = connect(addr)?;
        s.write_all(&CHURN_MSG)?;
        s.read_exact(&mut back)?;
        drop(s);
        ops += 1;
        if Instant::now() >= deadline {
            break;
        }
    }
    probe.stop();
    Ok(Load {
        ops,
        ..Load::default()
    })
}

/// Bursts of `burst` concurrent connects (each: one 16-byte echo, close),
/// one burst after the other. ops = connections.
pub fn churn_burst(
    addr: SocketAddr,
    burst: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    block_on(window + IO_TIMEOUT * 2, async {
        let mut ops = 0u64;
        probe.start();
        let deadline = Instant::now() + window;
        while ops < MAX_OPS {
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..burst {
                set.spawn(async move {
                    let mut s = connect_async(addr).await?;
                    let mut back = [0u8; 16];
                    s.write_all(&CHURN_MSG).await?;
                    s.read_exact(&mut back).await?;
                    Ok::<(), io::Error>(())
                });
            }
            while let Some(r) = set.join_next().await {
                r.map_err(task_error)??;
                ops += 1;
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        probe.stop();
        Ok(Load {
            ops,
            ..Load::default()
        })
    })
}
