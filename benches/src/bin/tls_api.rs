//! `tls_api`: what rustls costs percore's server side, in memory, without
//! sockets, and which of its choices cost less.
//!
//! - **The two server APIs** on a kept-alive HTTPS exchange: the buffered
//!   `ServerConnection` (which percore uses) and the unbuffered
//!   `UnbufferedServerConnection` (which decrypts in place in the caller's
//!   buffer and encrypts into the caller's buffer). Each round a rustls
//!   client encrypts a request; the server decrypts it and encrypts an
//!   answer of `--answer` bytes; the client checks it.
//! - **The crypto providers**: *ring*, and aws-lc-rs when built with the
//!   `aws-lc-rs` feature; for each, the exchanges above and full TLS 1.3
//!   handshakes (ECDSA P-256 certificate, X25519).
//!
//! Only the server's steps are timed and their allocations counted; the
//! cells are alternated in blocks so that drift hits all alike, and the
//! median block is printed.
//!
//! Usage: `tls_api --cert FILE --key FILE --ca FILE [--rounds 200000]
//! [--handshakes 4500] [--answer 150]` (the certificate for `localhost`, as
//! `benches/tls.sh` makes it; `TLS_API=1 benches/tls.sh` runs it).

use std::hint::black_box;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use percore_benches::alloc::{allocations, CountingAlloc};
use percore_benches::tls;
use rustls::server::UnbufferedServerConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, UnbufferedStatus};
use rustls::{ClientConnection, ServerConnection};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
const BLOCKS: usize = 9;

type Result<T> = std::result::Result<T, String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

struct Options {
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
    rounds: usize,
    answer: usize,
    handshakes: usize,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options> {
    let (mut cert, mut key, mut ca, mut rounds, mut answer) = (None, None, None, 200_000, 150);
    let mut handshakes = 4_500;
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--cert" => cert = Some(PathBuf::from(value()?)),
            "--key" => key = Some(PathBuf::from(value()?)),
            "--ca" => ca = Some(PathBuf::from(value()?)),
            "--rounds" => rounds = value()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--answer" => answer = value()?.parse().map_err(|e| format!("--answer: {e}"))?,
            "--handshakes" => {
                handshakes = value()?.parse().map_err(|e| format!("--handshakes: {e}"))?
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Options {
        cert: cert.ok_or("--cert FILE is required")?,
        key: key.ok_or("--key FILE is required")?,
        ca: ca.ok_or("--ca FILE is required")?,
        rounds: rounds.max(BLOCKS),
        answer,
        handshakes: handshakes.max(BLOCKS),
    })
}

/// The crypto providers compared: *ring* always, aws-lc-rs with the
/// `aws-lc-rs` feature.
fn providers() -> Vec<(&'static str, Arc<rustls::crypto::CryptoProvider>)> {
    #[allow(unused_mut)]
    let mut all = vec![("ring", Arc::new(rustls::crypto::ring::default_provider()))];
    #[cfg(feature = "aws-lc-rs")]
    all.push((
        "aws-lc-rs",
        Arc::new(rustls::crypto::aws_lc_rs::default_provider()),
    ));
    all
}

fn configs(
    o: &Options,
    provider: &Arc<rustls::crypto::CryptoProvider>,
) -> Result<(Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>)> {
    let provider = provider.clone();
    let chain = tls::certificate_chain(&o.cert).map_err(err)?;
    let key = tls::private_key(&o.key).map_err(err)?;
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(err)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(err)?;
    let roots = tls::trust_roots(&o.ca).map_err(err)?;
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(err)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok((Arc::new(server), Arc::new(client)))
}

fn client(config: &Arc<rustls::ClientConfig>) -> Result<ClientConnection> {
    ClientConnection::new(config.clone(), tls::server_name()).map_err(err)
}

/// Records the client has to send, appended to `to`.
fn client_out(client: &mut ClientConnection, to: &mut Vec<u8>) -> Result<()> {
    while client.wants_write() {
        client.write_tls(to).map_err(err)?;
    }
    Ok(())
}

/// Feeds the server's records to the client; returns the plaintext.
fn client_in(client: &mut ClientConnection, mut records: &[u8]) -> Result<Vec<u8>> {
    while !records.is_empty() {
        client.read_tls(&mut records).map_err(err)?;
        client.process_new_packets().map_err(err)?;
    }
    let mut plain = Vec::new();
    match client.reader().read_to_end(&mut plain) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(err(e)),
    }
    Ok(plain)
}

/// What a server does with one request's records: its plaintext's
/// length, and the answer's records in `out`.
trait Server {
    fn exchange(
        &mut self,
        records: &mut Vec<u8>,
        answer: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<usize>;
}

/// The buffered API: records copied in, plaintext copied out.
struct Buffered {
    conn: ServerConnection,
    plain: Vec<u8>,
}

impl Server for Buffered {
    fn exchange(
        &mut self,
        records: &mut Vec<u8>,
        answer: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<usize> {
        let mut rest = &records[..];
        while !rest.is_empty() {
            self.conn.read_tls(&mut rest).map_err(err)?;
            self.conn.process_new_packets().map_err(err)?;
        }
        let n = self.conn.reader().read(&mut self.plain).map_err(err)?;
        self.conn.writer().write_all(answer).map_err(err)?;
        while self.conn.wants_write() {
            self.conn.write_tls(out).map_err(err)?;
        }
        Ok(n)
    }
}

/// The unbuffered API: records decrypted in place, the answer encrypted
/// straight into `out`.
struct Unbuffered {
    conn: UnbufferedServerConnection,
}

/// The step an unbuffered state asks for, taken once the state (which
/// borrows the records) is dropped.
enum Step {
    Again,
    Write,
    NeedMore,
}

impl Unbuffered {
    /// Drives the connection over `records` until it wants more of them or
    /// lets the caller write; encoded handshake records go to `out`.
    fn drive(
        &mut self,
        records: &mut Vec<u8>,
        out: &mut Vec<u8>,
        plain: &mut usize,
    ) -> Result<bool> {
        loop {
            let UnbufferedStatus { mut discard, state } = self.conn.process_tls_records(records);
            let step = match state.map_err(err)? {
                ConnectionState::ReadTraffic(mut traffic) => {
                    while let Some(record) = traffic.next_record() {
                        let record = record.map_err(err)?;
                        discard += record.discard;
                        *plain += black_box(record.payload).len();
                    }
                    Step::Again
                }
                ConnectionState::EncodeTlsData(mut encode) => {
                    let at = out.len();
                    out.resize(at + 1024, 0);
                    let n = match encode.encode(&mut out[at..]) {
                        Ok(n) => n,
                        Err(EncodeError::InsufficientSize(s)) => {
                            out.resize(at + s.required_size, 0);
                            encode.encode(&mut out[at..]).map_err(err)?
                        }
                        Err(e) => return Err(err(e)),
                    };
                    out.truncate(at + n);
                    Step::Again
                }
                ConnectionState::TransmitTlsData(transmit) => {
                    transmit.done();
                    Step::Again
                }
                ConnectionState::BlockedHandshake => Step::NeedMore,
                ConnectionState::WriteTraffic(_) => Step::Write,
                other => return Err(format!("unexpected state {other:?}")),
            };
            if discard > 0 {
                records.drain(..discard);
            }
            match step {
                Step::Again => {}
                Step::Write => return Ok(true),
                Step::NeedMore => return Ok(false),
            }
        }
    }

    fn encrypt(&mut self, answer: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let UnbufferedStatus { state, .. } = self.conn.process_tls_records(&mut []);
        let ConnectionState::WriteTraffic(mut write) = state.map_err(err)? else {
            return Err("not ready to write".into());
        };
        let at = out.len();
        out.resize(at + answer.len() + 64, 0);
        let n = match write.encrypt(answer, &mut out[at..]) {
            Ok(n) => n,
            Err(EncryptError::InsufficientSize(s)) => {
                out.resize(at + s.required_size, 0);
                write.encrypt(answer, &mut out[at..]).map_err(err)?
            }
            Err(e) => return Err(err(e)),
        };
        out.truncate(at + n);
        Ok(())
    }
}

impl Server for Unbuffered {
    fn exchange(
        &mut self,
        records: &mut Vec<u8>,
        answer: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<usize> {
        let mut plain = 0;
        self.drive(records, out, &mut plain)?;
        self.encrypt(answer, out)?;
        Ok(plain)
    }
}

/// A handshake between a client and the buffered server, in memory; the
/// time the server's steps took.
fn buffered(
    server: &Arc<rustls::ServerConfig>,
    client_config: &Arc<rustls::ClientConfig>,
) -> Result<(Buffered, ClientConnection, Duration)> {
    let mut client = client(client_config)?;
    let t0 = Instant::now();
    let mut conn = ServerConnection::new(server.clone()).map_err(err)?;
    let mut spent = t0.elapsed();
    let mut wire = Vec::new();
    while conn.is_handshaking() || client.is_handshaking() || conn.wants_write() {
        wire.clear();
        client_out(&mut client, &mut wire)?;
        let t0 = Instant::now();
        let mut rest = &wire[..];
        while !rest.is_empty() {
            conn.read_tls(&mut rest).map_err(err)?;
            conn.process_new_packets().map_err(err)?;
        }
        wire.clear();
        while conn.wants_write() {
            conn.write_tls(&mut wire).map_err(err)?;
        }
        spent += t0.elapsed();
        client_in(&mut client, &wire)?;
    }
    let server = Buffered {
        conn,
        plain: vec![0; 16 * 1024],
    };
    Ok((server, client, spent))
}

/// A handshake between a client and the unbuffered server, in memory.
fn unbuffered(
    server: &Arc<rustls::ServerConfig>,
    client_config: &Arc<rustls::ClientConfig>,
) -> Result<(Unbuffered, ClientConnection)> {
    let mut conn = Unbuffered {
        conn: UnbufferedServerConnection::new(server.clone()).map_err(err)?,
    };
    let mut client = client(client_config)?;
    let (mut incoming, mut out) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        client_out(&mut client, &mut incoming)?;
        out.clear();
        let ready = conn.drive(&mut incoming, &mut out, &mut 0)?;
        client_in(&mut client, &out)?;
        if ready && !client.is_handshaking() && !client.wants_write() {
            return Ok((conn, client));
        }
    }
    Err("the unbuffered handshake did not end".into())
}

/// `rounds` exchanges; the server's time and allocations.
fn run(
    server: &mut dyn Server,
    client: &mut ClientConnection,
    rounds: usize,
    answer: &[u8],
) -> Result<(Duration, u64)> {
    let (mut records, mut out) = (
        Vec::with_capacity(4096),
        Vec::with_capacity(answer.len() + 4096),
    );
    let (mut spent, mut allocs) = (Duration::ZERO, 0);
    for _ in 0..rounds {
        records.clear();
        out.clear();
        client.writer().write_all(REQUEST).map_err(err)?;
        client_out(client, &mut records)?;
        let (a0, t0) = (allocations(), Instant::now());
        let n = server.exchange(&mut records, answer, &mut out)?;
        spent += t0.elapsed();
        allocs += allocations() - a0;
        if n != REQUEST.len() {
            return Err(format!(
                "the server decrypted {n} bytes, not {}",
                REQUEST.len()
            ));
        }
        let got = client_in(client, &out)?;
        if got != answer {
            return Err(format!(
                "the client got {} bytes, not the {}-byte answer",
                got.len(),
                answer.len()
            ));
        }
    }
    Ok((spent, allocs))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> ExitCode {
    let o = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("tls_api: {e}");
            return ExitCode::from(2);
        }
    };
    match measure(&o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tls_api: {e}");
            ExitCode::FAILURE
        }
    }
}

fn measure(o: &Options) -> Result<()> {
    let answer: Vec<u8> = (0..o.answer).map(|i| b'a' + (i % 26) as u8).collect();
    // Per provider: its configurations, then a connection per API.
    let mut setups = Vec::new();
    let mut cells: Vec<(String, Box<dyn Server>, ClientConnection)> = Vec::new();
    for (name, provider) in providers() {
        let (server, client_config) = configs(o, &provider)?;
        let (b, bc, _) = buffered(&server, &client_config)?;
        let (u, uc) = unbuffered(&server, &client_config)?;
        cells.push((format!("{name} buffered"), Box::new(b), bc));
        cells.push((format!("{name} unbuffered"), Box::new(u), uc));
        setups.push((name, server, client_config));
    }
    for (_, server, client) in &mut cells {
        // Warm-up, not measured.
        run(server.as_mut(), client, 1000, &answer)?;
    }
    let per_block = o.rounds / BLOCKS;
    let per_hs_block = o.handshakes / BLOCKS;
    let mut ns = vec![Vec::new(); cells.len()];
    let mut allocs = vec![0; cells.len()];
    let mut hs_us = vec![Vec::new(); setups.len()];
    let mut hs_allocs = vec![0; setups.len()];
    for _ in 0..BLOCKS {
        for (i, (_, server, client)) in cells.iter_mut().enumerate() {
            let (t, a) = run(server.as_mut(), client, per_block, &answer)?;
            ns[i].push(t.as_nanos() as f64 / per_block as f64);
            allocs[i] += a;
        }
        for (i, (_, server, client_config)) in setups.iter().enumerate() {
            let mut spent = Duration::ZERO;
            for _ in 0..per_hs_block {
                let a0 = allocations();
                let (conn, client, t) = buffered(server, client_config)?;
                // The client's allocations are in the count too: an upper
                // bound for the server's.
                hs_allocs[i] += allocations() - a0;
                spent += t;
                drop((conn, client));
            }
            hs_us[i].push(spent.as_secs_f64() * 1e6 / per_hs_block as f64);
        }
    }
    let rounds = (per_block * BLOCKS) as f64;
    println!(
        "tls_api: TLS 1.3 in memory, server side only, median of {BLOCKS} blocks, cells alternated"
    );
    println!(
        "exchanges: a {}-byte request and a {}-byte answer, {} per cell",
        REQUEST.len(),
        o.answer,
        per_block * BLOCKS
    );
    println!(
        "{:<22} {:>14} {:>22}",
        "cell", "ns per round", "allocations per round"
    );
    let base = median(ns[0].clone());
    for (i, (name, _, _)) in cells.iter().enumerate() {
        let m = median(ns[i].clone());
        println!(
            "{name:<22} {m:>14.0} {:>22.2}   ({:.3} of ring buffered)",
            allocs[i] as f64 / rounds,
            m / base
        );
    }
    println!(
        "full handshakes (ECDSA P-256, the server's steps; allocations include the client's), {} per provider",
        per_hs_block * BLOCKS
    );
    println!(
        "{:<22} {:>14} {:>22}",
        "provider", "µs per handshake", "allocations (both)"
    );
    for (i, (name, _, _)) in setups.iter().enumerate() {
        println!(
            "{name:<22} {:>14.1} {:>22.1}",
            median(hs_us[i].clone()),
            hs_allocs[i] as f64 / (per_hs_block * BLOCKS) as f64
        );
    }
    Ok(())
}
