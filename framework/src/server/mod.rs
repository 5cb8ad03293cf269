//! [`Server`]: one pinned thread per core, each with its own listener,
//! driver and handler.

pub(crate) mod backend;
mod bind;
pub mod cpus;
mod datagram;
mod default_log;
pub use default_log::log_to_stderr;
mod fd_limit;
mod give_back;
mod handle;
mod handshakes;
mod listen;
mod listening;
pub(crate) mod moving;
mod overload;
mod plain_http;
mod readiness;
mod serve;
mod signal;
mod start;
mod steer;
mod watchdog;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::core::config::CoreConfig;
use crate::net::{Endpoint, SocketFile};
use crate::{Backend, DatagramHandler, Handler};
use datagram::DatagramSpec;
pub use handle::{ServerHandle, StatsReader, Stopper};
use listen::ListenerSpec;
pub use listen::ListenerStats;
pub use moving::{move_connection, move_wanted, MoveMeter, MoveOutcome, MovePolicy, MoveRefusal};
pub use readiness::Readiness;
pub use steer::{Steering, SteeringStats};

/// What a handler factory learns about the core it builds a handler for.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CoreContext {
    /// The CPU this core's thread is pinned to.
    pub cpu: usize,
    /// This core's position in the server's core list (0-based).
    pub index: usize,
    /// How many cores the server runs.
    pub cores: usize,
    /// The backend this core runs.
    pub backend: Backend,
}

/// Entry point: `Server::builder()`.
#[derive(Debug)]
pub struct Server(());

impl Server {
    /// A builder with the defaults: every CPU this process may run on,
    /// `0.0.0.0:7000`, [`Backend::Auto`], 10,000 connections per core, a
    /// 10 s drain.
    pub fn builder() -> ServerBuilder {
        ServerBuilder {
            address: Endpoint::Tcp(SocketAddr::from(([0, 0, 0, 0], 7000))),
            listeners: Vec::new(),
            udp: Vec::new(),
            unix_mode: None,
            tls: None,
            tls_handshake_timeout: Duration::from_secs(10),
            tls_first_byte_timeout: Duration::from_secs(5),
            tls_max_handshakes: 1024,
            cores: None,
            backend: Backend::Auto,
            max_connections: 10_000,
            drain_timeout: Duration::from_secs(10),
            config: CoreConfig::default(),
            backlog: 1024,
            take_over: false,
            readiness: Readiness::new(),
            unready_delay: Duration::ZERO,
            stall_threshold: Some(DEFAULT_STALL_THRESHOLD),
            steering: Steering::Off,
            moving: None,
        }
    }
}

/// Configures and starts a [`Server`].
#[derive(Debug, Clone)]
pub struct ServerBuilder {
    /// Where the handler of `start` listens.
    address: Endpoint,
    /// The other listeners, with their own handlers.
    listeners: Vec<ListenerSpec>,
    /// The UDP addresses, with their handlers.
    udp: Vec<DatagramSpec>,
    unix_mode: Option<u32>,
    /// The TLS configuration of the handler of `start`'s listener.
    tls: Option<Arc<rustls::ServerConfig>>,
    tls_handshake_timeout: Duration,
    tls_first_byte_timeout: Duration,
    tls_max_handshakes: usize,
    cores: Option<Vec<usize>>,
    backend: Backend,
    max_connections: usize,
    drain_timeout: Duration,
    config: CoreConfig,
    backlog: i32,
    take_over: bool,
    readiness: Readiness,
    unready_delay: Duration,
    stall_threshold: Option<Duration>,
    steering: Steering,
    moving: Option<MovePolicy>,
}

impl ServerBuilder {
    /// The address every core listens on (port 0 picks a free port, shared
    /// by all cores).
    pub fn address(mut self, address: SocketAddr) -> Self {
        self.address = Endpoint::Tcp(address);
        self
    }

    /// Where the handler given to [`start`](Self::start) listens: a TCP
    /// address (as [`address`](Self::address)) or a Unix socket.
    ///
    /// A Unix socket file left by a server that is gone (no one accepts
    /// on it) is replaced; one a live server accepts on is refused, unless
    /// [`take_over`](Self::take_over) asks to take its place. The server
    /// removes its socket file when it stops (unless another server has
    /// taken the path since).
    pub fn listen(mut self, at: impl Into<Endpoint>) -> Self {
        self.address = at.into();
        self
    }

    /// Adds a listener with a handler of its own, served by the same cores
    /// as the others: say HTTP on a TCP port and a line protocol on a Unix
    /// socket, in one server. Its connections count towards the same
    /// [`max_connections`](Self::max_connections) per core and drain at the
    /// same stop; [`ServerHandle::listeners`] counts each listener's.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use percore::net::UnixAddr;
    /// use percore::{Connection, Handler, Server};
    ///
    /// struct Echo;
    ///
    /// impl Handler for Echo {
    ///     async fn serve(&self, conn: Connection) -> std::io::Result<()> {
    ///         while let Some(buf) = conn.read().await? {
    ///             conn.write_all(buf).await.0?;
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// struct Hello;
    ///
    /// impl Handler for Hello {
    ///     async fn serve(&self, conn: Connection) -> std::io::Result<()> {
    ///         conn.write_all(b"hello\n".to_vec()).await.0
    ///     }
    /// }
    ///
    /// fn main() -> std::io::Result<()> {
    ///     Server::builder()
    ///         .address("127.0.0.1:7000".parse().unwrap())
    ///         .add_listener(UnixAddr::path("/tmp/hello.sock"), |_core| Hello)
    ///         .serve(|_core| Echo)
    /// }
    /// ```
    pub fn add_listener<H, F>(mut self, at: impl Into<Endpoint>, factory: F) -> Self
    where
        H: Handler,
        F: Fn(&CoreContext) -> H + Send + Sync + 'static,
    {
        self.listeners.push(ListenerSpec::new(at.into(), factory));
        self
    }

    /// Serves a UDP address on every core, beside the stream listeners:
    /// each core gets its own socket of a `SO_REUSEPORT` group on it and
    /// a [`DatagramHandler`] from `factory`, made on its thread (see the
    /// trait for how it runs and stops). Port 0 picks a free port, shared
    /// by all cores ([`ServerHandle::udp_addrs`] says which).
    /// [`take_over`](Self::take_over) joins the group of a server already
    /// on the address, as for TCP; the datagrams still queued in the old
    /// server's sockets when it stops are lost with them.
    pub fn add_udp<D, F>(mut self, addr: SocketAddr, factory: F) -> Self
    where
        D: DatagramHandler,
        F: Fn(&CoreContext) -> D + Send + Sync + 'static,
    {
        self.udp.push(DatagramSpec::new(addr, factory));
        self
    }

    /// Serves TLS on the listener of the handler given to
    /// [`start`](Self::start): each connection's handshake runs first (see
    /// [`tls_handshake_timeout`](Self::tls_handshake_timeout)), then the
    /// handler gets the encrypted stream, with the same API as a plain one
    /// (see [`crate::tls`]; [`tls::server_config`](crate::tls::server_config)
    /// reads PEM files).
    pub fn tls(mut self, config: Arc<rustls::ServerConfig>) -> Self {
        self.tls = Some(config);
        self
    }

    /// Adds a TLS listener with a handler of its own; as
    /// [`add_listener`](Self::add_listener) and [`tls`](Self::tls).
    pub fn add_tls_listener<H, F>(
        mut self,
        at: impl Into<Endpoint>,
        config: Arc<rustls::ServerConfig>,
        factory: F,
    ) -> Self
    where
        H: Handler,
        F: Fn(&CoreContext) -> H + Send + Sync + 'static,
    {
        let mut spec = ListenerSpec::new(at.into(), factory);
        spec.tls = Some(config);
        self.listeners.push(spec);
        self
    }

    /// How long a TLS client has to finish its handshake (default 10 s):
    /// one that opens a connection and stalls is closed then, and counted
    /// in [`StatsSnapshot::tls_failures`](crate::StatsSnapshot::tls_failures).
    pub fn tls_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.tls_handshake_timeout = timeout;
        self
    }

    /// How long a TLS connection may stay silent before the first byte
    /// of its handshake (default 5 s; the whole handshake's
    /// [`tls_handshake_timeout`](Self::tls_handshake_timeout) still
    /// bounds it when shorter). A real client sends its ClientHello as
    /// soon as it has connected, so this only frees sooner the place of a
    /// connection that will never send one (a flood, or a balancer's
    /// pre-opened connection, which it opens again); counted in
    /// [`StatsSnapshot::tls_failures`](crate::StatsSnapshot::tls_failures).
    pub fn tls_first_byte_timeout(mut self, timeout: Duration) -> Self {
        self.tls_first_byte_timeout = timeout;
        self
    }

    /// Most TLS handshakes in progress on one core (default 1,024, at
    /// least 1), so that a flood of connections that stall in the
    /// handshake cannot hold a core's memory and time. When they are all
    /// taken, a new connection takes the place of the oldest one that
    /// has not sent a byte yet, or else of the oldest one, which is
    /// closed and counted in
    /// [`StatsSnapshot::tls_evicted`](crate::StatsSnapshot::tls_evicted):
    /// refusing the newcomer would let a thousand silent connections,
    /// reopened as they close, lock every TLS client out.
    pub fn tls_max_handshakes(mut self, max: usize) -> Self {
        self.tls_max_handshakes = max.max(1);
        self
    }

    /// The permission bits of the server's Unix socket files, say `0o660`
    /// to admit the group (default: what the process's umask leaves). Set
    /// before the socket listens, so no one connects under other bits.
    pub fn unix_mode(mut self, mode: u32) -> Self {
        self.unix_mode = Some(mode & 0o7777);
        self
    }

    /// The CPUs to run on, one core thread each.
    pub fn cores(mut self, cpus: impl IntoIterator<Item = usize>) -> Self {
        self.cores = Some(cpus.into_iter().collect());
        self
    }

    /// The kernel interface (default [`Backend::Auto`]); the environment
    /// variable `PERCORE_BACKEND` overrides it.
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// Open connections per core before accepting pauses (default 10,000;
    /// at least 1: 0 is taken as 1). At start the process's soft open-file limit is
    /// raised as far as this needs (up to the hard limit), with a log line;
    /// a warning says so when even the hard limit allows far fewer.
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = max.max(1);
        self
    }

    /// How long a stopping server lets open connections finish before it
    /// cancels them (default 10 s). Handlers learn when that is through
    /// [`drain_deadline`](crate::drain_deadline), to answer before it.
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// Submission-queue entries per io_uring (completion queue: 4×).
    pub fn ring_entries(mut self, entries: u32) -> Self {
        self.config.ring.entries = entries.clamp(8, 32768).next_power_of_two();
        self.config.ring.cq_entries = self.config.ring.entries * 4;
        self
    }

    /// Receive buffers per core (a power of two, ≤ 32768) and their size
    /// (default 256 of 64 KiB). The same size is used for the epoll
    /// backend's pool buffers.
    pub fn recv_buffers(mut self, count: u16, size: usize) -> Self {
        self.config.bufs.count = count.clamp(1, 32768).next_power_of_two();
        self.config.bufs.size = size.max(64);
        self
    }

    /// Runs an SQPOLL kernel thread per ring that sleeps after `idle`.
    /// Off by default: it costs a CPU, which small machines cannot spare.
    pub fn sqpoll(mut self, idle: Option<Duration>) -> Self {
        self.config.ring.sqpoll_idle_ms = idle.map(|d| d.as_millis().clamp(1, 10_000) as u32);
        self
    }

    /// Opt-in io_uring wait batching on busy cores. When a core's last
    /// wake-up brought at least 32 completions (it has many connections in
    /// flight), its next wait holds out up to `bound` for 64 completions
    /// instead of waking on the first; it goes back to waking on the first
    /// as soon as a batched wake-up brings fewer than 16, so a core serving
    /// a few connections never batches. With many more connections than
    /// the batch (measured with `wrk -c100` on `http_echo`) it cuts
    /// `io_uring_enter` calls from 0.28 to 0.03 per request; but with 32
    /// busy connections a batch rarely fills, waits run to the bound, and
    /// `wrk -c32` got a quarter fewer requests per second (and 12 % fewer
    /// per CPU-second), which is why it is off by default.
    ///
    /// `None` (the default) is off; a bound above a second is taken as a
    /// second. Needs Linux 6.12+
    /// (`IORING_FEAT_MIN_TIMEOUT`), otherwise it stays off (logged at
    /// start). The epoll backend ignores it.
    pub fn wait_batching(mut self, bound: Option<Duration>) -> Self {
        self.config.ring.batch_wait_usec = bound.map(|d| d.as_micros().clamp(1, 1_000_000) as u32);
        self
    }

    /// The listen backlog of each core's socket.
    pub fn backlog(mut self, backlog: i32) -> Self {
        self.backlog = backlog.max(1);
        self
    }

    /// Joins the server already listening on the address instead of
    /// refusing its port (off by default), to restart without refusing
    /// connections: start the new server with this, then stop the old one.
    /// Both share new connections until then. What the old one's listeners
    /// still hold when they close comes to the new one if
    /// `net.ipv4.tcp_migrate_req` is 1 (Linux 5.14+), and is reset
    /// otherwise (a warning says so at start). Only a server of the same
    /// user can be joined, and the address needs its port (not 0) and must
    /// be the running server's own: the kernel shares connections, and
    /// hands them over, only between listeners of the same address and
    /// port (`0.0.0.0:8080` and `127.0.0.1:8080` are two groups), so a
    /// take-over on another address than the running server's is refused,
    /// naming that address. With no server on the port, this one serves it
    /// alone.
    ///
    /// On a Unix socket path, the new server binds beside the old one's
    /// file and renames its socket over it: from then on new clients reach
    /// the new server, while the old one serves what it had already
    /// queued and leaves the file (no longer its own) in place when it
    /// stops.
    pub fn take_over(mut self, take_over: bool) -> Self {
        self.take_over = take_over;
        self
    }

    /// Where the server reports whether it wants traffic (see
    /// [`Readiness`]); keep a clone for the health check. A server makes
    /// its own when not given one ([`ServerHandle::readiness`]).
    pub fn readiness(mut self, readiness: Readiness) -> Self {
        self.readiness = readiness;
        self
    }

    /// How long a stop keeps serving, unready, before it stops accepting
    /// (default zero): a balancer checking the readiness every `interval`
    /// stops sending within a few intervals, and no connection it sends
    /// meanwhile is refused. A second stop request ends the wait.
    pub fn unready_delay(mut self, delay: Duration) -> Self {
        self.unready_delay = delay;
        self
    }

    /// How long one loop turn may keep a core before it is reported as a
    /// stall (default 50 ms; `None` turns the watchdog off).
    ///
    /// A core serves all its connections from one thread, so a handler
    /// that blocks (`std::thread::sleep`, a blocking DNS lookup, a
    /// contended lock, a long computation) freezes every connection of
    /// its core. One watchdog thread per server looks at the cores every
    /// half threshold; a turn running longer is counted in
    /// [`StatsSnapshot::stalls`](crate::StatsSnapshot::stalls), and logged
    /// once at WARN with its duration, the task it was polling and a
    /// backtrace of the core's thread taken during the stall (sampled
    /// with the signal `SIGRTMIN+5`; a program that handles that signal
    /// itself gets reports without backtraces; the signal interrupts the
    /// blocking call, which most calls restart by themselves, while
    /// `poll` or `select` return `EINTR` once). Durations go to
    /// [`StatsSnapshot::stall_durations`](crate::StatsSnapshot::stall_durations).
    ///
    /// The cores pay nothing extra for it: they publish the turn's start
    /// from the clock they read anyway, with plain stores. Why 50 ms: a
    /// healthy turn polls its tasks in well under a millisecond, so 50 ms
    /// is a real stall; yet a busy machine's scheduler can hold a thread
    /// back for tens of milliseconds, which a smaller threshold would
    /// report as stalls no handler caused. Values below 1 ms count as 1 ms.
    pub fn stall_threshold(mut self, threshold: Option<Duration>) -> Self {
        self.stall_threshold = threshold;
        self
    }
}

impl ServerBuilder {
    /// How new connections are placed on the cores (default
    /// [`Steering::Off`]: the kernel's hash of each connection's
    /// addresses).
    ///
    /// With [`Steering::Load`], a thread of the server measures the cores
    /// every 200 ms (the CPU time their threads used, their open
    /// connections) and attaches a classic BPF program to each TCP
    /// listener's `SO_REUSEPORT` group that draws each new connection's
    /// core at random, weighted by each core's room; a new program goes
    /// on when a core's share moves by 5 points. Connections already open
    /// stay where they are: steering evens out the placement of new
    /// connections, not the load of long-lived ones.
    ///
    /// Steering pauses (the hash places connections) while another
    /// server shares the port (one [taking this one over](Self::take_over)),
    /// and a server that took another's port over never steers that
    /// listener: the kernel's order of its sockets, which the program
    /// indexes, is unknown once the old ones leave. A kernel that refuses
    /// the program leaves the hash, with one log line. Unix listeners are
    /// not steered (they share one socket). Each core's share is in
    /// [`StatsSnapshot::steering_weight_ppm`](crate::StatsSnapshot::steering_weight_ppm),
    /// the programs attached in [`StatsReader::steering`](crate::StatsReader::steering).
    pub fn steering(mut self, steering: Steering) -> Self {
        self.steering = steering;
        self
    }

    /// Moves live connections from a hot core to an idle one at request
    /// boundaries, by `policy` (default: off, connections stay on the
    /// core that accepted them).
    ///
    /// Steering places new connections; this evens out the load of
    /// long-lived ones. Every `policy.interval`, a core busier than the
    /// mean of the cores and than the least busy one by more than
    /// `policy.margin` of the mean orders up to `policy.per_interval` of
    /// its connections to the least busy core, with a budget of about half
    /// the gap of load between the two (see [`MovePolicy`]). A connection
    /// moves when its handler next asks
    /// [`MoveMeter::move_wanted`](crate::MoveMeter::move_wanted) (and its
    /// rate fits what is left of the budget) or
    /// [`move_wanted`](crate::move_wanted) (any connection), and calls
    /// [`move_connection`](crate::move_connection): percore-handlers'
    /// HTTP/1.1 server does so, metered, after each read's answers are
    /// written; a handler of your own opts in the same way. Only connections of TCP
    /// listeners move. Moves are counted in each core's
    /// [`StatsSnapshot::moved_in`](crate::StatsSnapshot::moved_in) and
    /// [`moved_out`](crate::StatsSnapshot::moved_out).
    pub fn move_connections(mut self, policy: MovePolicy) -> Self {
        self.moving = Some(policy);
        self
    }
}

/// The default of [`ServerBuilder::stall_threshold`].
const DEFAULT_STALL_THRESHOLD: Duration = Duration::from_millis(50);
