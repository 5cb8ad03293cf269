//! The HTTPS clients of the `https` category: kept-alive GETs over TLS
//! (tokio-rustls, many connections on one runtime) and full handshakes
//! (blocking std threads, rustls's `StreamOwned`, a new connection per
//! request), plus that one-request connection as `tls_handshakes` repeats
//! it against external servers.
//!
//! What it measures: as the plain HTTP clients, operations inside the
//! window after one checked exchange; the handshake loads count
//! connections, each a full TLS 1.3 handshake (resumption is off, see
//! `tls::client_config`). What it does not: resume sessions, or check
//! more of a later answer than its status, framing and body.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

use super::keepalive::{check_body, concurrent_loop, validate_with, Exchange};
use super::*;
use crate::target::Target;
use crate::tls;

/// `conns` kept-alive TLS connections to an HTTPS server on one tokio
/// current_thread runtime, each with one request in flight (closed loop),
/// as `http_concurrent` over TLS: the handshakes happen before the window.
/// ops = requests.
pub fn https_keepalive(
    target: &Target,
    conns: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    let (addr, ca) = target.tls()?;
    let connector = TlsConnector::from(tls::client_config(ca)?);
    let connect = || {
        let connector = connector.clone();
        async move {
            let tcp = connect_async(addr).await?;
            let handshake = connector.connect(tls::server_name(), tcp);
            tokio::time::timeout(IO_TIMEOUT, handshake)
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))?
        }
    };
    let exchange = Exchange {
        request: http::REQUEST,
        check: &check_body,
    };
    concurrent_loop(connect, conns, exchange, window, probe)
}

/// One GET on a fresh TLS connection to `addr`: the handshake with
/// `config`, a `Connection: close` request, the whole answer, which must be
/// a 200 with the 20-byte JSON body, then the close.
///
/// # Errors
///
/// A failed connect, handshake or exchange, `IO_TIMEOUT` of silence, or
/// another answer.
pub fn fresh_https_get(
    addr: SocketAddr,
    config: &Arc<rustls::ClientConfig>,
    name: &ServerName<'static>,
) -> io::Result<()> {
    let session =
        rustls::ClientConnection::new(config.clone(), name.clone()).map_err(io::Error::other)?;
    let mut stream = rustls::StreamOwned::new(session, connect(addr)?);
    validate_with(&mut stream, http::CLOSING_REQUEST, &check_body)
}

/// Full handshakes: `clients` blocking threads, each repeating
/// [`fresh_https_get`] until the window ends. The first error of any
/// thread fails the iteration, as in the other closed-loop clients.
/// ops = handshakes (each with its answer).
pub fn https_handshakes(
    target: &Target,
    clients: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    let (addr, ca) = target.tls()?;
    let config = tls::client_config(ca)?;
    let name = tls::server_name();
    fresh_https_get(addr, &config, &name)?;
    let failed = AtomicBool::new(false);
    probe.start();
    let deadline = Instant::now() + window;
    let client = || -> io::Result<u64> {
        let mut ops = 0u64;
        while ops < MAX_OPS && !failed.load(Ordering::Relaxed) {
            if let Err(e) = fresh_https_get(addr, &config, &name) {
                failed.store(true, Ordering::Relaxed);
                return Err(io::Error::new(
                    e.kind(),
                    format!("{e} (after {ops} handshakes of this client)"),
                ));
            }
            ops += 1;
            if Instant::now() >= deadline {
                break;
            }
        }
        Ok(ops)
    };
    let results: Vec<io::Result<u64>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..clients.max(1))
            .map(|_| {
                std::thread::Builder::new()
                    .name("bench-handshakes".into())
                    .spawn_scoped(scope, client)
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t?.join()
                    .unwrap_or_else(|_| Err(io::Error::other("a handshake client panicked")))
            })
            .collect()
    });
    probe.stop();
    let mut ops = 0;
    for r in results {
        ops += r?;
    }
    Ok(Load {
        ops,
        ..Load::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{self, Executor, Service, Supplies};
    use crate::tls::TestCertificates;

    /// Every executor serves HTTPS to both clients, and tells them which
    /// authority to trust.
    #[test]
    fn https_on_every_executor() {
        let certs = match TestCertificates::generate() {
            Ok(c) => c,
            Err(why) => {
                println!("skipped: {why}");
                return;
            }
        };
        let supplies = Supplies {
            certificates: Some(&certs),
            ..Supplies::default()
        };
        for e in Executor::ALL {
            let Some(server) = server::start_in_test(e, Service::Https, &supplies) else {
                continue;
            };
            let target = server.target();
            let (_, ca) = target.tls().expect("an HTTPS target");
            assert_eq!(ca, certs.ca(), "{}", e.name());
            let no_cpu = || None;
            let window = Duration::from_millis(50);
            let runs = [
                https_keepalive(&target, 2, window, &mut Probe::new(&no_cpu)),
                https_handshakes(&target, 2, window, &mut Probe::new(&no_cpu)),
            ];
            for (i, r) in runs.into_iter().enumerate() {
                let load = r.unwrap_or_else(|err| panic!("{} client {i}: {err}", e.name()));
                assert!(load.ops > 0, "{} client {i}: nothing answered", e.name());
            }
            server.stop(Duration::from_secs(5)).expect("stop");
        }
    }
}
