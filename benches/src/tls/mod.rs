//! TLS for the `https` cells and the TLS binaries: the tokio servers'
//! rustls configuration (percore's settings), the clients' (every
//! connection a full handshake) and a certificate made for one run.
//!
//! Why *ring* by name: percore's configurations take it (without its
//! `aws-lc-rs` feature), and a comparison of runtimes must not become one
//! of crypto libraries; naming it also keeps rustls from looking for a
//! process default, which panics when both providers are compiled in.

use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

mod certs;
pub use certs::TestCertificates;

/// The name the clients ask for and the certificate is made for.
pub const SERVER_NAME: &str = "localhost";

/// [`SERVER_NAME`] as rustls takes it.
pub fn server_name() -> ServerName<'static> {
    ServerName::try_from(SERVER_NAME).expect("a valid DNS name")
}

fn in_file(path: &Path, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {e}", path.display()),
    )
}

/// The certificates of a PEM file, in order (a chain: leaf first).
///
/// # Errors
///
/// A file that cannot be read or parsed; the message names it.
pub fn certificate_chain(path: &Path) -> io::Result<Vec<CertificateDer<'static>>> {
    CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| in_file(path, e))
}

/// The private key of a PEM file.
///
/// # Errors
///
/// A file that cannot be read or holds no key; the message names it.
pub fn private_key(path: &Path) -> io::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| in_file(path, e))
}

/// The authorities of a PEM file, as trust roots.
///
/// # Errors
///
/// As [`certificate_chain`], or a certificate rustls cannot use as a root.
pub fn trust_roots(ca: &Path) -> io::Result<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certificate_chain(ca)? {
        roots.add(cert).map_err(|e| in_file(ca, e))?;
    }
    Ok(roots)
}

/// A server configuration as `percore::tls::server_config` makes one: the
/// chain and key of two PEM files, TLS 1.2 and 1.3, ALPN `http/1.1` and
/// session tickets, with *ring*.
///
/// # Errors
///
/// As [`certificate_chain`] and [`private_key`], or a key that does not
/// match the certificate.
pub fn server_config(cert: &Path, key: &Path) -> io::Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_no_client_auth()
        .with_single_cert(certificate_chain(cert)?, private_key(key)?)
        .map_err(|e| in_file(cert, e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.ticketer = rustls::crypto::ring::Ticketer::new().map_err(io::Error::other)?;
    Ok(Arc::new(config))
}

/// A client configuration: TLS 1.3 only, the authorities of `ca` trusted,
/// ALPN `http/1.1`, and no resumption, so that every connection makes a
/// full handshake (what the handshake loads measure; the keep-alive ones
/// make one per connection before they measure).
///
/// # Errors
///
/// As [`trust_roots`].
pub fn client_config(ca: &Path) -> io::Result<Arc<rustls::ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(io::Error::other)?
        .with_root_certificates(trust_roots(ca)?)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(config))
}
