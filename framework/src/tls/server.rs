//! [`ServerTls`]: a server's TLS configuration from PEM files, with
//! certificates chosen by the name the client asks for (SNI) and
//! optional client certificates.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;

use super::{certificates, invalid, private_key, roots};

/// A server's TLS configuration, built from PEM files: TLS 1.2 and 1.3
/// (older versions are refused), ALPN `http/1.1` (or the protocols of
/// [`alpn`](Self::alpn)), and session tickets.
///
/// # Examples
///
/// ```no_run
/// use percore::tls::ServerTls;
///
/// # fn main() -> std::io::Result<()> {
/// let config = ServerTls::new("default.pem".as_ref(), "default.key".as_ref())
///     .sni("api.example.com", "api.pem".as_ref(), "api.key".as_ref())
///     .client_ca("clients-ca.pem".as_ref())
///     .build()?;
/// # let _ = config;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ServerTls {
    default: (PathBuf, PathBuf),
    names: Vec<(String, PathBuf, PathBuf)>,
    client_ca: Option<PathBuf>,
    alpn: Vec<Vec<u8>>,
}

impl ServerTls {
    /// The certificate chain (leaf first) and key served to a client that
    /// names no server, or one no [`sni`](Self::sni) entry has.
    pub fn new(cert_chain: &Path, key: &Path) -> ServerTls {
        ServerTls {
            default: (cert_chain.to_path_buf(), key.to_path_buf()),
            names: Vec::new(),
            client_ca: None,
            alpn: vec![b"http/1.1".to_vec()],
        }
    }

    /// The certificate and key served to a client that asks for `name`.
    pub fn sni(mut self, name: &str, cert_chain: &Path, key: &Path) -> ServerTls {
        self.names.push((
            name.to_ascii_lowercase(),
            cert_chain.to_path_buf(),
            key.to_path_buf(),
        ));
        self
    }

    /// Asks every client for a certificate signed by an authority of
    /// `ca_file` (PEM), and refuses the handshake of one that has none.
    pub fn client_ca(mut self, ca_file: &Path) -> ServerTls {
        self.client_ca = Some(ca_file.to_path_buf());
        self
    }

    /// The protocols offered by ALPN, most preferred first (`http/1.1`
    /// alone unless set). `[b"h2", b"http/1.1"]` lets clients choose
    /// HTTP/2 with a handler that serves it (percore-handlers'
    /// `HttpHandler` with its `h2` feature), and HTTP/1.1 still. Offer
    /// only what the listener's handler speaks: a client that gets `h2`
    /// talks HTTP/2 from its first byte.
    pub fn alpn(mut self, protocols: &[&[u8]]) -> ServerTls {
        self.alpn = protocols.iter().map(|p| p.to_vec()).collect();
        self
    }

    /// Reads the files and builds the configuration.
    ///
    /// # Errors
    ///
    /// A file that cannot be read, holds no certificate or no key, a key
    /// that does not match its certificate, or an SNI name the certificate
    /// does not cover; the message names the file.
    pub fn build(&self) -> io::Result<Arc<rustls::ServerConfig>> {
        let provider = super::provider();
        let default = certified(&self.default.0, &self.default.1, &provider)?;
        let mut by_name = HashMap::new();
        for (name, cert, key) in &self.names {
            by_name.insert(name.clone(), certified(cert, key, &provider)?);
        }
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca)?), provider)
                        .build()
                        .map_err(|e| invalid(format!("{}: {e}", ca.display())))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_cert_resolver(Arc::new(ByName { default, by_name }));
        config.alpn_protocols = self.alpn.clone();
        config.ticketer =
            super::ticketer().map_err(|e| io::Error::other(format!("TLS session tickets: {e}")))?;
        Ok(Arc::new(config))
    }
}

/// A certificate chain and its signing key, checked to match.
fn certified(
    cert: &Path,
    key: &Path,
    provider: &rustls::crypto::CryptoProvider,
) -> io::Result<Arc<CertifiedKey>> {
    let certified = CertifiedKey::from_der(certificates(cert)?, private_key(key)?, provider)
        .map_err(|e| invalid(format!("{}: {e}", cert.display())))?;
    Ok(Arc::new(certified))
}

/// Chooses the certificate by the name the client asked for.
#[derive(Debug)]
struct ByName {
    default: Arc<CertifiedKey>,
    by_name: HashMap<String, Arc<CertifiedKey>>,
}

impl ResolvesServerCert for ByName {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let named = hello
            .server_name()
            .and_then(|name| self.by_name.get(&name.to_ascii_lowercase()));
        Some(named.unwrap_or(&self.default).clone())
    }
}
