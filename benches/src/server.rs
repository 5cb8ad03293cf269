//! The executors under test and a uniform handle to a running server.
//!
//! What it measures: nothing by itself; it starts a server of one executor
//! for one service (echo or HTTP), finds the server's threads by name so the
//! harness can read their CPU time, and stops the server. What it does not:
//! decide what a server does per connection (see `tokio_servers` and
//! `percore_servers`).

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::sys;

/// An executor: two percore backends and two tokio baselines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Executor {
    /// percore, io_uring backend.
    Uring,
    /// percore, epoll backend.
    Epoll,
    /// One tokio current_thread runtime per core, each with its own
    /// SO_REUSEPORT listener: the fair thread-per-core baseline.
    TokioCt,
    /// tokio's multi-thread runtime (as many workers as server cores), one
    /// listener.
    TokioMt,
}

impl Executor {
    /// All executors, in table order.
    pub const ALL: [Executor; 4] = [
        Executor::Uring,
        Executor::Epoll,
        Executor::TokioCt,
        Executor::TokioMt,
    ];

    /// The baseline every ratio is taken against.
    pub const BASELINE: Executor = Executor::TokioCt;

    /// Name in tables and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Executor::Uring => "uring",
            Executor::Epoll => "epoll",
            Executor::TokioCt => "tokio-ct",
            Executor::TokioMt => "tokio-mt",
        }
    }

    /// Parses a name printed by [`Executor::name`].
    pub fn from_name(s: &str) -> Option<Executor> {
        Executor::ALL.into_iter().find(|e| e.name() == s)
    }

    /// Prefix of the names of the server's threads.
    pub fn thread_prefix(self) -> &'static str {
        match self {
            Executor::Uring | Executor::Epoll => "percore-",
            Executor::TokioCt => "tokio-ct-",
            Executor::TokioMt => "tokio-mt",
        }
    }

    /// Whether a thread named `name` can belong to a server of this
    /// executor: the prefix, and for percore a CPU number after it (so
    /// `percore-signals` is not counted as a core).
    pub fn owns_thread(self, name: &str) -> bool {
        match name.strip_prefix(self.thread_prefix()) {
            None => false,
            Some(rest) if self.is_ours() => {
                !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit())
            }
            Some(_) => true,
        }
    }

    /// Whether this is one of percore's own executors.
    pub fn is_ours(self) -> bool {
        matches!(self, Executor::Uring | Executor::Epoll)
    }
}

/// What a server does with a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Service {
    /// Writes back every byte it reads.
    Echo,
    /// Answers every keep-alive GET with the fixed 20-byte JSON body.
    Http,
    /// The fan-out proxy (policy `all`): every GET becomes `width`
    /// concurrent GETs to the in-process upstreams, answered with their
    /// joined JSON array.
    FanOut {
        /// Sub-requests per request.
        width: usize,
    },
}

impl Service {
    /// Name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Service::Echo => "echo",
            Service::Http => "http",
            Service::FanOut { .. } => "fan-out",
        }
    }

    /// The services whose servers run together (all fan-out widths share
    /// the upstreams): `0` echo, `1` HTTP, `2` fan-out.
    pub fn group(self) -> u8 {
        match self {
            Service::Echo => 0,
            Service::Http => 1,
            Service::FanOut { .. } => 2,
        }
    }
}

/// A server running in this process.
pub trait ServerControl: Send {
    /// Where it listens.
    fn local_addr(&self) -> SocketAddr;
    /// Stops it gracefully and waits for its threads.
    fn stop(self: Box<Self>) -> io::Result<()>;
}

/// Why an executor cannot serve: printed as `skipped: <reason>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A started server plus the ids of its threads.
pub struct RunningServer {
    /// Which executor runs it.
    pub executor: Executor,
    /// What it serves.
    pub service: Service,
    control: Box<dyn ServerControl>,
    tids: Vec<u32>,
}

impl RunningServer {
    /// Listening address.
    pub fn addr(&self) -> SocketAddr {
        self.control.local_addr()
    }

    /// Thread ids attributed to this server.
    pub fn tids(&self) -> &[u32] {
        &self.tids
    }

    /// CPU time of the server's threads, seconds; `None` if none of
    /// its threads could be identified.
    pub fn cpu_seconds(&self) -> Option<f64> {
        sys::threads_cpu_seconds(&self.tids)
    }

    /// Stops the server, waiting at most `limit`: a server that does not
    /// stop is reported as an error and its threads are left behind (idle),
    /// so the run still ends by itself.
    pub fn stop(self, limit: Duration) -> io::Result<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        let control = self.control;
        std::thread::Builder::new()
            .name("bench-stopper".into())
            .spawn(move || {
                let _ = tx.send(control.stop());
            })?;
        match rx.recv_timeout(limit) {
            Ok(r) => r,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "did not stop within {} s; its threads are left running",
                    limit.as_secs_f64()
                ),
            )),
        }
    }
}

/// Starts `executor` serving `service` on `cpus` (a fan-out proxy sends to
/// `upstreams`). Servers must be started one at a time: the threads that
/// appear with the executor's name prefix and are not in `claimed` are
/// attributed to this server (two percore servers share the prefix
/// `percore-`). A percore server's threads must also carry one of its own
/// CPUs in their names (`percore-<cpu>`), so percore servers on other CPUs
/// (the fan-out upstreams) are never counted, even if they start late.
pub fn start(
    executor: Executor,
    service: Service,
    cpus: &[usize],
    claimed: &[u32],
    upstreams: &[SocketAddr],
) -> Result<RunningServer, Unavailable> {
    let owned = |name: &str| {
        executor.owns_thread(name)
            && (!executor.is_ours()
                || cpus.is_empty()
                || name
                    .strip_prefix(executor.thread_prefix())
                    .and_then(|n| n.parse::<usize>().ok())
                    .is_some_and(|n| cpus.contains(&n)))
    };
    let before = sys::threads_matching(&owned).unwrap_or_default();
    let control: Box<dyn ServerControl> = match executor {
        Executor::TokioCt => crate::tokio_servers::start_ct(service, cpus, upstreams)
            .map_err(|e| Unavailable(format!("tokio-ct failed to start: {e}")))?,
        Executor::TokioMt => crate::tokio_servers::start_mt(service, cpus, upstreams)
            .map_err(|e| Unavailable(format!("tokio-mt failed to start: {e}")))?,
        Executor::Uring | Executor::Epoll => start_percore(executor, service, cpus, upstreams)?,
    };
    // Threads may name themselves a moment after start() returns.
    let deadline = Instant::now() + Duration::from_millis(500);
    let tids = loop {
        let now: Vec<u32> = sys::threads_matching(&owned)
            .unwrap_or_default()
            .into_iter()
            .filter(|t| !before.contains(t) && !claimed.contains(t))
            .collect();
        if now.len() >= cpus.len().max(1) || Instant::now() >= deadline {
            break now;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Ok(RunningServer {
        executor,
        service,
        control,
        tids,
    })
}

#[cfg(feature = "percore")]
fn start_percore(
    executor: Executor,
    service: Service,
    cpus: &[usize],
    upstreams: &[SocketAddr],
) -> Result<Box<dyn ServerControl>, Unavailable> {
    crate::percore_servers::start(executor, service, cpus, upstreams)
}

#[cfg(not(feature = "percore"))]
fn start_percore(
    _executor: Executor,
    _service: Service,
    _cpus: &[usize],
    _upstreams: &[SocketAddr],
) -> Result<Box<dyn ServerControl>, Unavailable> {
    Err(Unavailable(
        "built without the `percore` feature".to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for e in Executor::ALL {
            assert_eq!(Executor::from_name(e.name()), Some(e));
        }
        assert_eq!(Executor::from_name("nope"), None);
        assert!(Executor::Uring.is_ours() && !Executor::TokioCt.is_ours());
        assert!(Executor::Uring.owns_thread("percore-0"));
        assert!(Executor::Epoll.owns_thread("percore-12"));
        assert!(!Executor::Uring.owns_thread("percore-signals"));
        assert!(!Executor::Uring.owns_thread("percore-"));
        assert!(Executor::TokioCt.owns_thread("tokio-ct-0"));
        assert!(Executor::TokioMt.owns_thread("tokio-mt"));
        assert!(!Executor::TokioMt.owns_thread("tokio-ct-0"));
    }
}
