//! Helpers for the HTTP server-layer tests: the per-backend macro, a test
//! server that stops itself, and a raw-bytes HTTP/1.1 client.
//!
//! Included by each `http_*.rs` test file as
//! `#[path = "support/http.rs"] mod common;` (the echo tests own
//! `support/mod.rs`; this file does not depend on it).
//!
//! - [`http_tests!`] writes a test once as `fn name(backend) { .. }` and
//!   stamps it out as `uring::name` and `epoll::name`. The uring variant
//!   prints `skipped: <reason>` and returns when io_uring is unavailable.
//! - Clients are blocking `std::net` sockets with read timeouts: a timeout
//!   only guards against a hung test, it never synchronises.
#![allow(dead_code, unused_imports, unreachable_pub)] // each test binary uses a subset

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use percore::{Backend, Server, ServerHandle, StatsSnapshot};
pub use percore_handlers::http::{
    Config, HttpEcho, HttpHandler, HttpStats, HttpStatsReader, Request, Response, Service, HELLO,
};

/// Every client read and write fails after this long instead of hanging:
/// a hang detector, never a verdict, so a minute.
pub const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// Writes each test once and stamps it out per backend.
///
/// ```ignore
/// http_tests! {
///     /// Doc comment.
///     fn answers_get(backend) { ... }
/// }
/// ```
macro_rules! http_tests {
    ($($(#[$meta:meta])* fn $name:ident($backend:ident) $body:block)+) => {
        $(
            $(#[$meta])*
            fn $name($backend: $crate::common::Backend) $body
        )+

        mod uring {
            $(
                #[test]
                fn $name() {
                    if let Some(b) = $crate::common::require($crate::common::Backend::Uring) {
                        super::$name(b);
                    }
                }
            )+
        }

        mod epoll {
            $(
                #[test]
                fn $name() {
                    if let Some(b) = $crate::common::require($crate::common::Backend::Epoll) {
                        super::$name(b);
                    }
                }
            )+
        }
    };
}

/// `Some(backend)` when tests can run on it here; else prints
/// `skipped: <reason>` and returns `None`.
pub fn require(backend: Backend) -> Option<Backend> {
    if let Ok(forced) = std::env::var("PERCORE_BACKEND") {
        if forced.parse::<Backend>().ok() != Some(backend) {
            println!("skipped: PERCORE_BACKEND={forced} overrides the {backend} backend");
            return None;
        }
    }
    if backend == Backend::Uring {
        static REASON: OnceLock<Option<String>> = OnceLock::new();
        // On a thread of its own, so the ring's teardown cannot interrupt a
        // later blocking read of the test thread with EINTR.
        let reason = REASON.get_or_init(|| {
            std::thread::spawn(|| {
                match percore::block_on(Backend::Uring, async { percore::current_backend() }) {
                    Ok(Backend::Uring) => None,
                    Ok(other) => Some(format!("the runtime chose {other}")),
                    Err(e) => Some(e.to_string()),
                }
            })
            .join()
            .unwrap_or_else(|_| Some("the io_uring probe panicked".to_owned()))
        });
        if let Some(reason) = reason {
            println!("skipped: io_uring unavailable: {reason}");
            return None;
        }
    }
    Some(backend)
}

/// Test timeouts short enough to observe, long enough for a loaded VM.
pub fn short_config() -> Config {
    let mut c = Config::default();
    c.head_timeout = Duration::from_millis(800);
    c.body_timeout = Duration::from_millis(800);
    c.idle_timeout = Duration::from_millis(500);
    c.write_timeout = Duration::from_millis(500);
    c.linger_timeout = Duration::from_millis(500);
    c
}

/// A one-core server on `127.0.0.1:0`, stopped when dropped.
pub struct TestServer {
    handle: Option<ServerHandle>,
    pub addr: SocketAddr,
    /// The core's HTTP counters, registered by the factory.
    http: Arc<Mutex<Option<HttpStatsReader>>>,
}

impl TestServer {
    /// Serves [`HttpEcho`] with the default config.
    pub fn echo(backend: Backend) -> TestServer {
        Self::start(backend, Config::default(), || HttpEcho)
    }

    /// Serves [`HttpEcho`] with `config`.
    pub fn echo_with(backend: Backend, config: Config) -> TestServer {
        Self::start(backend, config, || HttpEcho)
    }

    /// Serves the service `make` builds (once per core).
    pub fn start<S, F>(backend: Backend, config: Config, make: F) -> TestServer
    where
        S: Service,
        F: Fn() -> S + Send + Sync + 'static,
    {
        Self::start_with_stats(backend, config, move |_| make())
    }

    /// Serves [`HttpEcho`] with `config` and a drain deadline of `drain`
    /// (2 s otherwise), for tests that tell the drain's end from another.
    pub fn echo_with_drain(backend: Backend, config: Config, drain: Duration) -> TestServer {
        Self::start_draining(backend, config, drain, |_| HttpEcho)
    }

    /// Serves the service `make` builds (once per core) from a reader of
    /// its handler's counters.
    pub fn start_with_stats<S, F>(backend: Backend, config: Config, make: F) -> TestServer
    where
        S: Service,
        F: Fn(HttpStatsReader) -> S + Send + Sync + 'static,
    {
        Self::start_draining(backend, config, Duration::from_secs(2), make)
    }

    /// [`TestServer::start_with_stats`] with a drain deadline of `drain`.
    pub fn start_draining<S, F>(
        backend: Backend,
        config: Config,
        drain: Duration,
        make: F,
    ) -> TestServer
    where
        S: Service,
        F: Fn(HttpStatsReader) -> S + Send + Sync + 'static,
    {
        let cpu = percore::runtime::cpus::available()
            .first()
            .copied()
            .unwrap_or(0);
        let http = Arc::new(Mutex::new(None));
        let registry = http.clone();
        let handle = Server::builder()
            .address(SocketAddr::from(([127, 0, 0, 1], 0)))
            .cores([cpu])
            .backend(backend)
            .drain_timeout(drain)
            .start(move |_core| {
                let handler = HttpHandler::with_stats(config, &make);
                *registry.lock().unwrap() = Some(handler.stats_reader());
                handler
            })
            .unwrap_or_else(|e| panic!("start a {backend} server: {e}"));
        assert_eq!(
            handle.backend(),
            backend,
            "the server runs the backend asked for"
        );
        let addr = handle.local_addr();
        TestServer {
            handle: Some(handle),
            addr,
            http,
        }
    }

    /// The core's HTTP counters now.
    pub fn http_stats(&self) -> HttpStats {
        let reader = self.http.lock().unwrap();
        reader.as_ref().expect("registered at start").snapshot()
    }

    /// The core's counters now.
    pub fn stats(&self) -> StatsSnapshot {
        let handle = self.handle.as_ref().expect("server running");
        handle.stats().remove(0)
    }

    /// Begins the graceful stop without waiting for it.
    pub fn begin_stop(&self) {
        if let Some(handle) = &self.handle {
            handle.shutdown();
        }
    }

    /// Begins the graceful stop and returns how long the server took to
    /// finish, or `None` if it did not within `limit`.
    pub fn stop_within(&mut self, limit: Duration) -> Option<Duration> {
        let handle = self.handle.take()?;
        let started = Instant::now();
        handle.shutdown();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(handle.join());
        });
        match rx.recv_timeout(limit) {
            Ok(result) => {
                result.expect("server cores ended cleanly");
                Some(started.elapsed())
            }
            Err(_) => None,
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if self.handle.is_some() && self.stop_within(Duration::from_secs(10)).is_none() {
            // Not a panic: a panic in a destructor during unwinding aborts
            // and hides the test's own failure. Tests of the stop itself
            // assert on `stop_within`.
            eprintln!("warning: test server did not stop within 10 s");
        }
    }
}

/// Waits until `check` holds, polling; panics with `what` after `limit`.
pub fn wait_until(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A parsed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resp {
    pub status: u16,
    /// Header fields, names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    /// The first value of `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the response carries `Connection: close`.
    pub fn closes(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// A raw HTTP/1.1 client on one connection, keeping bytes it read past a
/// response for the next one (pipelining).
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        stream.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    /// The client's own address (the server's peer).
    pub fn local_addr(&self) -> SocketAddr {
        self.stream.local_addr().expect("local address")
    }

    pub fn send(&mut self, bytes: &[u8]) -> &mut Self {
        self.stream.write_all(bytes).expect("send request");
        self
    }

    /// Sends `bytes`, tolerating a server that already closed.
    pub fn try_send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads more bytes; `false` at end of stream.
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            return match self.stream.read(&mut chunk) {
                Ok(0) => false,
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    true
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::ConnectionReset => false,
                Err(e) => panic!("read a response: {e}"),
            };
        }
    }

    /// Takes exactly `n` bytes.
    pub fn take(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            assert!(self.fill(), "connection closed inside a response");
        }
        self.buf.drain(..n).collect()
    }

    /// Takes one line, including its CRLF.
    fn line(&mut self) -> Vec<u8> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                return self.buf.drain(..i + 2).collect();
            }
            assert!(self.fill(), "connection closed inside a response head");
        }
    }

    /// Reads one response; `head_only` for the answer to HEAD.
    pub fn response_to(&mut self, head_only: bool) -> Resp {
        let status_line = String::from_utf8(self.line()).expect("ASCII status line");
        assert!(
            status_line.starts_with("HTTP/1.1 ") && status_line.len() >= 14,
            "bad status line {status_line:?}"
        );
        let status: u16 = status_line[9..12].parse().expect("status code");
        let mut headers = Vec::new();
        loop {
            let line = String::from_utf8(self.line()).expect("ASCII header");
            let line = line.trim_end_matches("\r\n");
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').expect("header has a colon");
            headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
        }
        let mut resp = Resp {
            status,
            headers,
            body: Vec::new(),
        };
        if head_only || status == 100 || status == 204 || status == 304 {
            return resp;
        }
        if let Some(len) = resp.header("content-length") {
            let len: usize = len.parse().expect("numeric Content-Length");
            resp.body = self.take(len);
        } else if resp.header("transfer-encoding") == Some("chunked") {
            loop {
                let size_line = String::from_utf8(self.line()).expect("chunk size");
                let size = usize::from_str_radix(size_line.trim_end(), 16).expect("hex size");
                if size == 0 {
                    assert_eq!(self.line(), b"\r\n", "no trailers are sent");
                    break;
                }
                let data = self.take(size);
                resp.body.extend_from_slice(&data);
                assert_eq!(self.take(2), b"\r\n");
            }
        } else {
            // Delimited by the close (an HTTP/1.0 streamed response).
            while self.fill() {}
            resp.body = std::mem::take(&mut self.buf);
        }
        resp
    }

    pub fn response(&mut self) -> Resp {
        self.response_to(false)
    }

    /// Sends `bytes` and reads one response.
    pub fn roundtrip(&mut self, bytes: &[u8]) -> Resp {
        self.send(bytes);
        self.response()
    }

    /// Asserts the server closes with no further bytes within `limit`.
    pub fn expect_eof_within(&mut self, limit: Duration) -> Duration {
        let started = Instant::now();
        self.stream
            .set_read_timeout(Some(limit))
            .expect("set timeout");
        let mut chunk = [0u8; 4096];
        let result = loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => break Ok(()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        self.stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("set timeout");
        if let Err(e) = result {
            panic!("expected the server to close within {limit:?}: {e}");
        }
        assert!(
            self.buf.is_empty(),
            "unexpected bytes before the close: {:?}",
            String::from_utf8_lossy(&self.buf)
        );
        started.elapsed()
    }

    pub fn expect_eof(&mut self) -> Duration {
        self.expect_eof_within(IO_TIMEOUT)
    }

    /// Everything until the server closes.
    pub fn read_to_end(&mut self) -> Vec<u8> {
        while self.fill() {}
        std::mem::take(&mut self.buf)
    }

    pub fn shutdown_write(&mut self) {
        self.stream
            .shutdown(Shutdown::Write)
            .expect("shutdown(SHUT_WR)");
    }

    /// Closes with a reset (`SO_LINGER` 0) instead of a FIN.
    pub fn reset(self) {
        use std::os::fd::AsRawFd;
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: a valid socket fd and a pointer to a live `linger` of
        // the size given.
        let rc = unsafe {
            libc::setsockopt(
                self.stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "setsockopt(SO_LINGER)");
    }
}

/// Sends `bytes` on a new connection, half-closes, and returns every byte
/// the server sent before closing.
pub fn exchange(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut c = Client::connect(addr);
    // The server may answer and close before it read everything.
    let _ = c.try_send(bytes);
    let _ = c.stream.shutdown(Shutdown::Write);
    c.read_to_end()
}

/// Sends `bytes` on a new connection and reads one response.
pub fn one(addr: SocketAddr, bytes: &[u8]) -> Resp {
    Client::connect(addr).roundtrip(bytes)
}

/// Sends `bytes`, expects exactly one error response with `status`,
/// `Connection: close`, then the close.
pub fn expect_error(addr: SocketAddr, bytes: &[u8], status: u16) {
    let mut c = Client::connect(addr);
    let _ = c.try_send(bytes);
    let resp = c.response();
    assert_eq!(
        resp.status,
        status,
        "status for {:?}",
        String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
    );
    assert!(resp.closes(), "error responses carry Connection: close");
    c.expect_eof();
}

/// Sends `bytes`, expects one response with `status` after which the
/// connection stays open: a service's refusal of a whole request. Returns
/// it, and the client to go on with.
pub fn expect_kept_error(addr: SocketAddr, bytes: &[u8], status: u16) -> (Resp, Client) {
    let mut c = Client::connect(addr);
    let resp = c.roundtrip(bytes);
    let sent = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
    assert_eq!(resp.status, status, "status for {sent:?}");
    assert!(
        !resp.closes(),
        "{sent:?} closed the connection: {:?}",
        resp.headers
    );
    (resp, c)
}

/// `GET path` with a Host header.
pub fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
}

/// `POST path` with a Content-Length body and a content type.
pub fn post(path: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut v = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    v.extend_from_slice(body);
    v
}

/// Replaces every `Date:` value by a fixed one, so responses made in
/// different seconds compare equal.
pub fn normalize_dates(bytes: &[u8]) -> Vec<u8> {
    const NAME: &[u8] = b"\r\nDate: ";
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(NAME) && i + NAME.len() + 29 <= bytes.len() {
            out.extend_from_slice(NAME);
            out.extend_from_slice(b"Thu, 01 Jan 1970 00:00:00 GMT");
            i += NAME.len() + 29;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// The status codes of every response in a byte stream (by status line).
pub fn statuses(bytes: &[u8]) -> Vec<u16> {
    let text = String::from_utf8_lossy(bytes);
    text.match_indices("HTTP/1.1 ")
        .filter_map(|(i, _)| text.get(i + 9..i + 12)?.parse().ok())
        .collect()
}
