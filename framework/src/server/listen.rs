//! A server's listeners: where each listens (an [`Endpoint`]), the handler
//! factory it serves with, and its counters ([`ListenerStats`]).
//!
//! A server may have several listeners, TCP and Unix, each with its own
//! handler, all served by the same cores. A TCP listener has one socket
//! per core in a `SO_REUSEPORT` group, so the kernel spreads connections.
//! Unix sockets have no `SO_REUSEPORT`: the cores share one listening
//! socket, and each accepts from it (io_uring's accept and epoll both wake
//! the cores that wait on it, and the first to accept takes the
//! connection), so connections go to whichever core is free first.

use std::fmt;
use std::io;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::bind::bind_group;
use super::CoreContext;
use crate::net::{bind_unix, Endpoint, SocketFile, UnixOptions};
use crate::Handler;

/// One listener's counters, summed over the cores (see
/// [`ServerHandle::listeners`](crate::ServerHandle::listeners)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListenerStats {
    /// Where it listens (with the real port when port 0 was asked).
    pub addr: Endpoint,
    /// Connections accepted so far.
    pub accepted: u64,
    /// Connections open now.
    pub active: u64,
}

/// One core's counters of one listener.
#[derive(Debug, Default)]
pub(crate) struct ListenerCounters {
    pub(crate) accepted: AtomicU64,
    pub(crate) active: AtomicU64,
}

impl ListenerCounters {
    pub(crate) fn opened(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        self.active.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn closed(&self) {
        self.active.fetch_sub(1, Ordering::Relaxed);
    }

    /// A connection moved here from another core: open, not accepted.
    pub(crate) fn adopted(&self) {
        self.active.fetch_add(1, Ordering::Relaxed);
    }
}

/// Serves one connection on its own task (the guard counts it until the
/// task ends): one the core accepted, or one another core moved here.
pub(crate) type Spawner = Box<dyn Fn(crate::net::Stream, super::serve::ConnGuard, Arrival)>;

/// How a connection came to a core.
pub(crate) enum Arrival {
    /// From its listener: a TLS listener's begins with the handshake.
    Accepted,
    /// From another core, at a request boundary, with what its handler
    /// carried: its session, if it has one, is established.
    Moved(crate::handler::MovedState),
}

/// Makes a core's [`Spawner`] for one listener: its handler factory, with
/// the handler's type erased, so listeners of different handlers sit in
/// one list. Only the accept calls through it; a connection's task is
/// the handler's own type. With it, the handler's
/// [`overload_bound`](Handler::overload_bound).
pub(crate) type MakeSpawner =
    Arc<dyn Fn(&CoreContext, Option<TlsSetup>) -> (Spawner, Option<Duration>) + Send + Sync>;

/// A TLS listener's handshake: its configuration and limits.
#[derive(Clone)]
pub(crate) struct TlsSetup {
    pub(crate) config: Arc<rustls::ServerConfig>,
    pub(crate) timeout: std::time::Duration,
    /// How long a connection may stay silent before its first byte.
    pub(crate) first_byte_timeout: std::time::Duration,
    /// Most handshakes in progress on one core.
    pub(crate) max_handshakes: usize,
}

/// A listener to bind: where, the factory of its handlers, and its TLS
/// configuration if it has one.
#[derive(Clone)]
pub(crate) struct ListenerSpec {
    pub(crate) addr: Endpoint,
    pub(crate) make: MakeSpawner,
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
}

impl ListenerSpec {
    pub(crate) fn new<H, F>(addr: Endpoint, factory: F) -> ListenerSpec
    where
        H: Handler,
        F: Fn(&CoreContext) -> H + Send + Sync + 'static,
    {
        let make: MakeSpawner = Arc::new(move |ctx: &CoreContext, tls: Option<TlsSetup>| {
            let handler = Rc::new(factory(ctx));
            let overload_bound = handler.overload_bound();
            let spawner: Spawner = match tls {
                None => Box::new(move |stream, guard, arrival| match arrival {
                    Arrival::Accepted => super::serve::spawn_connection(stream, &handler, guard),
                    Arrival::Moved(state) => {
                        super::serve::spawn_moved(stream, &handler, guard, state)
                    }
                }),
                Some(tls) => Box::new(move |stream, guard, arrival| match arrival {
                    Arrival::Accepted => {
                        super::serve::spawn_tls_connection(stream, &handler, guard, tls.clone())
                    }
                    Arrival::Moved(state) => {
                        super::serve::spawn_moved(stream, &handler, guard, state)
                    }
                }),
            };
            (spawner, overload_bound)
        });
        ListenerSpec {
            addr,
            make,
            tls: None,
        }
    }
}

impl fmt::Debug for ListenerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listener")
            .field("addr", &self.addr)
            .finish()
    }
}

/// A listener bound for every core: one socket each, where it listens,
/// and its socket file.
pub(crate) struct Bound {
    pub(crate) sockets: Vec<OwnedFd>,
    pub(crate) addr: Endpoint,
    pub(crate) file: Option<Arc<SocketFile>>,
    /// Whether its sockets joined a running server's `SO_REUSEPORT`
    /// group (a take-over), after that server's.
    pub(crate) joined: bool,
}

/// How a server binds its listeners.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BindOptions {
    pub(crate) cores: usize,
    pub(crate) backlog: i32,
    pub(crate) take_over: bool,
    pub(crate) unix_mode: Option<u32>,
}

/// Binds `addr` for `options.cores` cores.
pub(crate) fn bind(addr: &Endpoint, options: BindOptions) -> io::Result<Bound> {
    match addr {
        Endpoint::Tcp(tcp) => {
            let (sockets, bound, joined) =
                bind_group(*tcp, options.cores, options.backlog, options.take_over)?;
            Ok(Bound {
                sockets,
                addr: Endpoint::Tcp(bound),
                file: None,
                joined,
            })
        }
        Endpoint::Unix(unix) => {
            let unix_options = UnixOptions {
                backlog: options.backlog,
                mode: options.unix_mode,
                take_over: options.take_over,
            };
            let bound = bind_unix(unix, &unix_options)?;
            // The cores share the one socket (see the module's docs).
            let mut sockets = Vec::with_capacity(options.cores);
            for _ in 1..options.cores {
                sockets.push(bound.fd.try_clone()?);
            }
            sockets.push(bound.fd);
            Ok(Bound {
                sockets,
                addr: Endpoint::Unix(bound.addr),
                file: bound.file.map(Arc::new),
                joined: false,
            })
        }
    }
}
