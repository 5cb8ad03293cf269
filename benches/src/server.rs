//! The executors under test and a uniform handle to a running server.
//!
//! What it measures: nothing by itself; it starts a server of one executor
//! for one service (echo, HTTP, HTTPS, fan-out, echo over a Unix socket
//! file, or the JSON API, whose servers are child processes), finds the
//! server's threads by name so the harness can read their CPU time, and
//! stops the server. What it does not: decide what a server does per
//! connection (see `tokio_servers`, `tokio_unix`, `percore_servers` and
//! `api_servers`), or make the certificates an HTTPS server presents
//! (the harness lends them, see [`Supplies`]).

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::sys;
use crate::target::{SocketDir, Target};
use crate::tls::TestCertificates;

/// Where the TCP servers listen: loopback, a port chosen by the kernel.
pub const LOOPBACK_ANY_PORT: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::LOCALHOST,
    0,
));

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
    /// [`Service::Echo`] on a Unix socket file instead of loopback TCP.
    UnixEcho,
    /// Answers every keep-alive GET with the fixed 20-byte JSON body.
    Http,
    /// [`Service::Http`] over TLS: each connection's handshake first, then
    /// the same answers.
    Https,
    /// The fan-out proxy (policy `all`): every GET becomes `width`
    /// concurrent GETs to the in-process upstreams, answered with their
    /// joined JSON array.
    FanOut {
        /// Sub-requests per request.
        width: usize,
    },
    /// HTTP/2 in the clear by prior knowledge (no upgrade), every GET
    /// answered with the 20-byte JSON body: percore's `HttpEcho` (its
    /// HTTP handler switches to HTTP/2 on the client's preface), hyper's
    /// HTTP/2 server on the tokio runtimes (see `h2_baseline`).
    H2,
    /// The small JSON API (`GET /users/{id}` and friends), served by
    /// server binaries run as child processes: the `json_api` example for
    /// uring and epoll, `axum_api` for tokio-ct (see `api_servers`).
    Api,
}

impl Service {
    /// Name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Service::Echo => "echo",
            Service::UnixEcho => "unix-echo",
            Service::Http => "http",
            Service::Https => "https",
            Service::FanOut { .. } => "fan-out",
            Service::H2 => "h2",
            Service::Api => "api",
        }
    }

    /// How many groups [`Service::group`] numbers.
    pub const GROUPS: u8 = 6;

    /// The services whose servers run together (all fan-out widths share
    /// the upstreams): `0` echo (both transports), `1` HTTP, `2` fan-out,
    /// `3` HTTPS (whose certificates are made for it), `4` the API
    /// processes, `5` HTTP/2.
    pub fn group(self) -> u8 {
        match self {
            Service::Echo | Service::UnixEcho => 0,
            Service::Http => 1,
            Service::FanOut { .. } => 2,
            Service::Https => 3,
            Service::Api => 4,
            Service::H2 => 5,
        }
    }

    /// Whether its server listens on a Unix socket file (else loopback TCP).
    pub fn is_unix(self) -> bool {
        self == Service::UnixEcho
    }
}

/// What some services need besides CPUs, lent by the harness for the
/// servers' lives.
#[derive(Clone, Copy, Debug, Default)]
pub struct Supplies<'a> {
    /// Where a fan-out proxy sends its sub-requests.
    pub upstreams: &'a [SocketAddr],
    /// The certificate and key an HTTPS server presents.
    pub certificates: Option<&'a TestCertificates>,
}

impl<'a> Supplies<'a> {
    /// The certificates, which an HTTPS server cannot start without.
    ///
    /// # Errors
    ///
    /// `InvalidInput` if there are none.
    pub fn certificates(&self) -> io::Result<&'a TestCertificates> {
        self.certificates.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "an HTTPS server needs a certificate",
            )
        })
    }
}

/// A server running in this process.
pub trait ServerControl: Send {
    /// Where it listens.
    fn target(&self) -> Target;
    /// Stops it gracefully and waits for its threads.
    fn stop(self: Box<Self>) -> io::Result<()>;
    /// The process it runs in, when that is not this one: its CPU time is
    /// then that whole process's.
    fn process(&self) -> Option<u32> {
        None
    }
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
    /// Its threads in this process; empty for a server process of its own.
    tids: Vec<u32>,
    /// The directory of its socket file, removed after the stop.
    socket_dir: Option<SocketDir>,
    /// For an HTTPS server, the authority its certificate is signed by.
    ca: Option<PathBuf>,
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningServer")
            .field("executor", &self.executor)
            .field("service", &self.service)
            .field("tids", &self.tids)
            .field("ca", &self.ca)
            .finish_non_exhaustive()
    }
}

impl RunningServer {
    /// Where its clients connect: for an HTTPS server, its TCP address
    /// with the authority to trust (the server itself only knows it
    /// listens on TCP).
    pub fn target(&self) -> Target {
        match (self.control.target(), &self.ca) {
            (Target::Tcp(addr), Some(ca)) => Target::Tls {
                addr,
                ca: ca.clone(),
            },
            (target, _) => target,
        }
    }

    /// Thread ids attributed to this server.
    pub fn tids(&self) -> &[u32] {
        &self.tids
    }

    /// Whether its CPU time can be read: its threads were found, or it
    /// is a process of its own.
    pub fn has_cpu_time(&self) -> bool {
        !self.tids.is_empty() || self.control.process().is_some()
    }

    /// CPU time of the server's threads (or of its process), seconds;
    /// `None` if none of its threads could be identified.
    pub fn cpu_seconds(&self) -> Option<f64> {
        match self.control.process() {
            Some(pid) => sys::process_cpu_seconds(pid),
            None => sys::threads_cpu_seconds(&self.tids),
        }
    }

    /// Stops the server, waiting at most `limit`: a server that does not
    /// stop is reported as an error and its threads are left behind (idle),
    /// so the run still ends by itself.
    pub fn stop(self, limit: Duration) -> io::Result<()> {
        // Dropped when this returns: after the stop, or after the wait
        // for it gave up (a server left behind accepts no new clients
        // once its file is gone).
        let _socket_dir = self.socket_dir;
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
/// the upstreams of `supplies`, an HTTPS server presents its certificate),
/// on loopback TCP or, for a Unix service, on a socket file in a directory
/// of its own. Servers must be started one at a time: the
/// threads that appear with the executor's name prefix and are not in
/// `claimed` are attributed to this server (two percore servers share the
/// prefix `percore-`). A percore server's threads must also carry one of
/// its own CPUs in their names (`percore-<cpu>`), so percore servers on
/// other CPUs (the fan-out upstreams) are never counted, even if they start
/// late.
pub fn start(
    executor: Executor,
    service: Service,
    cpus: &[usize],
    claimed: &[u32],
    supplies: &Supplies<'_>,
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
    let socket_dir = if service.is_unix() {
        let dir = SocketDir::new(executor.name())
            .map_err(|e| Unavailable(format!("no directory for the socket file: {e}")))?;
        Some(dir)
    } else {
        None
    };
    let ca = match service {
        Service::Https => Some(
            supplies
                .certificates()
                .map_err(|e| Unavailable(e.to_string()))?
                .ca(),
        ),
        _ => None,
    };
    let at = match &socket_dir {
        Some(dir) => Target::Unix(dir.socket()),
        None => Target::Tcp(LOOPBACK_ANY_PORT),
    };
    if service == Service::Api {
        let control = crate::api_servers::start(executor, cpus)?;
        return Ok(RunningServer {
            executor,
            service,
            control,
            tids: Vec::new(),
            socket_dir,
            ca,
        });
    }
    let before = sys::threads_matching(&owned).unwrap_or_default();
    let control: Box<dyn ServerControl> = match executor {
        Executor::TokioCt => crate::tokio_servers::start_ct(service, &at, cpus, supplies)
            .map_err(|e| Unavailable(format!("tokio-ct failed to start: {e}")))?,
        Executor::TokioMt => crate::tokio_servers::start_mt(service, &at, cpus, supplies)
            .map_err(|e| Unavailable(format!("tokio-mt failed to start: {e}")))?,
        Executor::Uring | Executor::Epoll => start_percore(executor, service, &at, cpus, supplies)?,
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
        socket_dir,
        ca,
    })
}

#[cfg(feature = "percore")]
fn start_percore(
    executor: Executor,
    service: Service,
    at: &Target,
    cpus: &[usize],
    supplies: &Supplies<'_>,
) -> Result<Box<dyn ServerControl>, Unavailable> {
    crate::percore_servers::start(executor, service, at, cpus, supplies)
}

#[cfg(not(feature = "percore"))]
fn start_percore(
    _executor: Executor,
    _service: Service,
    _at: &Target,
    _cpus: &[usize],
    _supplies: &Supplies<'_>,
) -> Result<Box<dyn ServerControl>, Unavailable> {
    Err(Unavailable(
        "built without the `percore` feature".to_string(),
    ))
}

/// [`start`] for a test that runs every executor: `None`, with the reason
/// printed, where this machine may lack one (io_uring denied, or percore
/// built out); any other failure fails the test.
#[cfg(test)]
pub(crate) fn start_in_test(
    e: Executor,
    service: Service,
    supplies: &Supplies<'_>,
) -> Option<RunningServer> {
    match start(e, service, &[], &[], supplies) {
        Ok(s) => Some(s),
        Err(why) if e == Executor::Uring || (e.is_ours() && !cfg!(feature = "percore")) => {
            println!("skipped: {}: {why}", e.name());
            None
        }
        Err(why) => panic!("{}: {why}", e.name()),
    }
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

    /// Every executor answers HTTP/2 by prior knowledge: the `h2_server`
    /// client's connections each get their checked GET (200, the 20-byte
    /// body), then streams in flight on each, with no error.
    #[test]
    fn h2_on_every_executor() {
        use crate::client;
        use crate::probe::Probe;
        for e in Executor::ALL {
            let Some(server) = start_in_test(e, Service::H2, &Supplies::default()) else {
                continue;
            };
            let addr = server.target().tcp().expect("a TCP server");
            let no_cpu = || None;
            let window = Duration::from_millis(50);
            let load = client::h2_concurrent(addr, 2, 4, window, &mut Probe::new(&no_cpu))
                .unwrap_or_else(|err| panic!("{}: {err}", e.name()));
            assert!(load.ops > 0, "{}: no HTTP/2 request answered", e.name());
            server.stop(Duration::from_secs(5)).expect("stop");
        }
    }

    /// Every executor serves echo on a socket file of its own, to the
    /// ping-pong and bulk clients, and the file's directory is gone after
    /// the stop.
    #[test]
    fn unix_echo_on_every_executor() {
        use crate::client;
        use crate::probe::Probe;
        for e in Executor::ALL {
            let Some(server) = start_in_test(e, Service::UnixEcho, &Supplies::default()) else {
                continue;
            };
            let target = server.target();
            let Target::Unix(path) = &target else {
                panic!("{} listens on {target}, not a Unix socket", e.name());
            };
            let dir = path.parent().expect("in its directory").to_path_buf();
            let no_cpu = || None;
            let window = Duration::from_millis(20);
            let runs = [
                client::pingpong(&target, 64, window, &mut Probe::new(&no_cpu)),
                client::concurrent_pingpong(&target, 4, 1, window, &mut Probe::new(&no_cpu)),
                client::chunk_roundtrip(&target, 1 << 20, window, &mut Probe::new(&no_cpu)),
                client::bidirectional(&target, 4 << 10, window, &mut Probe::new(&no_cpu)),
            ];
            for (i, r) in runs.into_iter().enumerate() {
                let load = r.unwrap_or_else(|err| panic!("{} client {i}: {err}", e.name()));
                assert!(load.ops > 0, "{} client {i}: nothing echoed", e.name());
            }
            server.stop(Duration::from_secs(5)).expect("stop");
            assert!(
                !dir.exists(),
                "{}: {} outlived its server",
                e.name(),
                dir.display()
            );
        }
    }
}
