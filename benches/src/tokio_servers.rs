//! The tokio baseline servers: `tokio-ct` (one current_thread runtime per
//! server CPU, each with its own SO_REUSEPORT listener, the fair
//! thread-per-core baseline) and `tokio-mt` (tokio's multi-thread runtime,
//! one listener), each serving raw echo or the fixed keep-alive HTTP answer,
//! in the clear or over TLS (tokio-rustls, configured as percore's TLS:
//! `tls::server_config`), or that answer over HTTP/2 (hyper's server,
//! `h2_baseline`). This file has their TCP listeners; `tokio_unix`
//! the Unix-socket ones.
//!
//! What it measures: nothing by itself; it is the comparison point. The
//! servers are tuned as a careful tokio server would be: TCP_NODELAY, the
//! responses to all requests of one read batched into one write, no
//! allocation per request (one buffer per connection). The HTTP server does
//! the work of percore's `http_echo` per request (see `baseline_http`).
//!
//! tokio-mt gets as many worker threads as server CPUs and all its threads
//! are confined to those CPUs: that is what tokio's default worker count
//! gives under `taskset` with the same CPUs.

use std::io;
use std::net::SocketAddr;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::baseline_http::{respond, DateLine, Parsed};
use crate::h2_baseline;
use crate::http;
use crate::server::{ServerControl, Service, Supplies};
use crate::sys;
use crate::target::Target;
use crate::tls;
use crate::tokio_fanout;
use crate::tokio_unix;

const BACKLOG: u32 = 4096;
const ECHO_BUF: usize = 64 * 1024;
const HTTP_BUF: usize = 8 * 1024;
/// The input buffer doubles for larger requests, up to this.
const HTTP_MAX_BUF: usize = 1024 * 1024;

fn listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let s = TcpSocket::new_v4()?;
    s.set_reuseaddr(true)?;
    s.set_reuseport(true)?;
    s.bind(addr)?;
    s.listen(BACKLOG)
}

/// What the accepted connections get.
#[derive(Clone)]
enum Work {
    Plain(Service),
    FanOut(Arc<tokio_fanout::Spec>),
    /// The handshake, then the HTTP answers on the decrypted stream.
    Tls(TlsAcceptor),
    /// HTTP/2 by prior knowledge: hyper's server (`h2_baseline`).
    H2,
}

impl Work {
    fn of(service: Service, supplies: &Supplies<'_>) -> io::Result<Work> {
        Ok(match service {
            Service::FanOut { width } => Work::FanOut(Arc::new(tokio_fanout::Spec::new(
                supplies.upstreams,
                width,
            )?)),
            Service::Https => {
                let certs = supplies.certificates()?;
                Work::Tls(TlsAcceptor::from(tls::server_config(
                    &certs.cert(),
                    &certs.key(),
                )?))
            }
            Service::Api => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "the API server is a process of its own (axum_api)",
                ))
            }
            Service::H2 => Work::H2,
            other => Work::Plain(other),
        })
    }
}

async fn accept_loop(listener: TcpListener, work: Work, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            biased;
            () = stopped(&mut stop) => return,
            r = listener.accept() => match r {
                Ok((stream, _)) => {
                    // Failing to set NODELAY would only skew latency; keep serving.
                    let _ = stream.set_nodelay(true);
                    match &work {
                        Work::Plain(service) => {
                            tokio::spawn(serve(*service, stream));
                        }
                        Work::FanOut(spec) => {
                            let spec = spec.clone();
                            tokio::spawn(async move {
                                // I/O errors just end the connection.
                                let _ = tokio_fanout::serve(stream, spec).await;
                            });
                        }
                        Work::H2 => {
                            tokio::spawn(h2_baseline::serve(stream));
                        }
                        Work::Tls(acceptor) => {
                            let handshake = acceptor.accept(stream);
                            tokio::spawn(async move {
                                // A failed handshake just ends the connection.
                                if let Ok(stream) = handshake.await {
                                    serve(Service::Https, stream).await;
                                }
                            });
                        }
                    }
                }
                // EMFILE and friends: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            },
        }
    }
}

/// Resolves once `stop` says so.
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    // An error means the sender is gone: stop as well.
    let _ = stop.wait_for(|s| *s).await;
}

/// Serves one connection of a plain service, over either transport, or
/// of `Service::Https` once its handshake is done.
pub(crate) async fn serve<S: AsyncRead + AsyncWrite + Unpin>(service: Service, stream: S) {
    // I/O errors (resets from clients closing mid-write) just end the connection.
    let _ = match service {
        Service::Echo | Service::UnixEcho => echo(stream).await,
        Service::Http | Service::Https => http_conn(stream).await,
        Service::FanOut { .. } => Ok(()), // served by `tokio_fanout`
        Service::H2 => Ok(()),            // served by `h2_baseline`
        Service::Api => Ok(()),           // served by `axum_api`
    };
}

async fn echo<S: AsyncRead + AsyncWrite + Unpin>(mut s: S) -> io::Result<()> {
    let mut buf = vec![0u8; ECHO_BUF];
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        s.write_all(&buf[..n]).await?;
    }
}

async fn http_conn<S: AsyncRead + AsyncWrite + Unpin>(mut s: S) -> io::Result<()> {
    let mut inb = vec![0u8; HTTP_BUF];
    let mut filled = 0;
    let mut out = Vec::with_capacity(http::RESPONSE.len() * 16);
    let mut date = DateLine::default();
    loop {
        if filled == inb.len() {
            if inb.len() >= HTTP_MAX_BUF {
                return Ok(()); // a request larger than this: not our workload
            }
            inb.resize(inb.len() * 2, 0);
        }
        let n = s.read(&mut inb[filled..]).await?;
        if n == 0 {
            return Ok(());
        }
        filled += n;
        date.refresh();
        out.clear();
        let mut used = 0;
        let close = loop {
            match respond(&inb[used..filled], &mut out, &date) {
                Parsed::Answered(n) => used += n,
                Parsed::Partial => break false,
                Parsed::Bad => break true,
            }
        };
        if !out.is_empty() {
            s.write_all(&out).await?;
            // A TLS stream may hold records back until flushed; a
            // TcpStream's flush costs nothing.
            s.flush().await?;
        }
        if close {
            return Ok(());
        }
        inb.copy_within(used..filled, 0);
        filled -= used;
    }
}

/// A tokio-ct server: its runtimes' threads and the signal that stops them.
pub(crate) struct CtServer {
    pub(crate) target: Target,
    pub(crate) stop: watch::Sender<bool>,
    pub(crate) threads: Vec<JoinHandle<()>>,
}

impl ServerControl for CtServer {
    fn target(&self) -> Target {
        self.target.clone()
    }

    fn stop(self: Box<Self>) -> io::Result<()> {
        let _ = self.stop.send(true);
        let mut result = Ok(());
        for t in self.threads {
            if t.join().is_err() {
                result = Err(io::Error::other("a tokio-ct server thread panicked"));
            }
        }
        result
    }
}

/// Starts one current_thread runtime per CPU in `cpus` (one if empty), on
/// threads named `tokio-ct-<n>`, listening at `at`: each runtime with its
/// own listener on one shared TCP port, or all on one Unix socket file
/// (see `tokio_unix`). A fan-out server sends to the upstreams of
/// `supplies`; an HTTPS server presents its certificates.
pub fn start_ct(
    service: Service,
    at: &Target,
    cpus: &[usize],
    supplies: &Supplies<'_>,
) -> io::Result<Box<dyn ServerControl>> {
    match at {
        Target::Unix(path) => tokio_unix::start_ct(service, path, cpus),
        tcp => start_ct_at(tcp.tcp()?, service, cpus, supplies),
    }
}

/// [`start_ct`] on a chosen address (port 0: any free port, shared by all
/// the runtimes).
pub fn start_ct_at(
    addr: SocketAddr,
    service: Service,
    cpus: &[usize],
    supplies: &Supplies<'_>,
) -> io::Result<Box<dyn ServerControl>> {
    let work = Work::of(service, supplies)?;
    start_ct_with(addr, cpus, move |l, stop| {
        accept_loop(l, work.clone(), stop)
    })
}

/// A tokio-ct server whose connections `serve` handles (an axum app, say):
/// one current_thread runtime per CPU in `cpus` (one if empty), on
/// threads named `tokio-ct-<n>`, each with its own SO_REUSEPORT listener
/// at `addr` (port 0: any free port, shared by all the runtimes). Each
/// runtime runs `serve(listener, stop)` until it returns; `stop` turns
/// true when the server is stopped (see [`stopped`]).
pub fn start_ct_with<S, F>(
    addr: SocketAddr,
    cpus: &[usize],
    serve: S,
) -> io::Result<Box<dyn ServerControl>>
where
    S: Fn(TcpListener, watch::Receiver<bool>) -> F + Clone + Send + 'static,
    F: std::future::Future<Output = ()> + 'static,
{
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut server = CtServer {
        target: Target::Tcp(addr),
        stop: stop_tx,
        threads: Vec::new(),
    };
    // Port 0 for the first runtime; the port it got for the others.
    let mut addr = addr;
    for (n, cpu) in ct_slots(cpus).into_iter().enumerate() {
        let (stop, serve) = (stop_rx.clone(), serve.clone());
        let started = spawn_ct(n, cpu, move || {
            let l = listener(addr)?;
            Ok((l.local_addr()?, serve(l, stop)))
        });
        match started {
            Ok((thread, bound)) => {
                server.threads.push(thread);
                addr = bound;
            }
            Err(e) => {
                let _ = Box::new(server).stop();
                return Err(e);
            }
        }
    }
    server.target = Target::Tcp(addr);
    Ok(Box::new(server))
}

/// The CPU of each tokio-ct runtime: one per CPU of `cpus`, or a single
/// unpinned one if it is empty.
pub(crate) fn ct_slots(cpus: &[usize]) -> Vec<Option<usize>> {
    if cpus.is_empty() {
        vec![None]
    } else {
        cpus.iter().copied().map(Some).collect()
    }
}

/// Starts runtime `n` of a tokio-ct server: a current_thread runtime on a
/// thread named `tokio-ct-<n>`, pinned to `cpu`. Inside it, `listen` makes
/// the runtime's listener and returns what the caller wants to know of it
/// with the accept loop, which the thread then runs until the stop.
/// Returns once `listen` has returned, so a failed bind fails the start.
///
/// # Errors
///
/// A thread that could not be spawned, a runtime that could not be built,
/// or `listen`'s error; the thread has ended by then.
pub(crate) fn spawn_ct<T, L, F>(
    n: usize,
    cpu: Option<usize>,
    listen: L,
) -> io::Result<(JoinHandle<()>, T)>
where
    T: Send + 'static,
    L: FnOnce() -> io::Result<(T, F)> + Send + 'static,
    F: std::future::Future<Output = ()>,
{
    let (ready_tx, ready_rx) = mpsc::channel::<io::Result<T>>();
    let thread = std::thread::Builder::new()
        .name(format!("tokio-ct-{n}"))
        .spawn(move || {
            if let Some(cpu) = cpu {
                sys::pin_current_thread(cpu);
            }
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            // Inside `block_on`: listeners register with this runtime.
            rt.block_on(async move {
                match listen() {
                    Ok((bound, accept_loop)) => {
                        let _ = ready_tx.send(Ok(bound));
                        accept_loop.await;
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            });
        })?;
    let started = ready_rx
        .recv()
        .map_err(|_| io::Error::other("tokio-ct thread exited before listening"))
        .and_then(|r| r);
    match started {
        Ok(bound) => Ok((thread, bound)),
        Err(e) => {
            // It has sent its error, or died: nothing keeps it running.
            let _ = thread.join();
            Err(e)
        }
    }
}

/// A tokio-mt server: its runtime and the signal that stops its accept loop.
pub(crate) struct MtServer {
    pub(crate) target: Target,
    pub(crate) stop: watch::Sender<bool>,
    pub(crate) rt: tokio::runtime::Runtime,
}

impl ServerControl for MtServer {
    fn target(&self) -> Target {
        self.target.clone()
    }

    fn stop(self: Box<Self>) -> io::Result<()> {
        let _ = self.stop.send(true);
        self.rt.shutdown_timeout(Duration::from_secs(2));
        Ok(())
    }
}

/// Starts tokio's multi-thread runtime with one worker per CPU in `cpus`
/// (threads named `tokio-mt`, confined to `cpus`) and one listener at
/// `at`, TCP or Unix. A fan-out server sends to the upstreams of
/// `supplies` (one connection pool per worker); an HTTPS server presents
/// its certificates.
pub fn start_mt(
    service: Service,
    at: &Target,
    cpus: &[usize],
    supplies: &Supplies<'_>,
) -> io::Result<Box<dyn ServerControl>> {
    let rt = mt_runtime(cpus)?;
    let addr = match at {
        Target::Unix(path) => return tokio_unix::start_mt(rt, service, path),
        tcp => tcp.tcp()?,
    };
    let work = Work::of(service, supplies)?;
    let l = rt.block_on(async { listener(addr) })?;
    let addr = l.local_addr()?;
    let (stop_tx, stop_rx) = watch::channel(false);
    rt.spawn(accept_loop(l, work, stop_rx));
    Ok(Box::new(MtServer {
        target: Target::Tcp(addr),
        stop: stop_tx,
        rt,
    }))
}

/// tokio's multi-thread runtime with one worker per CPU in `cpus`, its
/// threads named `tokio-mt` and confined to `cpus`.
fn mt_runtime(cpus: &[usize]) -> io::Result<tokio::runtime::Runtime> {
    let pin: Vec<usize> = cpus.to_vec();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cpus.len().max(1))
        .thread_name("tokio-mt")
        .on_thread_start(move || {
            sys::pin_current_thread_to(&pin);
        })
        .enable_all()
        .build()
}
