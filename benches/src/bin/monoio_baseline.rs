//! `monoio_baseline`: `tokio_baseline`'s HTTP server on monoio, another
//! thread-per-core runtime on io_uring, for `benches/idle_100k.sh`. The
//! per-request work is the harness's (`baseline_http`: httparse, the
//! 20-byte JSON answer, a cached `Date`), with the same 8 KiB input
//! buffer per connection as tokio's, so the two differ by their runtimes
//! and monoio's owned-buffer I/O. No timeout and no connection limit: an
//! idle client is held until it leaves.
//!
//! Usage: `monoio_baseline [--port P] [--cores 0,1]`. One monoio runtime
//! (io_uring driver) per listed CPU, each pinned, with its own
//! SO_REUSEPORT listener on 127.0.0.1:P (default 8080). SIGINT or SIGTERM
//! ends the process.

use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use monoio::buf::IoBufMut;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::{ListenerOpts, TcpListener, TcpStream};
use percore_benches::baseline_http::{respond, DateLine, Parsed};
use percore_benches::cli::parse_cpu_list;
use percore_benches::http;
use percore_benches::signals::block_stop_signals;
use percore_benches::sys;

const BACKLOG: i32 = 4096;
const HTTP_BUF: usize = 8 * 1024;
/// The input buffer doubles for larger requests, up to this.
const HTTP_MAX_BUF: usize = 1024 * 1024;

struct Options {
    port: u16,
    cores: Vec<usize>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut o = Options {
        port: 8080,
        cores: vec![0],
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

/// One connection, as `tokio_servers`' `http_conn`: the answers to all
/// requests of one read go out in one write.
async fn http_conn(mut s: TcpStream) -> io::Result<()> {
    // The received bytes not yet answered are `inb[..inb.len()]`.
    let mut inb = Vec::with_capacity(HTTP_BUF);
    let mut out = Vec::with_capacity(http::RESPONSE.len() * 16);
    let mut date = DateLine::default();
    loop {
        if inb.len() == inb.capacity() {
            if inb.capacity() >= HTTP_MAX_BUF {
                return Ok(()); // a request larger than this: not our workload
            }
            inb.reserve(inb.capacity());
        }
        let filled = inb.len();
        let (r, slice) = s.read(inb.slice_mut(filled..)).await;
        inb = slice.into_inner();
        if r? == 0 {
            return Ok(());
        }
        date.refresh();
        out.clear();
        let mut used = 0;
        let close = loop {
            match respond(&inb[used..], &mut out, &date) {
                Parsed::Answered(n) => used += n,
                Parsed::Partial => break false,
                Parsed::Bad => break true,
            }
        };
        if !out.is_empty() {
            let (r, written) = s.write_all(out).await;
            out = written;
            r?;
        }
        if close {
            return Ok(());
        }
        inb.drain(..used);
    }
}

async fn accept_loop(listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                // As the other baselines: answers leave at once.
                let _ = stream.set_nodelay(true);
                monoio::spawn(async move {
                    // I/O errors just end the connection.
                    let _ = http_conn(stream).await;
                });
            }
            // EMFILE and friends: back off instead of spinning.
            Err(_) => monoio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

/// Starts the runtime of `cpu` on a thread of its own; returns once its
/// listener is bound (or failed to be).
fn start(addr: SocketAddr, cpu: usize) -> io::Result<()> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(format!("monoio-{cpu}"))
        .spawn(move || {
            sys::pin_current_thread(cpu);
            let rt = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
                .enable_timer()
                .build();
            let mut rt = match rt {
                Ok(rt) => rt,
                Err(e) => return drop(ready_tx.send(Err(e))),
            };
            rt.block_on(async move {
                let opts = ListenerOpts::new().reuse_port(true).backlog(BACKLOG);
                match TcpListener::bind_with_config(addr, &opts) {
                    Ok(l) => {
                        let _ = ready_tx.send(Ok(()));
                        accept_loop(l).await;
                    }
                    Err(e) => drop(ready_tx.send(Err(e))),
                }
            });
        })?;
    ready_rx
        .recv()
        .map_err(|_| io::Error::other("the runtime's thread exited before listening"))?
}

fn main() -> ExitCode {
    let o = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("monoio_baseline: {e}\nusage: monoio_baseline [--port P] [--cores 0,1]");
            return ExitCode::from(2);
        }
    };
    let signals = block_stop_signals();
    let addr = SocketAddr::from(([127, 0, 0, 1], o.port));
    for &cpu in &o.cores {
        if let Err(e) = start(addr, cpu) {
            eprintln!("monoio_baseline: cannot start on {addr} (CPU {cpu}): {e}");
            return ExitCode::FAILURE;
        }
    }
    eprintln!(
        "monoio_baseline: http on {addr} ({} runtime(s))",
        o.cores.len()
    );
    signals.wait();
    // The runtimes' threads run until the process ends.
    ExitCode::SUCCESS
}
