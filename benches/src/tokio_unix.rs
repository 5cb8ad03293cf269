//! The tokio baselines on a Unix socket file: `tokio-ct` and `tokio-mt`
//! as in `tokio_servers`, accepting on `tokio::net::UnixListener` and
//! serving the same per-connection code (echo, or the keep-alive HTTP
//! answer) over a `UnixStream`.
//!
//! What it measures: nothing by itself; it is the comparison point of the
//! `local_socket_*` workloads. What it does not: serve the fan-out proxy
//! (its upstream pools are TCP) or HTTPS (only TCP listeners get a TLS
//! acceptor), or remove the socket file, which stays until the caller
//! removes it (the harness removes the whole directory).
//!
//! Unix sockets have no `SO_REUSEPORT`, so a tokio-ct server with several
//! runtimes cannot give each its own socket as it does over TCP: they
//! share one listening socket, each registering its own duplicate of it,
//! as percore's cores do (the first runtime to accept takes a connection).

use std::io;
use std::os::unix::net::UnixListener as StdUnixListener;
use std::path::Path;
use std::time::Duration;

use tokio::net::UnixListener;
use tokio::sync::watch;

use crate::server::{ServerControl, Service};
use crate::target::Target;
use crate::tokio_servers::{ct_slots, serve, spawn_ct, stopped, CtServer, MtServer};

/// Binds the socket file at `path`, non-blocking so that tokio can take it.
fn bind(service: Service, path: &Path) -> io::Result<StdUnixListener> {
    if let Service::FanOut { .. } | Service::Https | Service::H2 | Service::Api = service {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("the tokio {} server listens on TCP only", service.name()),
        ));
    }
    let socket = StdUnixListener::bind(path)?;
    socket.set_nonblocking(true)?;
    Ok(socket)
}

async fn accept_loop(listener: UnixListener, service: Service, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            biased;
            () = stopped(&mut stop) => return,
            r = listener.accept() => match r {
                Ok((stream, _)) => {
                    tokio::spawn(serve(service, stream));
                }
                // EMFILE and friends: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            },
        }
    }
}

/// Starts one current_thread runtime per CPU in `cpus` (one if empty), on
/// threads named `tokio-ct-<n>`, all accepting on the socket file `path`.
pub(crate) fn start_ct(
    service: Service,
    path: &Path,
    cpus: &[usize],
) -> io::Result<Box<dyn ServerControl>> {
    let socket = bind(service, path)?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut server = CtServer {
        target: Target::Unix(path.to_path_buf()),
        stop: stop_tx,
        threads: Vec::new(),
    };
    for (n, cpu) in ct_slots(cpus).into_iter().enumerate() {
        let stop = stop_rx.clone();
        let started = socket.try_clone().and_then(|socket| {
            spawn_ct(n, cpu, move || {
                let l = UnixListener::from_std(socket)?;
                Ok(((), accept_loop(l, service, stop)))
            })
        });
        match started {
            Ok((thread, ())) => server.threads.push(thread),
            Err(e) => {
                let _ = Box::new(server).stop();
                return Err(e);
            }
        }
    }
    Ok(Box::new(server))
}

/// Starts the accept loop of a tokio-mt server on `rt` (built by
/// `tokio_servers::start_mt`), accepting on the socket file `path`.
pub(crate) fn start_mt(
    rt: tokio::runtime::Runtime,
    service: Service,
    path: &Path,
) -> io::Result<Box<dyn ServerControl>> {
    let socket = bind(service, path)?;
    let l = {
        // `from_std` registers with the runtime it is called in.
        let _in_rt = rt.enter();
        UnixListener::from_std(socket)?
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    rt.spawn(accept_loop(l, service, stop_rx));
    Ok(Box::new(MtServer {
        target: Target::Unix(path.to_path_buf()),
        stop: stop_tx,
        rt,
    }))
}
