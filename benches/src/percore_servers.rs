//! Adapter from the harness to percore: starts a percore server on the
//! io_uring or epoll backend, on loopback TCP or a Unix socket file, with
//! the shipped echo handler, the HTTP
//! handler serving `HttpEcho` (GET answers the 20-byte JSON body) in the
//! clear (HTTP/1.1, or HTTP/2 by prior knowledge) or over TLS (percore's
//! own, from `ServerBuilder::tls`), or the
//! HTTP handler serving the fan-out proxy (`FanOut`, policy `all`); and
//! starts the `HttpEcho` upstreams the fan-out workloads send to.
//!
//! What it measures: nothing by itself; the percore servers are measured
//! exactly like the tokio baselines (same clients, same CPUs). What it does
//! not: tune percore. The servers run with percore's defaults, as a user
//! would get them, except for the HTTP keep-alive request cap, lifted to
//! match the baselines; their threads are found by the `percore-<cpu>`
//! names percore gives its core threads.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::server::{Executor, ServerControl, Service, Supplies, Unavailable};
use crate::target::Target;

struct PercoreServer {
    target: Target,
    handle: percore::ServerHandle,
}

impl ServerControl for PercoreServer {
    fn target(&self) -> Target {
        self.target.clone()
    }

    fn stop(self: Box<Self>) -> io::Result<()> {
        self.handle.shutdown();
        self.handle.join()
    }
}

/// Keep-alive without a request cap, like the tokio baselines (the
/// default closes a connection after 1000 requests, nginx-style, which the
/// closed-loop clients would report as a failure).
fn http_config() -> percore_handlers::http::Config {
    let mut config = percore_handlers::http::Config::default();
    config.max_requests = u32::MAX;
    config
}

/// The handler of `Service::Http` and `Service::Https` (over TLS, the
/// server hands it the decrypted stream).
fn http_echo(
    _ctx: &percore::CoreContext,
) -> percore_handlers::http::HttpHandler<percore_handlers::http::HttpEcho> {
    percore_handlers::http::HttpHandler::with_config(
        percore_handlers::http::HttpEcho,
        http_config(),
    )
}

/// How long a stopping server lets connections finish (the harness closes
/// all of its connections before it stops a server).
const DRAIN: Duration = Duration::from_secs(1);

/// Starts percore on `cpus` with the backend of `executor` (`Uring` or
/// `Epoll`), serving `service` at `at`: a TCP address (port 0: chosen by
/// the kernel) or a Unix socket file, which percore creates, shares among
/// its cores and removes at the stop. A fan-out proxy sends to the
/// upstreams of `supplies`; an HTTPS server presents its certificates.
pub fn start(
    executor: Executor,
    service: Service,
    at: &Target,
    cpus: &[usize],
    supplies: &Supplies<'_>,
) -> Result<Box<dyn ServerControl>, Unavailable> {
    let backend = match executor {
        Executor::Uring => percore::Backend::Uring,
        Executor::Epoll => percore::Backend::Epoll,
        other => {
            return Err(Unavailable(format!(
                "{} is not a percore backend",
                other.name()
            )))
        }
    };
    let cores: Vec<usize> = if cpus.is_empty() {
        vec![0]
    } else {
        cpus.to_vec()
    };
    let endpoint = match at {
        Target::Unix(path) => percore::net::Endpoint::Unix(percore::net::UnixAddr::path(path)),
        tcp => percore::net::Endpoint::Tcp(tcp.tcp().map_err(|e| Unavailable(e.to_string()))?),
    };
    let builder = percore::Server::builder()
        .listen(endpoint)
        .cores(cores)
        .backend(backend)
        .drain_timeout(DRAIN);
    let started = match service {
        // The same handler over either transport: it is handed a
        // `Connection` whatever listener accepted it.
        Service::Echo | Service::UnixEcho => {
            builder.start(|_ctx: &percore::CoreContext| percore_handlers::echo::Echo)
        }
        // With the `h2` feature, the same handler answers a connection
        // that begins with the HTTP/2 preface in HTTP/2.
        Service::Http | Service::H2 => builder.start(http_echo),
        Service::Https => {
            let certs = supplies
                .certificates()
                .map_err(|e| Unavailable(e.to_string()))?;
            let config = percore::tls::server_config(&certs.cert(), &certs.key())
                .map_err(|e| Unavailable(format!("percore's TLS configuration: {e}")))?;
            builder.tls(config).start(http_echo)
        }
        // The proxy with its defaults (policy `all`, 15 s deadline, pool
        // of 1024 idle connections per upstream), as the `fanout` binary
        // runs it with `--width`.
        Service::Api => {
            return Err(Unavailable(
                "the API server is a process of its own (json_api)".to_string(),
            ))
        }
        Service::FanOut { width } => {
            let mut config = percore_handlers::proxy::Config::new(supplies.upstreams.to_vec());
            config.width = width;
            config
                .validate()
                .map_err(|e| Unavailable(format!("fan-out config: {e}")))?;
            builder.start(move |_ctx: &percore::CoreContext| {
                percore_handlers::http::HttpHandler::with_config(
                    percore_handlers::proxy::FanOut::new(config.clone()).expect("validated above"),
                    http_config(),
                )
            })
        }
    };
    let handle = started.map_err(|e| {
        Unavailable(format!(
            "percore {} backend failed to start: {e}",
            executor.name()
        ))
    })?;
    // PERCORE_BACKEND in the environment overrides the builder: never report
    // one backend's numbers under the other's name.
    if handle.backend() != backend {
        let got = handle.backend();
        handle.shutdown();
        let _ = handle.join();
        return Err(Unavailable(format!(
            "asked for the {backend} backend but percore runs {got} (is PERCORE_BACKEND set?)"
        )));
    }
    let target = match at {
        Target::Unix(path) => Target::Unix(path.clone()),
        _ => Target::Tcp(handle.local_addr()),
    };
    Ok(Box::new(PercoreServer { target, handle }))
}

/// The fan-out upstreams: `count` percore `HttpEcho` servers, one core
/// each, on `cpu` (the client's CPU, so that the proxy's CPU holds the
/// proxy alone), io_uring backend or epoll where io_uring is unavailable.
/// Their keep-alive idle timeout is an hour, so that pooled connections of
/// a proxy waiting for its next workload are not closed under it.
#[derive(Debug)]
pub struct Upstreams {
    servers: Vec<percore::ServerHandle>,
    /// Their addresses.
    pub addrs: Vec<SocketAddr>,
    /// The backend they run.
    pub backend: percore::Backend,
}

impl Upstreams {
    /// Starts them (see [`Upstreams`]).
    pub fn start(count: usize, cpu: usize) -> io::Result<Upstreams> {
        let mut ups = Upstreams {
            servers: Vec::new(),
            addrs: Vec::new(),
            backend: percore::Backend::Uring,
        };
        for _ in 0..count {
            let handle = match Self::start_one(ups.backend, cpu) {
                Ok(h) => h,
                Err(_) if ups.servers.is_empty() && ups.backend == percore::Backend::Uring => {
                    ups.backend = percore::Backend::Epoll;
                    Self::start_one(ups.backend, cpu)?
                }
                Err(e) => {
                    ups.stop();
                    return Err(e);
                }
            };
            ups.backend = handle.backend();
            ups.addrs.push(handle.local_addr());
            ups.servers.push(handle);
        }
        Ok(ups)
    }

    fn start_one(backend: percore::Backend, cpu: usize) -> io::Result<percore::ServerHandle> {
        percore::Server::builder()
            .address(SocketAddr::from(([127, 0, 0, 1], 0)))
            .cores([cpu])
            .backend(backend)
            .drain_timeout(DRAIN)
            .start(|_ctx: &percore::CoreContext| {
                let mut config = http_config();
                config.idle_timeout = Duration::from_secs(3600);
                percore_handlers::http::HttpHandler::with_config(
                    percore_handlers::http::HttpEcho,
                    config,
                )
            })
    }

    /// Stops them and waits for their threads.
    pub fn stop(self) {
        for h in &self.servers {
            h.shutdown();
        }
        for h in self.servers {
            let _ = h.join();
        }
    }
}
