//! `hyper_plain`: hyper's HTTP/1.1 server in the clear, as a hyper user
//! would run it thread per core: one tokio current-thread runtime per
//! listed CPU, pinned, each with its own SO_REUSEPORT listener, every
//! connection served by `hyper::server::conn::http1` with its defaults.
//! It answers every request as `http_echo` answers a GET: 200 with the
//! 20-byte JSON body. `benches/idle_100k.sh` sets it beside percore and
//! `tokio_baseline` (whose HTTP code is the harness's own, not hyper's).
//!
//! No timer is given to hyper, so no timeout closes a connection, and
//! there is no connection limit: an idle client is held until it leaves.
//!
//! Usage: `hyper_plain [--port P] [--cores 0,1]`, listening on
//! 127.0.0.1:P (default 8080) until SIGINT or SIGTERM.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use percore_benches::cli::parse_cpu_list;
use percore_benches::http::BODY;
use percore_benches::signals::block_stop_signals;
use percore_benches::tokio_servers::{start_ct_with, stopped};
use tokio::net::TcpListener;
use tokio::sync::watch;

struct Options {
    port: u16,
    cores: Vec<usize>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut o = Options {
        port: 8080,
        cores: Vec::new(),
    };
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" => o.port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--cores" => o.cores = parse_cpu_list(&value()?)?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

async fn answer(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut res = Response::new(Full::new(Bytes::from_static(BODY)));
    res.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(res)
}

/// One runtime's accept loop, until `stop` says so.
async fn accept_loop(listener: TcpListener, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            biased;
            () = stopped(&mut stop) => return,
            r = listener.accept() => match r {
                Ok((tcp, _)) => {
                    // As the other baselines: answers leave at once.
                    let _ = tcp.set_nodelay(true);
                    tokio::spawn(async move {
                        // I/O errors just end the connection.
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(tcp), hyper::service::service_fn(answer))
                            .await;
                    });
                }
                // EMFILE and friends: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            },
        }
    }
}

fn main() -> ExitCode {
    let o = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("hyper_plain: {e}\nusage: hyper_plain [--port P] [--cores 0,1]");
            return ExitCode::from(2);
        }
    };
    let signals = block_stop_signals();
    let addr = SocketAddr::from(([127, 0, 0, 1], o.port));
    let server = match start_ct_with(addr, &o.cores, accept_loop) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("hyper_plain: cannot start on {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "hyper_plain: http on {} ({} current_thread runtime(s))",
        server.target(),
        o.cores.len().max(1)
    );
    signals.wait();
    match server.stop() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hyper_plain: {e}");
            ExitCode::FAILURE
        }
    }
}
