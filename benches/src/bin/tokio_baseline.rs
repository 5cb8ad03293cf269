//! `tokio_baseline`: the harness's tokio current-thread server as a process,
//! so external load generators (`benches/wrk.sh`) can measure it side by
//! side with the percore example servers.
//!
//! Usage: `tokio_baseline [--service http|echo|fanout] [--port P]
//! [--cores 0,1] [--upstream HOST:PORT]... [--width K]`. One current_thread
//! runtime per listed CPU, each pinned, with its own SO_REUSEPORT listener on
//! 127.0.0.1:P (default 8080). Runs until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::process::ExitCode;

use percore_benches::cli::parse_cpu_list;
use percore_benches::server::{Service, Supplies};
use percore_benches::signals::block_stop_signals;
use percore_benches::tokio_servers;

struct Options {
    service: Service,
    port: u16,
    cores: Vec<usize>,
    upstreams: Vec<SocketAddr>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut o = Options {
        service: Service::Http,
        port: 8080,
        cores: Vec::new(),
        upstreams: Vec::new(),
    };
    let mut width = None;
    let mut service = "http".to_string();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--service" => service = value()?,
            "--port" => o.port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--cores" => o.cores = parse_cpu_list(&value()?)?,
            "--upstream" => o
                .upstreams
                .push(value()?.parse().map_err(|e| format!("--upstream: {e}"))?),
            "--width" => width = Some(value()?.parse().map_err(|e| format!("--width: {e}"))?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    o.service = match service.as_str() {
        "http" => Service::Http,
        "echo" => Service::Echo,
        "fanout" if o.upstreams.is_empty() => {
            return Err("--service fanout needs at least one --upstream".into())
        }
        "fanout" => Service::FanOut {
            width: width.unwrap_or(o.upstreams.len()),
        },
        other => {
            return Err(format!(
                "--service {other:?}: expected http, echo or fanout"
            ))
        }
    };
    Ok(o)
}

fn main() -> ExitCode {
    let o = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("tokio_baseline: {e}");
            return ExitCode::from(2);
        }
    };
    let signals = block_stop_signals();
    let addr = SocketAddr::from(([127, 0, 0, 1], o.port));
    let supplies = Supplies {
        upstreams: &o.upstreams,
        certificates: None,
    };
    let server = match tokio_servers::start_ct_at(addr, o.service, &o.cores, &supplies) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("tokio_baseline: cannot start on {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "tokio_baseline: {} on {} ({} current_thread runtime(s))",
        o.service.name(),
        server.target(),
        o.cores.len().max(1)
    );
    signals.wait();
    match server.stop() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tokio_baseline: {e}");
            ExitCode::FAILURE
        }
    }
}
