//! `percore_baseline`: `tokio_baseline`'s HTTP server on percore.
//!
//! Each connection runs the exact per-request code of the tokio baseline
//! (`baseline_http::respond`: httparse, method dispatch, body echo, a cached
//! `Date`), with percore's reads and writes. Side by side with
//! `tokio_baseline` it compares the two runtimes alone; `http_echo` adds
//! percore's HTTP layer (limits, timeouts, smuggling checks, the service
//! API) on top, so the three together say what each layer costs.
//!
//! Usage: `percore_baseline [--port P] [--cores 0,1] [--backend
//! uring|epoll|auto]`, on 0.0.0.0:P (default 8080). Stops gracefully on
//! SIGINT, SIGTERM or SIGHUP.

use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;

use percore::{Backend, Connection, Handler};
use percore_benches::baseline_http::{respond, DateLine, Parsed};
use percore_benches::cli::parse_cpu_list;

/// The largest incomplete request kept between reads, as the tokio
/// baseline's: a longer one is not this workload, and closes.
const MAX_CARRY: usize = 64 * 1024;

/// The baseline HTTP handler (see the module docs).
struct BaselineHttp;

impl Handler for BaselineHttp {
    async fn serve(&self, conn: Connection) -> io::Result<()> {
        let mut carry: Vec<u8> = Vec::new();
        let mut out: Vec<u8> = Vec::with_capacity(4096);
        let mut date = DateLine::default();
        while let Some(buf) = conn.read().await? {
            date.refresh();
            out.clear();
            let (used, close) = if carry.is_empty() {
                let (used, close) = answer(&buf, &mut out, &date);
                carry.extend_from_slice(&buf[used..]);
                (used, close)
            } else {
                carry.extend_from_slice(&buf);
                let (used, close) = answer(&carry, &mut out, &date);
                carry.drain(..used);
                (used, close)
            };
            drop(buf);
            if !out.is_empty() {
                let (res, back) = conn.write_all(out).await;
                res?;
                out = back;
            }
            if close || (used == 0 && carry.len() > MAX_CARRY) {
                return Ok(());
            }
        }
        Ok(())
    }
}

/// Answers every complete request at the start of `input`: the bytes used,
/// and whether the connection must close.
fn answer(input: &[u8], out: &mut Vec<u8>, date: &DateLine) -> (usize, bool) {
    let mut used = 0;
    while used < input.len() {
        match respond(&input[used..], out, date) {
            Parsed::Answered(n) => used += n,
            Parsed::Partial => return (used, false),
            Parsed::Bad => return (used, true),
        }
    }
    (used, false)
}

struct Options {
    port: u16,
    cores: Vec<usize>,
    backend: Backend,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut o = Options {
        port: 8080,
        cores: Vec::new(),
        backend: Backend::Auto,
    };
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" => o.port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--cores" => o.cores = parse_cpu_list(&value()?)?,
            "--backend" => o.backend = value()?.parse().map_err(|e| format!("--backend: {e}"))?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    let o = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("percore_baseline: {e}");
            return ExitCode::from(2);
        }
    };
    let mut builder = percore::Server::builder()
        .address(SocketAddr::from(([0, 0, 0, 0], o.port)))
        .backend(o.backend);
    if !o.cores.is_empty() {
        builder = builder.cores(o.cores);
    }
    match builder.serve(|_ctx: &percore::CoreContext| BaselineHttp) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("percore_baseline: {e}");
            ExitCode::FAILURE
        }
    }
}
