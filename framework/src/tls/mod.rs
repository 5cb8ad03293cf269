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
//! buffer per write (a TLS write allocates; a plain one does not).
//!
//! The crypto provider is *ring* (rustls's `ring` feature): it builds with
//! a C compiler alone, where aws-lc-rs needs CMake as well. Kernel TLS
//! (which would let the ring send records without user-space crypto) is
//! not used.
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
pub(crate) mod io;
pub(crate) mod session;

use std::io as stdio;
use std::path::Path;
use std::sync::Arc;

pub use rustls;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A server configuration from PEM files: the certificate chain (leaf
/// first) and its private key, TLS 1.2 and 1.3, ALPN `http/1.1`, and
/// session tickets so that returning clients resume without a full
/// handshake. Build a `rustls::ServerConfig` yourself for more (several
/// certificates chosen by SNI, client certificates).
///
/// # Errors
///
/// A file that cannot be read, holds no certificate or no key, or a key
/// that does not match the certificate; the message names the file.
pub fn server_config(cert_chain: &Path, key: &Path) -> stdio::Result<Arc<rustls::ServerConfig>> {
    let certs = certificates(cert_chain)?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| invalid(format!("{}: no private key: {e}", key.display())))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| invalid(format!("{}: {e}", cert_chain.display())))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.ticketer = rustls::crypto::ring::Ticketer::new()
        .map_err(|e| stdio::Error::other(format!("TLS session tickets: {e}")))?;
    Ok(Arc::new(config))
}

/// A client configuration that trusts the certificate authorities in
/// `ca_file` (PEM) and verifies the server's name; ALPN `http/1.1`.
///
/// # Errors
///
/// A file that cannot be read or holds no usable certificate.
pub fn client_config(ca_file: &Path) -> stdio::Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certificates(ca_file)? {
        roots
            .add(cert)
            .map_err(|e| invalid(format!("{}: {e}", ca_file.display())))?;
    }
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
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
