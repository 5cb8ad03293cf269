//! Cookbook: HTTPS whose certificate is reloaded from disk when it changes.
//!
//! percore has no reload call of its own: the server keeps the rustls
//! configuration it was given. rustls asks that configuration's
//! certificate resolver at every handshake, so a resolver whose key can
//! be swapped is the reload: a thread checks the files' modification
//! times once a second and swaps in the new pair once it loads. New
//! handshakes get the new certificate; open connections keep theirs. A
//! pair that does not load (a half-written file, a key that does not
//! match) is logged and the old one kept, until the files change again.
//!
//! ```text
//! cookbook_https_reload --tls-cert cert.pem --tls-key key.pem [--port 8093]
//! curl --cacert ca.pem https://localhost:8093/
//! ```

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use clap::Parser;
use percore::tls::rustls;
use percore_examples::{exit_with, init_logging, parse_args, usage_error, CommonArgs};
use percore_handlers::http::{HttpHandler, Response, Routed, Router};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// The certificate every handshake gets, swapped by [`watch`].
#[derive(Debug)]
struct Reloadable(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for Reloadable {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.0
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        )
    }
}

/// The certificate chain (leaf first) and key of two PEM files.
fn load(cert: &Path, key: &Path) -> io::Result<CertifiedKey> {
    let named = |path: &Path, e: &dyn std::fmt::Display| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| named(cert, &e))?;
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| named(key, &e))?;
    // Also checks that the key is the certificate's.
    CertifiedKey::from_der(chain, private, &percore::tls::provider()).map_err(|e| named(cert, &e))
}

fn modified(cert: &Path, key: &Path) -> Option<(SystemTime, SystemTime)> {
    let time = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    Some((time(cert)?, time(key)?))
}

/// Reloads the pair into `current` whenever either file changes.
fn watch(current: Arc<Reloadable>, cert: PathBuf, key: PathBuf) {
    let mut loaded = modified(&cert, &key);
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let now = modified(&cert, &key);
        if now.is_none() || now == loaded {
            continue;
        }
        match load(&cert, &key) {
            Ok(pair) => {
                *current.0.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(pair);
                loaded = now;
                tracing::info!("certificate reloaded from {}", cert.display());
            }
            Err(e) => tracing::warn!("certificate not reloaded, the old one kept: {e}"),
        }
    }
}

async fn hello(_: &(), _: &mut Routed<'_, '_>, res: &mut Response<'_>) -> io::Result<()> {
    Ok(res.send(200, Some(b"text/plain"), b"hello over TLS\n")?)
}

/// HTTPS with a certificate reloaded from disk when its files change.
#[derive(Debug, Parser)]
#[command(name = "cookbook_https_reload")]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
}

fn main() {
    let Cli { common } = parse_args("8093");
    init_logging();
    let (Some(cert), Some(key)) = (common.tls_cert.clone(), common.tls_key.clone()) else {
        usage_error::<Cli>("8093", "--tls-cert and --tls-key are required");
    };
    if let Err(e) = serve(&common, cert, key) {
        exit_with(1, &format!("cookbook_https_reload: {e}"));
    }
}

fn serve(common: &CommonArgs, cert: PathBuf, key: PathBuf) -> io::Result<()> {
    let current = Arc::new(Reloadable(RwLock::new(Arc::new(load(&cert, &key)?))));
    let mut tls = rustls::ServerConfig::builder_with_provider(percore::tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_no_client_auth()
        .with_cert_resolver(current.clone());
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    std::thread::spawn(move || watch(current, cert, key));

    let mut builder = percore::Server::builder()
        .address((common.host, common.port).into())
        .backend(common.backend)
        .tls(Arc::new(tls));
    if let Some(cores) = &common.cores {
        builder = builder.cores(cores.iter().copied());
    }
    let server = builder.start(|_core| {
        let routes = Router::new(()).get("/", hello);
        HttpHandler::new(routes.build().expect("the routes do not conflict"))
    })?;
    server.shutdown_on_signals()?;
    tracing::info!(
        "cookbook_https_reload listening on {} with TLS",
        server.local_addr()
    );
    server.join()
}
