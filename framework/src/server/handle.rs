//! [`ServerHandle`]: a running server's address, counters and stop, and
//! the [`StatsReader`] and [`Stopper`] that hand parts of it out.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use std::sync::atomic::{AtomicU64, Ordering};

use super::listen::{ListenerCounters, ListenerStats};
use super::Readiness;
use crate::core::shared::CoreShared;
use crate::net::Endpoint;
use crate::stats::StatsSnapshot;
use crate::sync::Shutdown;
use crate::Backend;

pub(super) struct Inner {
    pub(super) shutdown: Arc<Shutdown>,
    pub(super) cores: Vec<Arc<CoreShared>>,
    pub(super) local_addr: SocketAddr,
    /// Where the handler of `start` listens, for the log.
    pub(super) main_addr: Endpoint,
    /// Each listener's address, and its counters on each core.
    pub(super) listeners: Vec<(Endpoint, Vec<Arc<ListenerCounters>>)>,
    pub(super) backend: Backend,
    /// Each UDP address served, as bound.
    pub(super) udp_addrs: Vec<SocketAddr>,
    /// When the stop began, for the "stopped" line.
    pub(super) stopping_since: std::sync::OnceLock<Instant>,
    pub(super) readiness: Readiness,
    /// How long a stop serves on, unready, before it begins.
    pub(super) unready_delay: Duration,
    /// The steering of new connections, if asked for.
    pub(super) steering: Option<Arc<super::steer::Control>>,
}

impl Inner {
    /// A stop request: unready at once, and the stop itself after the
    /// unready delay (at once for a second request).
    fn stop(self: &Arc<Self>) {
        if !self.readiness.leave() || self.unready_delay.is_zero() {
            self.shutdown();
            return;
        }
        let addr = &self.main_addr;
        let delay = self.unready_delay;
        let _ = std::panic::catch_unwind(|| {
            tracing::info!(%addr, ?delay, "unready: stopping after the delay");
        });
        let inner = self.clone();
        let spawned = thread::Builder::new()
            .name("percore-unready".into())
            .spawn(move || {
                thread::sleep(delay);
                inner.shutdown();
            });
        if spawned.is_err() {
            self.shutdown();
        }
    }

    fn shutdown(&self) {
        // Before any core closes its listener (see `steer`).
        if let Some(steering) = &self.steering {
            steering.stop();
        }
        self.readiness.leave();
        let first = self.shutdown.trigger();
        if first {
            let _ = self.stopping_since.set(Instant::now());
            // Before the cores are told, or the process may finish and
            // exit before this thread gets to it. A subscriber may panic
            // (the fmt subscriber does when stderr's reader is gone): the
            // stop must not depend on the log.
            let addr = &self.main_addr;
            let _ = std::panic::catch_unwind(|| {
                tracing::info!(%addr, "stopping: no new connections; draining open ones");
            });
        }
        for core in &self.cores {
            core.signal_shutdown();
        }
    }
}

/// A running server: its address, its counters, and the way to stop it.
pub struct ServerHandle {
    pub(super) inner: Arc<Inner>,
    /// Each returns its core's result and when the core had finished.
    pub(super) threads: Vec<thread::JoinHandle<(io::Result<()>, Instant)>>,
    /// The stall watchdog, stopped once every core has (it watches the
    /// drain too).
    pub(super) watchdog: Option<super::watchdog::Watchdog>,
    /// The steering thread, stopped with the watchdog.
    pub(super) steerer: Option<super::steer::Steerer>,
}

impl ServerHandle {
    /// The address the server listens on (the real port if 0 was asked):
    /// its first TCP listener's, or `0.0.0.0:0` when it listens on Unix
    /// sockets only (see [`listeners`](Self::listeners)).
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr
    }

    /// Every listener, in the order they were given (the handler of
    /// `start` first), with its connections accepted and open.
    pub fn listeners(&self) -> Vec<ListenerStats> {
        self.stats_reader().listeners()
    }

    /// Each UDP address the server serves (see
    /// [`ServerBuilder::add_udp`](super::ServerBuilder::add_udp)), in the
    /// order given, with the port chosen where 0 was asked.
    pub fn udp_addrs(&self) -> Vec<SocketAddr> {
        self.inner.udp_addrs.clone()
    }

    /// The backend every core runs.
    pub fn backend(&self) -> Backend {
        self.inner.backend
    }

    /// Begins a graceful stop: every core stops accepting, serves the
    /// connections already waiting in its listener (up to the connection
    /// limit; the rest are closed unserved and counted in
    /// [`StatsSnapshot::closed_unserved`]) and closes it, lets open
    /// connections finish until the drain deadline, then cancels the rest.
    /// Returns at once; [`ServerHandle::join`] waits for the end. With an
    /// [`unready_delay`](super::ServerBuilder::unready_delay), all this
    /// begins after the delay, the server unready meanwhile.
    pub fn shutdown(&self) {
        self.inner.stop();
    }

    /// Whether the server wants traffic (see [`Readiness`]).
    pub fn readiness(&self) -> Readiness {
        self.inner.readiness.clone()
    }

    /// A `Send + Sync` trigger for [`ServerHandle::shutdown`], for other
    /// threads.
    pub fn stopper(&self) -> Stopper {
        Stopper(self.inner.clone())
    }

    /// Stops the server gracefully on SIGINT, SIGTERM or SIGHUP (a second
    /// signal exits the process at once, with status 128 + the signal's
    /// number). SIGHUP is left alone when it is ignored at the time of the
    /// call, as `nohup` leaves it, so that such a server outlives its
    /// terminal. Every server of a process may ask: one signal stops them
    /// all.
    ///
    /// # Errors
    ///
    /// When the signal handlers cannot be installed.
    pub fn shutdown_on_signals(&self) -> io::Result<()> {
        super::signal::on_stop_signal(self.stopper())
    }

    /// Orders `count` connections of core `from` (an index,
    /// `0..cores`) to move to core `to`, replacing the orders before (0
    /// cancels them): each goes at its next request boundary, as if the
    /// policy of [`ServerBuilder::move_connections`](super::ServerBuilder::move_connections)
    /// had ordered it (that policy, if on, replaces the orders at its
    /// next look). These orders have no budget of load: any connection
    /// that reaches a boundary takes one, metered or not (see
    /// [`MoveMeter`](crate::MoveMeter)); `count` is capped at 65 535.
    /// For an operator's tool, or a test that must move a connection at a
    /// known moment. Returns `false` for a bad index.
    pub fn move_connections(&self, from: usize, to: usize, count: usize) -> bool {
        let cores = &self.inner.cores;
        match cores.get(from) {
            Some(core) if to < cores.len() => {
                core.moves
                    .set(to, count, crate::core::moves::UNLIMITED, false);
                true
            }
            _ => false,
        }
    }

    /// Every core's counters now.
    pub fn stats(&self) -> Vec<StatsSnapshot> {
        self.stats_reader().snapshot()
    }

    /// A `Send` handle that reads the counters from any thread, even after
    /// this handle was consumed by [`ServerHandle::join`].
    pub fn stats_reader(&self) -> StatsReader {
        StatsReader(self.inner.clone())
    }

    /// Waits for every core to finish.
    ///
    /// # Errors
    ///
    /// The first core error, or a core thread that panicked.
    pub fn join(self) -> io::Result<()> {
        let inner = self.inner.clone();
        let (result, finished) = self.join_threads();
        let addr = &inner.main_addr;
        match (inner.stopping_since.get(), finished) {
            (Some(&since), Some(last)) => {
                let drained_in = last.saturating_duration_since(since);
                tracing::info!(%addr, ?drained_in, "stopped");
            }
            _ => tracing::info!(%addr, "stopped"),
        }
        result
    }

    /// [`join`](Self::join) without its log line (for a start that failed:
    /// the server never said it was serving). Also returns when the last
    /// core to finish did.
    pub(super) fn join_threads(self) -> (io::Result<()>, Option<Instant>) {
        let mut result = Ok(());
        let mut last: Option<Instant> = None;
        let ServerHandle {
            threads,
            watchdog,
            steerer,
            ..
        } = self;
        for thread in threads {
            let outcome = match thread.join() {
                Ok((outcome, at)) => {
                    last = Some(last.map_or(at, |l| l.max(at)));
                    outcome
                }
                Err(_) => Err(io::Error::other("a core thread panicked")),
            };
            if let Err(e) = outcome {
                if result.is_ok() {
                    result = Err(e);
                }
            }
        }
        if let Some(watchdog) = watchdog {
            watchdog.stop();
        }
        if let Some(steerer) = steerer {
            steerer.stop();
        }
        (result, last)
    }
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("local_addr", &self.inner.local_addr)
            .field("backend", &self.inner.backend)
            .field("cores", &self.inner.cores.len())
            .finish()
    }
}

/// Reads a server's counters from any thread (see
/// [`ServerHandle::stats_reader`]).
#[derive(Clone)]
pub struct StatsReader(Arc<Inner>);

impl StatsReader {
    /// Every core's counters now.
    pub fn snapshot(&self) -> Vec<StatsSnapshot> {
        self.0
            .cores
            .iter()
            .map(|core| core.stats.snapshot(core.cpu))
            .collect()
    }

    /// Whether a program steers new connections now, and how many were
    /// attached (see [`ServerBuilder::steering`](super::ServerBuilder::steering));
    /// all zero without steering.
    pub fn steering(&self) -> super::SteeringStats {
        self.0.steering.as_ref().map_or(
            super::SteeringStats {
                active: false,
                attaches: 0,
            },
            |s| s.stats(),
        )
    }

    /// Every listener's counters now, summed over the cores.
    pub fn listeners(&self) -> Vec<ListenerStats> {
        self.0
            .listeners
            .iter()
            .map(|(addr, cores)| {
                let sum = |f: fn(&ListenerCounters) -> &AtomicU64| {
                    cores.iter().map(|c| f(c).load(Ordering::Relaxed)).sum()
                };
                ListenerStats {
                    addr: addr.clone(),
                    accepted: sum(|c| &c.accepted),
                    active: sum(|c| &c.active),
                }
            })
            .collect()
    }
}

impl std::fmt::Debug for StatsReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatsReader").finish_non_exhaustive()
    }
}

/// Stops a server from any thread (see [`ServerHandle::stopper`]).
#[derive(Clone)]
pub struct Stopper(Arc<Inner>);

impl Stopper {
    /// Begins the graceful stop; see [`ServerHandle::shutdown`].
    pub fn stop(&self) {
        self.0.stop();
    }
}

impl std::fmt::Debug for Stopper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stopper").finish_non_exhaustive()
    }
}
