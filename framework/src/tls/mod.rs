//! TLS over any [`Stream`](crate::net::Stream), with rustls.
//!
//! A TLS connection is a `Stream` too: after [`Stream::accept_tls`](crate::net::Stream::accept_tls) (a
//! server) or [`Stream::connect_tls`](crate::net::Stream::connect_tls) (a client) its reads lend decrypted
//! bytes, its writes encrypt, and [`shutdown_write`](crate::net::Stream::shutdown_write)
//! sends `close_notify` first. So a handler, the HTTP layer and the
//! fan-out proxy serve TLS connections unchanged; a server does the
//! handshake itself for a listener given a configuration
//! ([`ServerBuilder::tls`](crate::ServerBuilder::tls)).
//!
//! An end of stream without the peer's `close_notify` is an error
//! (`UnexpectedEof`), not a clean end: the data may have been cut short.
//! Records are decrypted into the core's pool buffers and encrypted into a
//! buffer the core keeps for the next write. rustls's connection copies
//! each record's plaintext into queues of its own, so a kept-alive TLS
//! request makes 3 allocations where a plain one makes none (rustls's
//! unbuffered API allocates as much, measured by `benches`' `tls_api`).
//!
//! The crypto provider ([`provider`]) is *ring* by default: it builds
//! quickly with a C compiler alone. The `aws-lc-rs` feature takes
//! aws-lc-rs instead, which spent about 14 % less CPU per full handshake
//! and 10 % less per 16 KiB record in `tls_api`, for a longer build.
//! Kernel TLS (which would let the ring send records without user-space
//! crypto) is not used.
//!
//! # Examples
//!
//! ```no_run
//! use percore::{Connection, Handler, Server};
//!
//! struct Hello;
//!
//! impl Handler for Hello {
//!     async fn serve(&self, conn: Connection) -> std::io::Result<()> {
//!         conn.write_all(b"hello over TLS\n".to_vec()).await.0?;
//!         conn.shutdown_write()
//!     }
//! }
//!
//! fn main() -> std::io::Result<()> {
//!     let tls = percore::tls::server_config("cert.pem".as_ref(), "key.pem".as_ref())?;
//!     Server::builder()
//!         .address("127.0.0.1:8443".parse().unwrap())
//!         .tls(tls)
//!         .serve(|_core| Hello)
//! }
//! ```

mod handshake;
mod io;
mod server;
pub(crate) mod session;

pub use server::ServerTls;

use std::io as stdio;
use std::path::Path;
use std::sync::Arc;

pub use rustls;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A server configuration from PEM files: the certificate chain (leaf
/// first) and its private key, TLS 1.2 and 1.3, ALPN `http/1.1`, and
/// session tickets so that returning clients resume without a full
/// handshake. [`ServerTls`] adds certificates chosen by SNI and client
/// certificates.
///
/// # Errors
///
/// A file that cannot be read, holds no certificate or no key, or a key
/// that does not match the certificate; the message names the file.
pub fn server_config(cert_chain: &Path, key: &Path) -> stdio::Result<Arc<rustls::ServerConfig>> {
    ServerTls::new(cert_chain, key).build()
}

/// The crypto provider percore's configurations use: aws-lc-rs with the
/// `aws-lc-rs` feature, *ring* without it (the default). A configuration made by hand
/// can take it too (`rustls::ServerConfig::builder_with_provider`).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(crypto::default_provider())
}

/// Session tickets' encryption, from the same library as [`provider`].
fn ticketer() -> Result<Arc<dyn rustls::server::ProducesTickets>, rustls::Error> {
    crypto::Ticketer::new()
}

#[cfg(feature = "aws-lc-rs")]
use rustls::crypto::aws_lc_rs as crypto;
#[cfg(not(feature = "aws-lc-rs"))]
use rustls::crypto::ring as crypto;

/// A client's configuration builder with [`provider`] and TLS 1.2 and 1.3.
fn client_builder(
) -> stdio::Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::WantsVerifier>> {
    rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| stdio::Error::other(format!("TLS: {e}")))
}

/// A client configuration that trusts the certificate authorities in
/// `ca_file` (PEM) and verifies the server's name; ALPN `http/1.1`.
///
/// # Errors
///
/// A file that cannot be read or holds no usable certificate.
pub fn client_config(ca_file: &Path) -> stdio::Result<Arc<rustls::ClientConfig>> {
    let builder = client_builder()?.with_root_certificates(roots(ca_file)?);
    let mut config = builder.with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// [`client_config`] that also presents a client certificate (for a
/// server that asks for one, see [`ServerTls::client_ca`]).
///
/// # Errors
///
/// As [`client_config`], and as [`server_config`] for the certificate and
/// key.
pub fn client_config_with_cert(
    ca_file: &Path,
    cert_chain: &Path,
    key: &Path,
) -> stdio::Result<Arc<rustls::ClientConfig>> {
    let builder = client_builder()?.with_root_certificates(roots(ca_file)?);
    let mut config = builder
        .with_client_auth_cert(certificates(cert_chain)?, private_key(key)?)
        .map_err(|e| invalid(format!("{}: {e}", cert_chain.display())))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The authorities of a PEM file, as trust roots.
fn roots(ca_file: &Path) -> stdio::Result<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certificates(ca_file)? {
        roots
            .add(cert)
            .map_err(|e| invalid(format!("{}: {e}", ca_file.display())))?;
    }
    Ok(roots)
}

/// The private key of a PEM file.
fn private_key(key: &Path) -> stdio::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(key)
        .map_err(|e| invalid(format!("{}: no private key: {e}", key.display())))
}

/// The certificates of a PEM file; at least one.
fn certificates(path: &Path) -> stdio::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| invalid(format!("{}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(invalid(format!("{}: no certificate in it", path.display())));
    }
    Ok(certs)
}

fn invalid(message: String) -> stdio::Error {
    stdio::Error::new(stdio::ErrorKind::InvalidInput, message)
}
