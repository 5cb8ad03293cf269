//! Test servers in this process: a one-core builder on `127.0.0.1:0`, a
//! plain echo handler, and checks of what a started server reports.

use std::net::SocketAddr;
use std::time::Duration;

use percore::{Backend, Server, ServerBuilder, ServerHandle, StatsSnapshot};

/// Sends every read straight back and half-closes at the client's end of
/// stream: the framework's tests cannot use `percore-handlers`' echo.
#[derive(Debug)]
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

/// The CPU the test servers run on: the first this process may use.
pub fn server_cpu() -> usize {
    percore::runtime::cpus::available()[0]
}

/// A builder for a one-core test server on `127.0.0.1:0`, without the
/// stall watchdog: a loaded test machine holds a core back for 50 ms now
/// and then, and naming a report's frames reads the test binary's debug
/// information (tens of MiB), which would upset the tests that measure
/// the process's memory. The stall tests set their own threshold.
pub fn builder(backend: Backend) -> ServerBuilder {
    Server::builder()
        .address(SocketAddr::from(([127, 0, 0, 1], 0)))
        .cores([server_cpu()])
        .backend(backend)
        .drain_timeout(Duration::from_secs(5))
        .stall_threshold(None)
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
