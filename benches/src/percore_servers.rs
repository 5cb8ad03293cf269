//! Adapter from the harness to percore: starts a percore server on the
//! io_uring or epoll backend with the shipped echo handler or the HTTP
//! handler serving `HttpEcho` (GET answers the 20-byte JSON body).
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

use crate::server::{Executor, ServerControl, Service, Unavailable};

struct PercoreServer {
    addr: SocketAddr,
    handle: percore::ServerHandle,
}

impl ServerControl for PercoreServer {
    fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    fn stop(self: Box<Self>) -> io::Result<()> {
        self.handle.shutdown();
        self.handle.join()
    }
}

/// How long a stopping server lets connections finish (the harness closes
/// all of its connections before it stops a server).
const DRAIN: Duration = Duration::from_secs(1);

/// Starts percore on `cpus` with the backend of `executor` (`Uring` or
/// `Epoll`), serving `service` on 127.0.0.1, port chosen by the kernel.
pub fn start(
    executor: Executor,
    service: Service,
    cpus: &[usize],
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
    let builder = percore::Server::builder()
        .address(SocketAddr::from(([127, 0, 0, 1], 0)))
        .cores(cores)
        .backend(backend)
        .drain_timeout(DRAIN);
    let started = match service {
        Service::Echo => builder.start(|_ctx: &percore::CoreContext| percore_handlers::echo::Echo),
        // Keep-alive without a request cap, like the tokio baselines (the
        // default closes a connection after 1000 requests, nginx-style,
        // which the closed-loop clients would report as a failure).
        Service::Http => builder.start(|_ctx: &percore::CoreContext| {
            let mut config = percore_handlers::http::Config::default();
            config.max_requests = u32::MAX;
            percore_handlers::http::HttpHandler::with_config(
                percore_handlers::http::HttpEcho,
                config,
            )
        }),
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
    Ok(Box::new(PercoreServer {
        addr: handle.local_addr(),
        handle,
    }))
}
