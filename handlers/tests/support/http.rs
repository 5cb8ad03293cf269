//! The HTTP server-layer tests' server: a one-core [`TestServer`] that
//! stops itself when dropped. The raw HTTP client is the kit's.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use percore::{Backend, Server, ServerHandle, StatsSnapshot};
#[allow(unused_imports, reason = "each test binary names a few of these")]
pub(crate) use percore_handlers::http::{
    Config, HttpEcho, HttpHandler, HttpStats, HttpStatsReader, Request, Response, Service, HELLO,
};

#[allow(dead_code, reason = "some test binaries keep the default timeouts")]
/// Test timeouts short enough to observe, long enough for a loaded VM.
pub(crate) fn short_config() -> Config {
    let mut c = Config::default();
    c.head_timeout = Duration::from_millis(800);
    c.body_timeout = Duration::from_millis(800);
    c.idle_timeout = Duration::from_millis(500);
    c.write_timeout = Duration::from_millis(500);
    c.linger_timeout = Duration::from_millis(500);
    c
}

/// A one-core server on `127.0.0.1:0`, stopped when dropped.
#[allow(dead_code, reason = "the echo tests start no HTTP server")]
pub(crate) struct TestServer {
    handle: Option<ServerHandle>,
    pub addr: SocketAddr,
    /// The core's HTTP counters, registered by the factory.
    http: Arc<Mutex<Option<HttpStatsReader>>>,
}

#[allow(dead_code, reason = "each test binary starts and reads it its own way")]
impl TestServer {
    /// Serves [`HttpEcho`] with the default config.
    pub(crate) fn echo(backend: Backend) -> TestServer {
        Self::start(backend, Config::default(), || HttpEcho)
    }

    /// Serves [`HttpEcho`] with `config`.
    pub(crate) fn echo_with(backend: Backend, config: Config) -> TestServer {
        Self::start(backend, config, || HttpEcho)
    }

    /// Serves the service `make` builds (once per core).
    pub(crate) fn start<S, F>(backend: Backend, config: Config, make: F) -> TestServer
    where
        S: Service,
        F: Fn() -> S + Send + Sync + 'static,
    {
        Self::start_with_stats(backend, config, move |_| make())
    }

    /// Serves [`HttpEcho`] with `config` and a drain deadline of `drain`
    /// (2 s otherwise), for tests that tell the drain's end from another.
    pub(crate) fn echo_with_drain(backend: Backend, config: Config, drain: Duration) -> TestServer {
        Self::start_draining(backend, config, drain, |_| HttpEcho)
    }

    /// Serves the service `make` builds (once per core) from a reader of
    /// its handler's counters.
    pub(crate) fn start_with_stats<S, F>(backend: Backend, config: Config, make: F) -> TestServer
    where
        S: Service,
        F: Fn(HttpStatsReader) -> S + Send + Sync + 'static,
    {
        Self::start_draining(backend, config, Duration::from_secs(2), make)
    }

    /// [`TestServer::start_with_stats`] with a drain deadline of `drain`.
    pub(crate) fn start_draining<S, F>(
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
            // As the test kit's builder: no stall reports in tests that
            // measure memory.
            .stall_threshold(None)
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
    pub(crate) fn http_stats(&self) -> HttpStats {
        let reader = self.http.lock().unwrap();
        reader.as_ref().expect("registered at start").snapshot()
    }

    /// The core's counters now.
    pub(crate) fn stats(&self) -> StatsSnapshot {
        let handle = self.handle.as_ref().expect("server running");
        handle.stats().remove(0)
    }

    /// Begins the graceful stop without waiting for it.
    pub(crate) fn begin_stop(&self) {
        if let Some(handle) = &self.handle {
            handle.shutdown();
        }
    }

    /// Begins the graceful stop and returns how long the server took to
    /// finish, or `None` if it did not within `limit`.
    pub(crate) fn stop_within(&mut self, limit: Duration) -> Option<Duration> {
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
