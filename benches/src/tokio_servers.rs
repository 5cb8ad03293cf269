//! The tokio baseline servers: `tokio-ct` (one current_thread runtime per
//! server CPU, each with its own SO_REUSEPORT listener, the fair
//! thread-per-core baseline) and `tokio-mt` (tokio's multi-thread runtime,
//! one listener), each serving raw echo or the fixed keep-alive HTTP answer.
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

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;

use crate::baseline_http::{respond, DateLine, Parsed};
use crate::http;
use crate::server::{ServerControl, Service};
use crate::sys;
use crate::tokio_fanout;

const LOOPBACK_ANY_PORT: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::LOCALHOST,
    0,
));
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
}

impl Work {
    fn of(service: Service, upstreams: &[SocketAddr]) -> io::Result<Work> {
        Ok(match service {
            Service::FanOut { width } => {
                Work::FanOut(Arc::new(tokio_fanout::Spec::new(upstreams, width)?))
            }
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
                    }
                }
                // EMFILE and friends: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            },
        }
    }
}

async fn stopped(stop: &mut watch::Receiver<bool>) {
    // An error means the sender is gone: stop as well.
    let _ = stop.wait_for(|s| *s).await;
}

async fn serve(service: Service, stream: TcpStream) {
    // I/O errors (resets from clients closing mid-write) just end the connection.
    let _ = match service {
        Service::Echo => echo(stream).await,
        Service::Http => http_conn(stream).await,
        Service::FanOut { .. } => Ok(()), // served by `tokio_fanout`
    };
}

async fn echo(mut s: TcpStream) -> io::Result<()> {
    let mut buf = vec![0u8; ECHO_BUF];
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        s.write_all(&buf[..n]).await?;
    }
}

async fn http_conn(mut s: TcpStream) -> io::Result<()> {
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
        }
        if close {
            return Ok(());
        }
        inb.copy_within(used..filled, 0);
        filled -= used;
    }
}

struct CtServer {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
}

impl ServerControl for CtServer {
    fn local_addr(&self) -> SocketAddr {
        self.addr
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
/// threads named `tokio-ct-<n>`, each with its own listener on one shared
/// loopback port. A fan-out server sends to `upstreams`.
pub fn start_ct(
    service: Service,
    cpus: &[usize],
    upstreams: &[SocketAddr],
) -> io::Result<Box<dyn ServerControl>> {
    start_ct_at(LOOPBACK_ANY_PORT, service, cpus, upstreams)
}

/// [`start_ct`] on a chosen address (port 0: any free port, shared by all
/// the runtimes).
pub fn start_ct_at(
    addr: SocketAddr,
    service: Service,
    cpus: &[usize],
    upstreams: &[SocketAddr],
) -> io::Result<Box<dyn ServerControl>> {
    let work = Work::of(service, upstreams)?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let slots: Vec<Option<usize>> = if cpus.is_empty() {
        vec![None]
    } else {
        cpus.iter().copied().map(Some).collect()
    };
    let mut server = CtServer {
        addr,
        stop: stop_tx,
        threads: Vec::new(),
    };
    for (n, cpu) in slots.into_iter().enumerate() {
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<SocketAddr>>();
        let bind_to = server.addr;
        let stop = stop_rx.clone();
        let work = work.clone();
        let t = std::thread::Builder::new()
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
                rt.block_on(async move {
                    let l = match listener(bind_to).and_then(|l| Ok((l.local_addr()?, l))) {
                        Ok((addr, l)) => {
                            let _ = ready_tx.send(Ok(addr));
                            l
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    accept_loop(l, work, stop).await;
                });
            })?;
        server.threads.push(t);
        let started = ready_rx
            .recv()
            .map_err(|_| io::Error::other("tokio-ct thread exited before binding"))
            .and_then(|r| r);
        match started {
            Ok(addr) => server.addr = addr,
            Err(e) => {
                let _ = Box::new(server).stop();
                return Err(e);
            }
        }
    }
    Ok(Box::new(server))
}

struct MtServer {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    rt: tokio::runtime::Runtime,
}

impl ServerControl for MtServer {
    fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    fn stop(self: Box<Self>) -> io::Result<()> {
        let _ = self.stop.send(true);
        self.rt.shutdown_timeout(Duration::from_secs(2));
        Ok(())
    }
}

/// Starts tokio's multi-thread runtime with one worker per CPU in `cpus`
/// (threads named `tokio-mt`, confined to `cpus`) and one listener. A
/// fan-out server sends to `upstreams` (one connection pool per worker).
pub fn start_mt(
    service: Service,
    cpus: &[usize],
    upstreams: &[SocketAddr],
) -> io::Result<Box<dyn ServerControl>> {
    let work = Work::of(service, upstreams)?;
    let pin: Vec<usize> = cpus.to_vec();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cpus.len().max(1))
        .thread_name("tokio-mt")
        .on_thread_start(move || {
            sys::pin_current_thread_to(&pin);
        })
        .enable_all()
        .build()?;
    let l = rt.block_on(async { listener(LOOPBACK_ANY_PORT) })?;
    let addr = l.local_addr()?;
    let (stop_tx, stop_rx) = watch::channel(false);
    rt.spawn(accept_loop(l, work, stop_rx));
    Ok(Box::new(MtServer {
        addr,
        stop: stop_tx,
        rt,
    }))
}
