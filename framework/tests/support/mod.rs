//! Helpers shared by percore's integration tests.
//!
//! - [`backend_tests!`] stamps each test out once per backend (tokio's
//!   `rt_test!` pattern): a test written as `fn name(backend: Backend)`
//!   becomes `uring::name` and `epoll::name`. The uring variant prints
//!   `skipped: <reason>` and returns when io_uring is unavailable here.
//! - Every stamped test holds [`serial`] while it runs: tests count the
//!   process's fds, RSS and CPU time, which tests running alongside in the
//!   same process would disturb (and the machine has two cores anyway).
//! - Clients are blocking `std::net` sockets with read and write timeouts:
//!   a timeout is a failure guard, never a way to wait for the server.
//!
//! The echo tests of `percore-handlers` include this file through their own
//! `tests/support/mod.rs` and add stream and child-process helpers.
//! `counting_alloc.rs` beside it is not part of this module: it installs a
//! global allocator, so only the allocation tests include it (by path, the
//! handlers' too).
#![allow(dead_code, unreachable_pub)] // each test binary uses a subset

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

mod flood;
mod netns;
mod streams;
#[allow(unused_imports)] // not every test binary uses every helper
pub use flood::{flood, Outcomes, FLOOD_BATCH};
#[allow(unused_imports)]
pub use netns::private_network;
#[allow(unused_imports)]
pub use streams::{within_polls, Progress, Streams};

pub use percore::{Backend, Server, ServerBuilder, ServerHandle, StatsSnapshot};

/// Sends every read straight back and half-closes at the client's end of
/// stream: the framework's tests cannot use `percore-handlers`' echo.
pub struct PlainEcho;

impl percore::Handler for PlainEcho {
    async fn serve(&self, conn: percore::Connection) -> std::io::Result<()> {
        while let Some(buf) = conn.read().await? {
            let (res, _) = conn.write_all(buf).await;
            res?;
        }
        conn.shutdown_write()
    }
}

/// Guard against a hung test: every client socket operation times out
/// after this long, which fails the test with a message instead. A hang
/// detector only, never a verdict: a minute, so that a reply slowed by a
/// loaded machine still arrives.
pub const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// Writes each test once and stamps it out per backend, into modules
/// `uring` and `epoll`.
///
/// ```ignore
/// backend_tests! {
///     /// Doc comment.
///     fn echoes(backend) { ... }
/// }
/// ```
#[allow(unused_macros)] // not every test binary stamps tests
macro_rules! backend_tests {
    ($($(#[$meta:meta])* fn $name:ident($backend:ident) $body:block)+) => {
        $(
            $(#[$meta])*
            fn $name($backend: $crate::support::Backend) $body
        )+

        mod uring {
            $(
                #[test]
                fn $name() {
                    let _serial = $crate::support::serial();
                    if let Some(backend) = $crate::support::require($crate::support::Backend::Uring) {
                        super::$name(backend);
                    }
                }
            )+
        }

        mod epoll {
            $(
                #[test]
                fn $name() {
                    let _serial = $crate::support::serial();
                    if let Some(backend) = $crate::support::require($crate::support::Backend::Epoll) {
                        super::$name(backend);
                    }
                }
            )+
        }
    };
}

/// One test at a time per test binary (see the module docs).
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    // A failed test poisons the lock; the next test still runs.
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// `Some(backend)` when the test can run on `backend` here; otherwise
/// prints `skipped: <reason>` and returns `None`.
pub fn require(backend: Backend) -> Option<Backend> {
    if let Ok(forced) = std::env::var("PERCORE_BACKEND") {
        if forced.parse::<Backend>().ok() != Some(backend) {
            println!("skipped: PERCORE_BACKEND={forced} overrides the {backend} backend");
            return None;
        }
    }
    if backend == Backend::Uring {
        if let Some(reason) = uring_unavailable() {
            println!("skipped: io_uring unavailable: {reason}");
            return None;
        }
    }
    Some(backend)
}

/// Why io_uring cannot be used in this process, if it cannot: a
/// `block_on` core is built with the real ring the servers use.
///
/// The probe runs on a thread of its own: after a thread's ring is torn
/// down, the kernel's deferred clean-up can interrupt one later blocking
/// syscall of that thread with `EINTR`, which would surprise a test's
/// blocking client reads.
pub fn uring_unavailable() -> Option<String> {
    static REASON: OnceLock<Option<String>> = OnceLock::new();
    REASON
        .get_or_init(|| {
            std::thread::spawn(|| {
                match percore::block_on(Backend::Uring, async { percore::current_backend() }) {
                    Ok(Backend::Uring) => None,
                    Ok(other) => Some(format!("the runtime chose {other}")),
                    Err(e) => Some(e.to_string()),
                }
            })
            .join()
            .unwrap_or_else(|_| Some("the io_uring probe panicked".to_owned()))
        })
        .clone()
}

/// The CPU the test servers run on: the first this process may use.
pub fn server_cpu() -> usize {
    percore::runtime::cpus::available()[0]
}

/// A builder for a one-core test server on `127.0.0.1:0`.
pub fn builder(backend: Backend) -> ServerBuilder {
    Server::builder()
        .address(SocketAddr::from(([127, 0, 0, 1], 0)))
        .cores([server_cpu()])
        .backend(backend)
        .drain_timeout(Duration::from_secs(5))
}

/// Checks that a started server really runs `backend`.
pub fn check_backend(handle: &ServerHandle, backend: Backend) {
    assert_eq!(
        handle.backend(),
        backend,
        "the server runs another backend than asked"
    );
    for core in handle.stats() {
        assert!(
            core.backend == backend || core.backend == Backend::Auto,
            "core {} runs {}",
            core.cpu,
            core.backend
        );
    }
}

/// Operations in flight on an idle one-core server: the listener's accept
/// on io_uring, nothing on epoll (nothing is ever in flight there).
pub fn idle_in_flight(backend: Backend) -> u64 {
    u64::from(backend == Backend::Uring)
}

/// The sum of one counter over every core.
pub fn sum(stats: &[StatsSnapshot], field: impl Fn(&StatsSnapshot) -> u64) -> u64 {
    stats.iter().map(field).sum()
}

/// Polls `cond` (every 2 ms) until it holds; panics with `what` and the
/// last observation after `limit`. For state that has no notification
/// (counters, fd tables), not as a way to wait for a reply.
pub fn wait_until<T: std::fmt::Debug>(
    limit: Duration,
    what: &str,
    mut observe: impl FnMut() -> T,
    cond: impl Fn(&T) -> bool,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let seen = observe();
        if cond(&seen) {
            return seen;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {limit:?} waiting for {what}; last seen: {seen:?}");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A blocking client connection with [`IO_TIMEOUT`] on reads and writes.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .expect("set_read_timeout");
    stream
        .set_write_timeout(Some(IO_TIMEOUT))
        .expect("set_write_timeout");
    stream.set_nodelay(true).expect("set_nodelay");
    stream
}

/// Writes `msg` and reads exactly as many bytes back; they must match.
pub fn roundtrip(stream: &mut TcpStream, msg: &[u8]) {
    stream
        .write_all(msg)
        .unwrap_or_else(|e| panic!("write: {e}"));
    let mut back = vec![0u8; msg.len()];
    stream
        .read_exact(&mut back)
        .unwrap_or_else(|e| panic!("read echo of {} bytes: {e}", msg.len()));
    assert_eq!(back, msg, "echo differs from what was sent");
}

/// A new connection echoes one message.
pub fn ping(addr: SocketAddr) {
    let mut stream = connect(addr);
    roundtrip(&mut stream, b"ping: is the server still serving?");
}

/// Reads until end of stream; returns what came. A reset counts as the
/// end too (returned as `Err` with the bytes so far).
pub fn read_to_end(stream: &mut TcpStream) -> Result<Vec<u8>, (Vec<u8>, std::io::Error)> {
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err((out, e)),
        }
    }
}

/// Makes `close` send a reset (`SO_LINGER` 0), then closes.
pub fn reset(stream: TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket fd and a correctly sized `linger` value.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "SO_LINGER: {}", std::io::Error::last_os_error());
    drop(stream);
}

/// Open file descriptors of this process.
pub fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

/// Waits up to `limit` for the fd count to drop to `baseline`; returns
/// the last count (the caller asserts, with [`fd_table`] in the message).
pub fn settle_fds(baseline: usize, limit: Duration) -> usize {
    let deadline = Instant::now() + limit;
    loop {
        let n = fd_count();
        if n <= baseline || Instant::now() >= deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The open fds of this process, as `fd -> target`, for leak messages.
pub fn fd_table() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|e| e.ok())
        .map(|e| {
            let target = std::fs::read_link(e.path())
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            format!("{}->{}", e.file_name().to_string_lossy(), target)
        })
        .collect();
    out.sort();
    out
}

/// `VmRSS` of process `pid` (`"self"` for this one), in KiB.
pub fn vm_rss_kib(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line")
}

/// User + system CPU time of `/proc/<path>/stat` (a process or a task), in
/// clock ticks (10 ms on Linux).
pub fn cpu_ticks(path: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{path}/stat"))
        .unwrap_or_else(|e| panic!("/proc/{path}/stat: {e}"));
    // Fields after the command name (which may contain spaces) start at
    // field 3 (state); utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').expect("stat has a command name") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

/// CPU ticks (10 ms) used so far by the core thread pinned to `cpu` (the
/// thread named `percore-<cpu>`) of a server in this process.
pub fn core_thread_ticks(cpu: usize) -> u64 {
    let name = format!("percore-{cpu}");
    let task = std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .flatten()
        .find(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .unwrap_or_default()
                .trim()
                == name
        })
        .unwrap_or_else(|| panic!("no thread named {name}"));
    cpu_ticks(&format!("self/task/{}", task.file_name().to_string_lossy()))
}

/// A small, fast, seedable generator (xorshift64*): no dependency, and the
/// same seed gives the same bytes on the sending and the checking side.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }

    pub fn fill(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// 4 MiB of random bytes, made once per process. Each connection of a
/// stream test sends its own window of it (a distinct offset), so bytes
/// that cross from one connection to another are caught.
pub fn random_pool() -> &'static [u8] {
    static POOL: OnceLock<Vec<u8>> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut pool = vec![0u8; 4 << 20];
        Rng::new(0x5EED).fill(&mut pool);
        pool
    })
}

/// Connection `id`'s `len` bytes of [`random_pool`].
pub fn pattern(id: usize, len: usize) -> &'static [u8] {
    let pool = random_pool();
    assert!(len <= pool.len() / 2, "pattern too long");
    let off = (id * 5003) % (pool.len() - len);
    &pool[off..off + len]
}

/// A random deadline for a race: a number of polls (0–699) or a timer of
/// 0–2 ms.
#[derive(Debug, Clone, Copy)]
pub enum Deadline {
    Polls(usize),
    Timer(Duration),
}

impl Deadline {
    pub fn random(rng: &mut Rng) -> Deadline {
        if rng.between(0, 3) == 0 {
            Deadline::Timer(Duration::from_micros(rng.between(0, 2000) as u64))
        } else {
            Deadline::Polls(rng.between(0, 699))
        }
    }

    /// Runs `fut` until it finishes (`Some`) or the deadline passes
    /// (`None`, and `fut` is dropped with its operation in flight).
    pub async fn race<F: std::future::Future>(self, fut: F) -> Option<F::Output> {
        match self {
            Deadline::Polls(n) => within_polls(n, fut).await,
            Deadline::Timer(d) => percore::time::timeout(d, fut).await.ok(),
        }
    }
}

/// Runs two futures concurrently on the current task; both outputs.
pub async fn join2<A: std::future::Future, B: std::future::Future>(
    a: A,
    b: B,
) -> (A::Output, B::Output) {
    let (mut a, mut b) = (std::pin::pin!(a), std::pin::pin!(b));
    let (mut ra, mut rb) = (None, None);
    std::future::poll_fn(|cx| {
        if ra.is_none() {
            if let std::task::Poll::Ready(v) = a.as_mut().poll(cx) {
                ra = Some(v);
            }
        }
        if rb.is_none() {
            if let std::task::Poll::Ready(v) = b.as_mut().poll(cx) {
                rb = Some(v);
            }
        }
        if ra.is_some() && rb.is_some() {
            std::task::Poll::Ready((ra.take().expect("set"), rb.take().expect("set")))
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}

/// Keeps the panics a test provokes (their message says "told to panic")
/// out of the output; any other panic is reported as usual.
pub fn quiet_expected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let expected = info
                .payload()
                .downcast_ref::<&str>()
                .is_some_and(|m| m.contains("told to panic"));
            if !expected {
                default(info);
            }
        }));
    });
}
