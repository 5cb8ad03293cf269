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
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::http;
use crate::probe::{Load, Probe};

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

// ---------------------------------------------------------------- HTTP ----

/// `read`, retried on EINTR (std's `read_exact`/`write_all` already do).
fn read_retrying<R: Read>(s: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match s.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            r => return r,
        }
    }
}

/// Reads one framed response into `buf[..*filled]` and removes it.
fn read_response<R: Read>(s: &mut R, buf: &mut [u8], filled: &mut usize) -> io::Result<usize> {
    loop {
        if let Some(len) = http::frame_response(&buf[..*filled])? {
            buf.copy_within(len..*filled, 0);
            *filled -= len;
            return Ok(len);
        }
        if *filled == buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "HTTP response too large",
            ));
        }
        let n = read_retrying(s, &mut buf[*filled..])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "server closed",
            ));
        }
        *filled += n;
    }
}

async fn read_response_async(
    s: &mut tokio::net::TcpStream,
    buf: &mut [u8],
    filled: &mut usize,
) -> io::Result<usize> {
    loop {
        if let Some(len) = http::frame_response(&buf[..*filled])? {
            buf.copy_within(len..*filled, 0);
            *filled -= len;
            return Ok(len);
        }
        if *filled == buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "HTTP response too large",
            ));
        }
        let n = s.read(&mut buf[*filled..]).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "server closed",
            ));
        }
        *filled += n;
    }
}

/// Room for one response: a fan-out answer of width 64 is about 6 KiB.
const RESPONSE_BUF: usize = 64 * 1024;

fn check_body(response: &[u8]) -> io::Result<()> {
    if response.ends_with(http::BODY) {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "HTTP body is not the expected JSON",
        ))
    }
}

/// One exchange whose response `check` accepts, before the measured window.
async fn validate_async_with(
    s: &mut tokio::net::TcpStream,
    check: &dyn Fn(&[u8]) -> io::Result<()>,
) -> io::Result<()> {
    s.write_all(http::REQUEST).await?;
    let mut buf = vec![0u8; RESPONSE_BUF];
    let mut filled = 0;
    loop {
        let n = tokio::time::timeout(IO_TIMEOUT, s.read(&mut buf[filled..]))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no HTTP answer"))??;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "server closed",
            ));
        }
        filled += n;
        if let Some(len) = http::frame_response(&buf[..filled])? {
            return check(&buf[..len]);
        }
        if filled == buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "HTTP response too large",
            ));
        }
    }
}

/// One exchange that checks the body, before the measured window.
fn http_validate(s: &mut TcpStream) -> io::Result<()> {
    validate_with(s, &check_body)
}

/// One exchange whose response `check` accepts, before the measured window.
fn validate_with(s: &mut TcpStream, check: &dyn Fn(&[u8]) -> io::Result<()>) -> io::Result<()> {
    s.write_all(http::REQUEST)?;
    let mut buf = vec![0u8; RESPONSE_BUF];
    let mut filled = 0;
    loop {
        let n = read_retrying(s, &mut buf[filled..])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "server closed",
            ));
        }
        filled += n;
        if let Some(len) = http::frame_response(&buf[..filled])? {
            return check(&buf[..len]);
        }
        if filled == buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "HTTP response too large",
            ));
        }
    }
}

/// Adds how many requests the connection had served to an error.
fn after_requests(e: io::Error, ops: u64) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("{e} (after {ops} requests on the connection)"),
    )
}

/// Keep-alive GETs on one blocking connection, one at a time. ops = requests.
pub fn http_single(addr: SocketAddr, window: Duration, probe: &mut Probe<'_>) -> io::Result<Load> {
    single_loop(addr, &check_body, window, probe)
}

/// Keep-alive GETs on one blocking connection, one at a time, after one
/// exchange `check` accepts. ops = requests.
fn single_loop(
    addr: SocketAddr,
    check: &dyn Fn(&[u8]) -> io::Result<()>,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    let mut s = connect(addr)?;
    validate_with(&mut s, check)?;
    let mut buf = vec![0u8; RESPONSE_BUF];
    let mut filled = 0;
    let mut ops = 0u64;
    probe.start();
    let deadline = Instant::now() + window;
    while ops < MAX_OPS {
        s.write_all(http::REQUEST)
            .map_err(|e| after_requests(e, ops))?;
        read_response(&mut s, &mut buf, &mut filled).map_err(|e| after_requests(e, ops))?;
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

/// `conns` keep-alive connections on one tokio current_thread runtime, each
/// with one request in flight (closed loop). ops = requests.
pub fn http_concurrent(
    addr: SocketAddr,
    conns: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    concurrent_loop(addr, conns, &check_body, window, probe)
}

/// `conns` keep-alive connections on one tokio current_thread runtime, each
/// validated with `check` and then with one request in flight (closed
/// loop). ops = requests.
fn concurrent_loop(
    addr: SocketAddr,
    conns: usize,
    check: &dyn Fn(&[u8]) -> io::Result<()>,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    block_on(
        window + IO_TIMEOUT * 2 + Duration::from_millis(conns as u64 * 5),
        async {
            let mut streams = Vec::with_capacity(conns);
            for _ in 0..conns {
                let mut s = connect_async(addr).await?;
                validate_async_with(&mut s, check).await?;
                streams.push((s, vec![0u8; RESPONSE_BUF]));
            }
            probe.start();
            let deadline = Instant::now() + window;
            let mut set = tokio::task::JoinSet::new();
            for (mut s, mut buf) in streams {
                set.spawn(async move {
                    let mut filled = 0;
                    let mut ops = 0u64;
                    while ops < MAX_OPS {
                        s.write_all(http::REQUEST)
                            .await
                            .map_err(|e| after_requests(e, ops))?;
                        read_response_async(&mut s, &mut buf, &mut filled)
                            .await
                            .map_err(|e| after_requests(e, ops))?;
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
                ..Load::default()
            })
        },
    )
}

// ------------------------------------------------------------ fan-out ----

/// Whether `response` is a fan-out proxy's 200 with a JSON array of
/// exactly `width` entries, each the upstream's 20-byte JSON body.
pub fn check_fan_out(response: &[u8], width: usize) -> io::Result<()> {
    let bad = |why: String| Err(io::Error::new(io::ErrorKind::InvalidData, why));
    let Some(head) = http::header_end(response) else {
        return bad("fan-out response without a head".into());
    };
    let body = &response[head..];
    if !(body.starts_with(b"[") && body.ends_with(b"]")) {
        return bad(format!(
            "fan-out body is not a JSON array: {:?}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        ));
    }
    let count = |needle: &[u8]| body.windows(needle.len()).filter(|w| *w == needle).count();
    let entries = count(b"{\"upstream\":");
    let answers = count(br#""status":200,"#);
    let bodies = count(br#""body":"{\"message\":\"Hello!\"}""#);
    if entries != width || answers != width || bodies != width {
        return bad(format!(
            "fan-out body has {entries} entries, {answers} with status 200, {bodies} with the \
             upstream body; expected {width}"
        ));
    }
    Ok(())
}

/// Keep-alive GETs through a fan-out proxy of `width` on one blocking
/// connection, one at a time; the first answer is checked entry by entry,
/// later ones for status 200 and framing. ops = front requests.
pub fn fan_out_single(
    addr: SocketAddr,
    width: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    single_loop(addr, &|r| check_fan_out(r, width), window, probe)
}

/// `conns` keep-alive connections to a fan-out proxy of `width`, each with
/// one request in flight (closed loop), so `conns` fan-outs are in flight
/// at once. ops = front requests.
pub fn fan_out_concurrent(
    addr: SocketAddr,
    conns: usize,
    width: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    concurrent_loop(addr, conns, &|r| check_fan_out(r, width), window, probe)
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

// ---------------------------------------------------------- open loop ----

struct Epoll(RawFd);

impl Epoll {
    fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 has no memory-safety preconditions.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(Epoll(fd))
        }
    }

    fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: both fds are open and `ev` is a valid epoll_event.
        if unsafe { libc::epoll_ctl(self.0, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Ready tokens, without blocking.
    fn poll(&self, events: &mut [libc::epoll_event]) -> io::Result<usize> {
        // SAFETY: `events` is a valid, writable buffer of the length passed.
        let n = unsafe { libc::epoll_wait(self.0, events.as_mut_ptr(), events.len() as i32, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(n as usize)
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: the fd is owned by this value and closed once.
        unsafe { libc::close(self.0) };
    }
}

struct OpenConn {
    stream: TcpStream,
    next_send: Instant,
    intended: Option<Instant>,
    buf: [u8; 4096],
    filled: usize,
}

/// Open-loop HTTP at a fixed `rate` (requests/s) over `conns` keep-alive
/// connections, wrk2-style: every request has an intended send time on a
/// per-connection schedule and its latency is measured from that time, so a
/// stalled server is charged for the requests it delayed (no coordinated
/// omission). One request in flight per connection. The client busy-polls
/// epoll on its own CPU. ops = answered requests; `errors` = requests still
/// unanswered `DRAIN` after the last send.
pub fn open_loop(
    addr: SocketAddr,
    conns: usize,
    rate: f64,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    let ep = Epoll::new()?;
    let mut cs = Vec::with_capacity(conns);
    for i in 0..conns {
        let mut s = connect(addr)?;
        http_validate(&mut s)?;
        s.set_nonblocking(true)?;
        ep.add(s.as_raw_fd(), i as u64)?;
        cs.push(OpenConn {
            stream: s,
            next_send: Instant::now(),
            intended: None,
            buf: [0u8; 4096],
            filled: 0,
        });
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1_000, 60_000_000_000, 3)
        .map_err(|e| io::Error::other(format!("histogram: {e}")))?;
    let period = Duration::from_secs_f64(conns as f64 / rate);
    let stagger = Duration::from_secs_f64(1.0 / rate);
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
    let mut in_flight = 0usize;
    let mut ops = 0u64;
    let mut errors = 0u64;

    probe.start();
    let t0 = Instant::now();
    let end = t0 + window;
    let hard_end = end + DRAIN;
    for (i, c) in cs.iter_mut().enumerate() {
        c.next_send = t0 + stagger * i as u32;
    }
    loop {
        let now = Instant::now();
        if now >= end && in_flight == 0 {
            break;
        }
        if now >= hard_end {
            // Unanswered: charge them the time waited so far and count them.
            for c in cs.iter().filter(|c| c.intended.is_some()) {
                if let Some(t) = c.intended {
                    hist.saturating_record(now.duration_since(t).as_nanos() as u64);
                }
            }
            errors = in_flight as u64;
            break;
        }
        for c in cs.iter_mut() {
            if c.intended.is_none() && c.next_send <= now && c.next_send < end {
                match c.stream.write(http::REQUEST) {
                    Ok(n) if n == http::REQUEST.len() => {
                        c.intended = Some(c.next_send);
                        c.next_send += period;
                        in_flight += 1;
                    }
                    Ok(_) => return Err(io::Error::other("partial request write")),
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                        ) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let n = ep.poll(&mut events)?;
        for ev in &events[..n] {
            let c = &mut cs[ev.u64 as usize];
            loop {
                match c.stream.read(&mut c.buf[c.filled..]) {
                    Ok(0) => {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "server closed",
                        ))
                    }
                    Ok(k) => c.filled += k,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
                if c.filled == c.buf.len() {
                    break;
                }
            }
            while let Some(len) = http::frame_response(&c.buf[..c.filled])? {
                let at = Instant::now();
                let Some(t) = c.intended.take() else {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "unsolicited HTTP response",
                    ));
                };
                hist.saturating_record(at.duration_since(t).as_nanos() as u64);
                in_flight -= 1;
                ops += 1;
                c.buf.copy_within(len..c.filled, 0);
                c.filled -= len;
            }
        }
    }
    probe.stop();
    Ok(Load {
        ops,
        bytes: 0,
        latency_ns: Some(hist),
        errors,
    })
}
