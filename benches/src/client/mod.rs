//! The load generators: in-process clients for every workload, run on the
//! client CPU against a server on the server CPU over 127.0.0.1; the
//! ping-pong and bulk echo clients (`echo`) also over a Unix socket file,
//! the HTTPS ones (`https`) over TLS, the HTTP/2 one (`http2`) with many
//! streams per connection.
//!
//! What it measures: per iteration, operations and bytes inside a window the
//! client marks after its connections are open and validated (one echo or
//! one HTTP exchange each). Single-connection request/response loops use
//! blocking std sockets (the cheapest client); many-connection loops use one
//! tokio current_thread runtime; the open-loop HTTP client is a busy-polling
//! epoll loop so that send times are kept to the microsecond; the TLS
//! handshake load uses a few blocking threads, each making connections one
//! after the other. What it does not: run clients on more than one CPU, or
//! measure anything over a real network. Every loop stops by itself: at its
//! deadline, at its operation cap, or with an error after `IO_TIMEOUT` of
//! silence.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::http;
use crate::probe::{Load, Probe};

mod echo;
mod http2;
mod https;
mod keepalive;
mod open_loop;
pub use echo::{bidirectional, chunk_roundtrip, concurrent_pingpong, pingpong};
pub use http2::h2_concurrent;
pub use https::{fresh_https_get, https_handshakes, https_keepalive};
pub use keepalive::{
    api_concurrent, check_fan_out, fan_out_concurrent, fan_out_single, http_concurrent, http_single,
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

/// A blocking connection to the socket file at `path`. Unix sockets have
/// no Nagle to turn off; the timeouts are as over TCP.
fn connect_unix(path: &Path) -> io::Result<UnixStream> {
    let s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(s)
}

async fn connect_unix_async(path: &Path) -> io::Result<tokio::net::UnixStream> {
    tokio::time::timeout(IO_TIMEOUT, tokio::net::UnixStream::connect(path))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))?
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

// ----------------------------------------------------------- streaming ----

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
