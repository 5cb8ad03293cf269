//! [`ServerBuilder::start`] and [`ServerBuilder::serve`]: resolving the
//! cores, binding the listeners, starting each core's thread and waiting
//! until every one serves.

use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use super::datagram::{self, DatagramParts};
use super::handle::Inner;
use super::listen::{self, BindOptions, Bound, ListenerCounters, ListenerSpec, TlsSetup};
use super::moving::Home;
use super::serve::{serve_core, CoreListener, DrainGuard, ServeLimits, Tracker};
use super::steer::{Control, Steerer};
use super::watchdog::Watchdog;
use super::{backend, cpus, fd_limit, CoreContext, ServerBuilder, ServerHandle};
use crate::core::config::CoreConfig;
use crate::core::shared::CoreShared;
use crate::core::Core;
use crate::net::{Acceptor, Endpoint, SocketFile};
use crate::sync::{CountDown, Shutdown};
use crate::{Backend, Handler};

impl ServerBuilder {
    /// Starts one thread per core and returns once every core is serving.
    ///
    /// `factory` runs on each core's thread and makes that core's handler,
    /// so handlers keep per-core state without locks. It may also start the
    /// core's background work with [`spawn_local`](crate::spawn_local) (an
    /// expiry sweep, a cache refresh); such a task does not hold the stop:
    /// it is dropped when its core stops (end it earlier with
    /// [`until_stopped`](crate::until_stopped) if it must finish cleanly).
    ///
    /// # Errors
    ///
    /// An invalid CPU list, a failed bind (the address is in use, possibly
    /// by another server with `SO_REUSEPORT`; see
    /// [`take_over`](Self::take_over)), an explicit
    /// [`Backend::Uring`] that the kernel refuses, or a core that fails to
    /// start (its error, with the CPU named).
    pub fn start<H, F>(self, factory: F) -> io::Result<ServerHandle>
    where
        H: Handler,
        F: Fn(&CoreContext) -> H + Send + Sync + 'static,
    {
        self.start_then(factory, |_| Ok(()))
    }

    /// [`start`](Self::start), running `ready` on the started server before
    /// it says it is serving (a failure stops it, as a core's would).
    // Long on purpose: the start-up in order (resolve the cores, bind,
    // start each core's thread, wait for every one to be ready), read
    // top to bottom.
    fn start_then<H, F>(
        self,
        factory: F,
        ready: impl FnOnce(&ServerHandle) -> io::Result<()>,
    ) -> io::Result<ServerHandle>
    where
        H: Handler,
        F: Fn(&CoreContext) -> H + Send + Sync + 'static,
    {
        let cpus = cpus::resolve(self.cores.as_deref())?;
        let backend = backend::resolve(self.backend, &self.config)?;
        let options = BindOptions {
            cores: cpus.len(),
            backlog: self.backlog,
            take_over: self.take_over,
            unix_mode: self.unix_mode,
        };
        let mut main = ListenerSpec::new(self.address, factory);
        main.tls = self.tls;
        let mut specs = vec![main];
        specs.extend(self.listeners);
        let handshake = HandshakeLimits {
            timeout: self.tls_handshake_timeout,
            first_byte_timeout: self.tls_first_byte_timeout,
            max_handshakes: self.tls_max_handshakes,
        };
        let mut bound = Vec::with_capacity(specs.len());
        for spec in &specs {
            bound.push(listen::bind(&spec.addr, options)?);
        }
        let steering = match self.steering {
            super::Steering::Off => None,
            super::Steering::Load => steer_groups(&bound)?,
        };
        let addrs: Vec<Endpoint> = bound.iter().map(|b| b.addr.clone()).collect();
        let local_addr = first_tcp(&addrs);
        let main_addr = addrs[0].clone();
        let counters: Vec<Vec<Arc<ListenerCounters>>> = specs
            .iter()
            .map(|_| cpus.iter().map(|_| Arc::default()).collect())
            .collect();
        let mut per_core = core_listeners(bound, &specs, &counters, cpus.len(), handshake);
        let (udp_parts, udp_addrs) = datagram::bind_all(&self.udp, cpus.len(), self.take_over)?;
        let mut udp_parts = udp_parts.into_iter();
        fd_limit::fit_to_connections(cpus.len(), self.max_connections);
        let shutdown = Arc::new(Shutdown::new());
        let draining = Arc::new(CountDown::new(cpus.len()));
        let mut cores = Vec::new();
        let mut threads = Vec::new();
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
        for &cpu in &cpus {
            let wake_fd = Arc::new(crate::sys::eventfd()?);
            cores.push(Arc::new(CoreShared::new(cpu, wake_fd, shutdown.clone())));
        }
        CoreShared::link(&cores);
        for (index, ((cpu, listeners), shared)) in cpus
            .iter()
            .copied()
            .zip(per_core.drain(..))
            .zip(cores.iter().cloned())
            .enumerate()
        {
            let ctx = CoreContext {
                cpu,
                index,
                cores: cpus.len(),
                backend,
            };
            let limits = ServeLimits {
                max_connections: self.max_connections,
                drain_timeout: self.drain_timeout,
                backlog: self.backlog as usize,
                moving: self.moving,
            };
            let config = self.config;
            let ready = ready_tx.clone();
            let addr = main_addr.clone();
            let count = draining.clone();
            let udp = udp_parts.next().unwrap_or_default();
            let spawned = thread::Builder::new()
                .name(format!("percore-{cpu}"))
                .spawn(move || {
                    // Every line a core logs says which core of which
                    // server: with several, "draining connections open=2"
                    // alone could be any.
                    let _span = tracing::info_span!("core", cpu, %addr).entered();
                    let result = run_core(
                        shared, backend, config, listeners, udp, ctx, limits, count, ready,
                    );
                    // Before the thread's locals are destroyed (a handler's
                    // `thread_local!` store may take a while): the drain
                    // ends here.
                    (result, Instant::now())
                });
            match spawned {
                Ok(thread) => threads.push(thread),
                Err(e) => {
                    // This core and the ones after it never run: count
                    // them out, so that the started ones do not wait for
                    // them, and stop those before reporting.
                    for _ in index..cpus.len() {
                        draining.count_out();
                    }
                    shutdown.trigger();
                    for core in &cores {
                        core.signal_shutdown();
                    }
                    for thread in threads {
                        let _ = thread.join();
                    }
                    return Err(io::Error::new(
                        e.kind(),
                        format!("core on CPU {cpu}: cannot start its thread: {e}"),
                    ));
                }
            }
        }
        drop(ready_tx);
        let mut first_error = None;
        for _ in 0..threads.len() {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => {
                    first_error.get_or_insert_with(|| {
                        io::Error::other("a core thread exited during start-up")
                    });
                }
            }
        }
        let handle = ServerHandle {
            inner: Arc::new(Inner {
                shutdown,
                cores,
                local_addr,
                main_addr: main_addr.clone(),
                listeners: addrs.iter().cloned().zip(counters).collect(),
                backend,
                udp_addrs,
                stopping_since: std::sync::OnceLock::new(),
                readiness: self.readiness.clone(),
                unready_delay: self.unready_delay,
                steering: steering.clone(),
            }),
            threads,
            watchdog: None,
            steerer: None,
        };
        if let Some(e) = first_error.or_else(|| ready(&handle).err()) {
            // Stopped without the "stopping" line: this server never said
            // it was serving.
            handle.inner.shutdown.trigger();
            for core in &handle.inner.cores {
                core.signal_shutdown();
            }
            let _ = handle.join_threads();
            return Err(e);
        }
        let watchdog = match self.stall_threshold {
            Some(threshold) => {
                match Watchdog::start(handle.inner.cores.clone(), threshold, main_addr.clone()) {
                    Ok(watchdog) => Some(watchdog),
                    Err(e) => {
                        // The server serves as well without it.
                        tracing::warn!(error = %e, "no stall watchdog: cannot start its thread");
                        None
                    }
                }
            }
            None => None,
        };
        let steerer = steering.and_then(|control| {
            let cores = handle.inner.cores.clone();
            match Steerer::start(control.clone(), cores, main_addr.clone()) {
                Ok(steerer) => Some(steerer),
                Err(e) => {
                    // The hash places connections, as without steering.
                    control.stop();
                    tracing::warn!(error = %e, "steering off: cannot start its thread");
                    None
                }
            }
        });
        let mut handle = handle;
        handle.watchdog = watchdog;
        handle.steerer = steerer;
        self.readiness.set_serving();
        if addrs.len() == 1 {
            tracing::info!(addr = %main_addr, %backend, cores = ?cpus, "serving");
        } else {
            let addrs: Vec<String> = addrs.iter().map(ToString::to_string).collect();
            tracing::info!(addrs = ?addrs, %backend, cores = ?cpus, "serving");
        }
        Ok(handle)
    }

    /// Starts the server, stops it gracefully on SIGINT, SIGTERM or SIGHUP
    /// (see [`ServerHandle::shutdown_on_signals`]), and
    /// returns when every core has finished.
    ///
    /// A program that installed no `tracing` subscriber gets one that
    /// logs to stderr at `info` (`RUST_LOG` takes `target=level`
    /// directives, e.g. `info,percore=debug`): the server's start
    /// (addresses, backend, cores), its stop, and every failure it
    /// answers or counts. One installed before this call stands instead,
    /// and sees each event once. [`start`](Self::start) installs none.
    ///
    /// # Errors
    ///
    /// As [`ServerBuilder::start`], or a core's fatal error.
    pub fn serve<H, F>(self, factory: F) -> io::Result<()>
    where
        H: Handler,
        F: Fn(&CoreContext) -> H + Send + Sync + 'static,
    {
        super::default_log::log_to_stderr();
        // The stop signals are handled before the start line says the
        // server serves: a SIGTERM sent on seeing it stops it gracefully,
        // never kills it.
        let handle = self.start_then(factory, ServerHandle::shutdown_on_signals)?;
        handle.join()
    }
}

/// The steering of a server's TCP listeners: a duplicate of each core's
/// socket (in group order: core order), for the steering thread to attach
/// its program through; `None` when none is TCP.
fn steer_groups(bound: &[Bound]) -> io::Result<Option<Arc<Control>>> {
    let mut groups = Vec::new();
    for b in bound {
        if let Endpoint::Tcp(addr) = b.addr {
            let sockets = b
                .sockets
                .iter()
                .map(OwnedFd::try_clone)
                .collect::<io::Result<Vec<_>>>()?;
            groups.push((addr, sockets, b.joined));
        }
    }
    Ok(Control::new(groups))
}

/// What one core serves of each listener: its socket, its handler
/// factory, its counters and its socket file.
struct ListenerParts {
    socket: OwnedFd,
    spec: ListenerSpec,
    counters: Arc<ListenerCounters>,
    file: Option<Arc<SocketFile>>,
    tls: Option<TlsSetup>,
}

/// The limits of every TLS listener's handshakes, from the builder.
#[derive(Clone, Copy)]
struct HandshakeLimits {
    timeout: Duration,
    first_byte_timeout: Duration,
    max_handshakes: usize,
}

/// Deals the bound sockets out to the cores: `[core][listener]`.
fn core_listeners(
    bound: Vec<Bound>,
    specs: &[ListenerSpec],
    counters: &[Vec<Arc<ListenerCounters>>],
    cores: usize,
    handshake: HandshakeLimits,
) -> Vec<Vec<ListenerParts>> {
    let mut per_core: Vec<Vec<ListenerParts>> = (0..cores).map(|_| Vec::new()).collect();
    for ((b, spec), counters) in bound.into_iter().zip(specs).zip(counters) {
        for ((parts, socket), counters) in per_core.iter_mut().zip(b.sockets).zip(counters) {
            parts.push(ListenerParts {
                socket,
                spec: spec.clone(),
                counters: counters.clone(),
                file: b.file.clone(),
                tls: spec.tls.clone().map(|config| TlsSetup {
                    config,
                    timeout: handshake.timeout,
                    first_byte_timeout: handshake.first_byte_timeout,
                    max_handshakes: handshake.max_handshakes,
                }),
            });
        }
    }
    per_core
}

/// The first TCP address of a server's listeners: what
/// [`ServerHandle::local_addr`] reports (`0.0.0.0:0` when none is TCP).
fn first_tcp(addrs: &[Endpoint]) -> SocketAddr {
    addrs
        .iter()
        .find_map(|a| match a {
            Endpoint::Tcp(addr) => Some(*addr),
            Endpoint::Unix(_) => None,
        })
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
}

#[allow(clippy::too_many_arguments)]
fn run_core(
    shared: Arc<CoreShared>,
    backend: Backend,
    config: CoreConfig,
    listeners: Vec<ListenerParts>,
    udp: Vec<DatagramParts>,
    ctx: CoreContext,
    limits: ServeLimits,
    draining: Arc<CountDown>,
    ready: mpsc::Sender<io::Result<()>>,
) -> io::Result<()> {
    let cpu = shared.cpu;
    shared.watch.set_thread();
    if !core_affinity::set_for_current(core_affinity::CoreId { id: cpu }) {
        tracing::warn!(cpu, "could not pin the core thread to its CPU");
    }
    // Counted out however this ends, so that a core failing to start
    // does not hold the others at a stop.
    let draining = DrainGuard::new(draining);
    let fail = |e: io::Error| io::Error::new(e.kind(), format!("core on CPU {cpu}: {e}"));
    let core = match Core::new(shared, backend, &config) {
        Ok(core) => core,
        Err(e) => {
            let e = fail(e);
            let _ = ready.send(Err(io::Error::new(e.kind(), e.to_string())));
            return Err(e);
        }
    };
    // Before the first turn, which may already see the stop and then sets
    // the drain deadline from this.
    core.set_drain_timeout(limits.drain_timeout);
    let guard = crate::core::context::enter(core.clone());
    let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut serving = Vec::with_capacity(listeners.len());
        for parts in listeners {
            let tcp = matches!(parts.spec.addr, Endpoint::Tcp(_));
            let (spawn, overload_bound) = (parts.spec.make)(&ctx, parts.tls);
            serving.push(CoreListener {
                acceptor: Acceptor::new(parts.socket, tcp)?,
                spawn: std::rc::Rc::new(spawn),
                overload_bound,
                counters: parts.counters,
                _file: parts.file,
            });
        }
        let tasks = udp
            .into_iter()
            .map(|parts| parts.start(&ctx))
            .collect::<io::Result<Vec<_>>>()?;
        Ok::<_, io::Error>((serving, tasks))
    }));
    drop(guard);
    let (listeners, tasks) = match started {
        Ok(Ok(started)) => started,
        Ok(Err(e)) => {
            let e = fail(e);
            let _ = ready.send(Err(io::Error::new(e.kind(), e.to_string())));
            return Err(e);
        }
        Err(_) => {
            let e = io::Error::other(format!("core on CPU {cpu}: the handler factory panicked"));
            let _ = ready.send(Err(io::Error::other(e.to_string())));
            return Err(e);
        }
    };
    // Open to moved connections before reporting started: a move another
    // core orders then always finds this one's listeners.
    let tracker = std::rc::Rc::new(Tracker::default());
    let home = Home::open(&listeners, &tracker, limits);
    let _ = ready.send(Ok(()));
    let serving = serve_core(listeners, tasks, limits, draining, (tracker, home));
    let result = Core::block_on(core.clone(), serving);
    core.sample_cpu_time();
    tracing::debug!(cpu, "core stopped");
    result.map_err(|e| io::Error::other(format!("core on CPU {cpu}: {e}")))
}
