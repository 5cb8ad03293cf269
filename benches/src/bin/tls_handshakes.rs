//! `tls_handshakes`: the full-handshake load of `benches/tls.sh`. Each of
//! `--threads` blocking clients opens a connection, makes a TLS 1.3
//! handshake with no resumption (rustls, *ring*), sends one
//! `Connection: close` GET, reads the answer whole and starts over, until
//! `--duration` seconds have passed (the connection of `cargo bench`'s
//! `https/handshake`: `percore_benches::client::fresh_https_get`). Prints
//! the handshakes (each with its 200 answer) and the errors, which, unlike
//! in `cargo bench`, do not stop the load.
//!
//! Usage: `tls_handshakes --connect 127.0.0.1:P --ca FILE [--name localhost]
//! [--threads 8] [--duration 10]`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use percore_benches::client::fresh_https_get;
use percore_benches::tls::{client_config, SERVER_NAME};
use rustls::pki_types::ServerName;

struct Options {
    addr: SocketAddr,
    ca: PathBuf,
    name: String,
    threads: usize,
    duration: Duration,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let (mut addr, mut ca, mut name) = (None, None, SERVER_NAME.to_string());
    let (mut threads, mut duration) = (8, 10);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--connect" => addr = Some(value()?.parse().map_err(|e| format!("--connect: {e}"))?),
            "--ca" => ca = Some(PathBuf::from(value()?)),
            "--name" => name = value()?,
            "--threads" => threads = value()?.parse().map_err(|e| format!("--threads: {e}"))?,
            "--duration" => duration = value()?.parse().map_err(|e| format!("--duration: {e}"))?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Options {
        addr: addr.ok_or("--connect ADDR is required")?,
        ca: ca.ok_or("--ca FILE is required")?,
        name,
        threads: threads.max(1),
        duration: Duration::from_secs(duration),
    })
}

fn main() -> ExitCode {
    let o = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("tls_handshakes: {e}");
            return ExitCode::from(2);
        }
    };
    let config = match client_config(&o.ca) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tls_handshakes: {e}");
            return ExitCode::FAILURE;
        }
    };
    let name = match ServerName::try_from(o.name.clone()) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("tls_handshakes: --name {:?}: {e}", o.name);
            return ExitCode::from(2);
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(std::sync::Mutex::new(None::<String>));
    let start = Instant::now();
    let threads: Vec<_> = (0..o.threads)
        .map(|_| {
            let (stop, done, errors) = (stop.clone(), done.clone(), errors.clone());
            let (config, name, first_error) = (config.clone(), name.clone(), first_error.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match fresh_https_get(o.addr, &config, &name) {
                        Ok(()) => done.fetch_add(1, Ordering::Relaxed),
                        Err(e) => {
                            first_error.lock().unwrap().get_or_insert(e.to_string());
                            errors.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
            })
        })
        .collect();
    std::thread::sleep(o.duration);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let secs = start.elapsed().as_secs_f64();
    let (done, errors) = (done.load(Ordering::Relaxed), errors.load(Ordering::Relaxed));
    println!(
        "handshakes={done} errors={errors} seconds={secs:.3} per_second={:.0}",
        done as f64 / secs
    );
    if let Some(e) = first_error.lock().unwrap().take() {
        eprintln!("tls_handshakes: first error: {e}");
    }
    if errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
