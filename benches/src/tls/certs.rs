//! [`TestCertificates`]: a certificate authority and a server certificate
//! it signs, made by the `openssl` command for one run, in a directory
//! removed with them.
//!
//! Why the command and not a Rust crate: `benches/tls.sh` makes its
//! certificates the same way, so both measure the same kind of key (ECDSA
//! P-256), and no certificate-making crate is needed for a benchmark.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::scratch::ScratchDir;

/// An EC P-256 CA and a leaf for `DNS:localhost` and `IP:127.0.0.1` it
/// signs, valid for two days, in a fresh directory that goes when this is
/// dropped.
#[derive(Debug)]
pub struct TestCertificates {
    dir: ScratchDir,
}

/// What the leaf is for: `tls::SERVER_NAME` and the loopback address.
const LEAF_EXTENSIONS: &str =
    "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n";

impl TestCertificates {
    /// Makes them with `openssl` (as `benches/tls.sh` does).
    ///
    /// # Errors
    ///
    /// Why there are none, as a sentence for a skip line: `openssl` is not
    /// installed, or one of its commands failed (with what it printed).
    pub fn generate() -> Result<TestCertificates, String> {
        // A directory per set: tests make several at once in one process.
        static MADE: AtomicUsize = AtomicUsize::new(0);
        let name = format!("tls-{}", MADE.fetch_add(1, Ordering::Relaxed));
        let certs = TestCertificates {
            dir: ScratchDir::new(&name)
                .map_err(|e| format!("no directory for the certificates: {e}"))?,
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let days = ["-days", "2"];
        std::fs::write(certs.file("leaf.ext"), LEAF_EXTENSIONS)
            .map_err(|e| format!("could not write the certificate's extensions: {e}"))?;
        certs.openssl(&[
            &["req", "-x509"],
            &ec[..],
            &days,
            &["-subj", "/CN=bench CA"],
            &["-keyout", "ca.key", "-out", "ca.pem"],
        ])?;
        certs.openssl(&[
            &["req"],
            &ec[..],
            &["-subj", "/CN=localhost"],
            &["-keyout", "key.pem", "-out", "leaf.csr"],
        ])?;
        certs.openssl(&[
            &[
                "x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            ],
            &[
                "-CAcreateserial",
                "-extfile",
                "leaf.ext",
                "-out",
                "cert.pem",
            ],
            &days,
        ])?;
        Ok(certs)
    }

    /// Runs `openssl` with the concatenated `args` in the directory.
    fn openssl(&self, args: &[&[&str]]) -> Result<(), String> {
        let args: Vec<&str> = args.concat();
        let out = Command::new("openssl")
            .args(&args)
            .current_dir(self.dir.path())
            .output()
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => {
                    "the openssl command is not installed (it makes the test certificates)"
                        .to_string()
                }
                _ => format!("could not run openssl: {e}"),
            })?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "openssl {} failed ({}): {}",
                args.first().copied().unwrap_or_default(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The authority's certificate (PEM), for the clients.
    pub fn ca(&self) -> PathBuf {
        self.file("ca.pem")
    }

    /// The server's certificate (PEM).
    pub fn cert(&self) -> PathBuf {
        self.file("cert.pem")
    }

    /// The server's private key (PEM).
    pub fn key(&self) -> PathBuf {
        self.file("key.pem")
    }

    /// The directory they are in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The certificates load into both configurations and their directory
    /// goes with them; without openssl there is nothing to check.
    #[test]
    fn generated_certificates_load_and_go() {
        let certs = match TestCertificates::generate() {
            Ok(c) => c,
            Err(why) => {
                println!("skipped: {why}");
                return;
            }
        };
        crate::tls::server_config(&certs.cert(), &certs.key()).expect("server config");
        crate::tls::client_config(&certs.ca()).expect("client config");
        let dir = certs.dir().to_path_buf();
        drop(certs);
        assert!(!dir.exists(), "{} outlived the certificates", dir.display());
    }
}
