//! `hyper_h2`: the HTTP/2 baseline `benches/h2.sh` measures percore
//! against: hyper's HTTP/2 server (`hyper::server::conn::http2` with its
//! defaults) on one tokio current-thread runtime per listed CPU, pinned,
//! each with its own SO_REUSEPORT listener. In the clear it speaks HTTP/2
//! by prior knowledge (h2c, no upgrade); with `--tls-cert`/`--tls-key` it
//! serves TLS through tokio-rustls with the same rustls version, provider
//! and settings as `hyper_tls` (`percore_benches::tls::server_config`),
//! ALPN `h2`. It answers every request as `http_echo` answers a GET: 200
//! with the 20-byte JSON body.
//!
//! Usage: `hyper_h2 [--port P] [--cores 0,1] [--tls-cert FILE --tls-key FILE]`,
//! listening on 127.0.0.1:P (default 8080) until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use percore_benches::cli::parse_cpu_list;
use percore_benches::h2_baseline;
use percore_benches::signals::block_stop_signals;
use percore_benches::tls::server_config;
use percore_benches::tokio_servers::{start_ct_with, stopped};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

struct Options {
    port: u16,
    cores: Vec<usize>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut o = Options {
        port: 8080,
        cores: Vec::new(),
        cert: None,
        key: None,
    };
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" => o.port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--cores" => o.cores = parse_cpu_list(&value()?)?,
            "--tls-cert" => o.cert = Some(PathBuf::from(value()?)),
            "--tls-key" => o.key = Some(PathBuf::from(value()?)),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if o.cert.is_some() != o.key.is_some() {
        return Err("--tls-cert and --tls-key go together".into());
    }
    Ok(o)
}

/// One runtime's accept loop, until `stop` says so.
async fn accept_loop(
    listener: TcpListener,
    mut stop: watch::Receiver<bool>,
    tls: Option<TlsAcceptor>,
) {
    loop {
        tokio::select! {
            biased;
            () = stopped(&mut stop) => return,
            r = listener.accept() => match r {
                Ok((tcp, _)) => {
                    // As the other baselines: answers leave at once.
                    let _ = tcp.set_nodelay(true);
                    let tls = tls.clone();
                    tokio::spawn(async move {
                        match tls {
                            Some(acceptor) => {
                                if let Ok(stream) = acceptor.accept(tcp).await {
                                    h2_baseline::serve(stream).await;
                                }
                            }
                            None => h2_baseline::serve(tcp).await,
                        }
                    });
                }
                // EMFILE and friends: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            },
        }
    }
}

fn acceptor(o: &Options) -> Result<Option<TlsAcceptor>, String> {
    let (Some(cert), Some(key)) = (&o.cert, &o.key) else {
        return Ok(None);
    };
    let mut config = (*server_config(cert, key).map_err(|e| e.to_string())?).clone();
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Some(TlsAcceptor::from(Arc::new(config))))
}

fn main() -> ExitCode {
    let usage = "usage: hyper_h2 [--port P] [--cores 0,1] [--tls-cert FILE --tls-key FILE]";
    let o = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("hyper_h2: {e}\n{usage}");
            return ExitCode::from(2);
        }
    };
    let tls = match acceptor(&o) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("hyper_h2: {e}");
            return ExitCode::FAILURE;
        }
    };
    let signals = block_stop_signals();
    let addr = SocketAddr::from(([127, 0, 0, 1], o.port));
    let scheme = if tls.is_some() { "h2 over TLS" } else { "h2c" };
    let serve = move |listener, stop| accept_loop(listener, stop, tls.clone());
    let server = match start_ct_with(addr, &o.cores, serve) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("hyper_h2: cannot start on {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "hyper_h2: {scheme} on {} ({} current_thread runtime(s))",
        server.target(),
        o.cores.len().max(1)
    );
    signals.wait();
    match server.stop() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hyper_h2: {e}");
            ExitCode::FAILURE
        }
    }
}
