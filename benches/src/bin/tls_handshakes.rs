//! `tls_handshakes`: the full-handshake load of `benches/tls.sh`. Each of
//! `--threads` blocking clients opens a connection, makes a TLS 1.3
//! handshake with no resumption (rustls, *ring*), sends one
//! `Connection: close` GET, reads the answer whole and starts over, until
//! `--duration` seconds have passed. Prints the handshakes (each with its
//! 200 answer) and the errors.
//!
//! Usage: `tls_handshakes --connect 127.0.0.1:P --ca FILE [--name localhost]
//! [--threads 8] [--duration 10]`.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

struct Options {
    addr: SocketAddr,
    ca: PathBuf,
    name: String,
    threads: usize,
    duration: Duration,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let (mut addr, mut ca, mut name) = (None, None, "localhost".to_string());
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

/// TLS 1.3 only, the CA of `--ca` trusted, and no resumption: every
/// connection is a full handshake.
fn client_config(ca: &PathBuf) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).map_err(|e| format!("{}: {e}", ca.display()))? {
        let cert = cert.map_err(|e| format!("{}: {e}", ca.display()))?;
        roots
            .add(cert)
            .map_err(|e| format!("{}: {e}", ca.display()))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(config))
}

/// One connection: handshake, request, the whole 200 answer.
fn one(
    addr: SocketAddr,
    config: &Arc<rustls::ClientConfig>,
    name: &ServerName<'static>,
) -> io::Result<()> {
    let conn =
        rustls::ClientConnection::new(config.clone(), name.clone()).map_err(io::Error::other)?;
    let tcp = TcpStream::connect(addr)?;
    tcp.set_nodelay(true)?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
    let mut got = Vec::with_capacity(512);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            if !head.starts_with("http/1.1 200") {
                return Err(io::Error::other(format!("answer: {head}")));
            }
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| io::Error::other("no content-length"))?;
            if got.len() >= end + 4 + len {
                return Ok(());
            }
        }
        let n = tls.read(&mut chunk)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        got.extend_from_slice(&chunk[..n]);
    }
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
                    match one(o.addr, &config, &name) {
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
