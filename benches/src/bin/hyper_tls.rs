//! `hyper_tls`: the HTTPS baseline `benches/tls.sh` measures percore
//! against: hyper's HTTP/1.1 server on tokio current-thread runtimes, with
//! tokio-rustls over the same rustls version and crypto provider (*ring*)
//! and the same settings as percore's `ServerTls` (TLS 1.2 and 1.3, ALPN
//! `http/1.1`, session tickets: `percore_benches::tls::server_config`).
//! It answers every request as `http_echo` answers a GET: 200 with the
//! 20-byte JSON body.
//!
//! Usage: `hyper_tls --tls-cert FILE --tls-key FILE [--port P] [--cores 0,1]`.
//! One runtime per listed CPU, each pinned, with its own SO_REUSEPORT
//! listener on 127.0.0.1:P (default 8443). Runs until killed.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use percore_benches::cli::parse_cpu_list;
use percore_benches::http::BODY;
use percore_benches::tls::server_config;
use tokio::net::{TcpListener, TcpSocket};
use tokio_rustls::TlsAcceptor;

struct Options {
    port: u16,
    cores: Vec<usize>,
    cert: PathBuf,
    key: PathBuf,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let (mut port, mut cores, mut cert, mut key) = (8443, vec![0], None, None);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" => port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--cores" => cores = parse_cpu_list(&value()?)?,
            "--tls-cert" => cert = Some(PathBuf::from(value()?)),
            "--tls-key" => key = Some(PathBuf::from(value()?)),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Options {
        port,
        cores,
        cert: cert.ok_or("--tls-cert FILE is required")?,
        key: key.ok_or("--tls-key FILE is required")?,
    })
}

fn listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.set_nodelay(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

async fn answer(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut res = Response::new(Full::new(Bytes::from_static(BODY)));
    res.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(res)
}

async fn serve(addr: SocketAddr, acceptor: TlsAcceptor) -> io::Result<()> {
    let listener = listener(addr)?;
    loop {
        let (tcp, _) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        tokio::task::spawn_local(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), hyper::service::service_fn(answer))
                .await;
        });
    }
}

fn main() -> ExitCode {
    let o = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("hyper_tls: {e}");
            return ExitCode::from(2);
        }
    };
    let config = match server_config(&o.cert, &o.key) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("hyper_tls: {e}");
            return ExitCode::FAILURE;
        }
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], o.port));
    eprintln!("hyper_tls: https on {addr}, {} runtime(s)", o.cores.len());
    let threads: Vec<_> = o
        .cores
        .iter()
        .map(|&cpu| {
            let acceptor = TlsAcceptor::from(config.clone());
            std::thread::spawn(move || -> io::Result<()> {
                core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, serve(addr, acceptor))
            })
        })
        .collect();
    for t in threads {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                eprintln!("hyper_tls: {e}");
                return ExitCode::FAILURE;
            }
            Err(_) => return ExitCode::FAILURE,
        }
    }
    ExitCode::SUCCESS
}
