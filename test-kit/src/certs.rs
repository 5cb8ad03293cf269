//! Test certificates, made by `openssl` into a temporary directory at each
//! run (nothing that expires is kept in the repository): a CA, and leaf
//! certificates it signs.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A test CA and a server certificate it signed for `localhost` and
/// `127.0.0.1`, in a directory removed when dropped.
#[derive(Debug)]
pub struct TestCert {
    /// The directory.
    pub dir: PathBuf,
    /// The CA's certificate (PEM): what a client trusts.
    pub ca: PathBuf,
    /// The server's certificate (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
}

impl TestCert {
    /// Makes them under `name` in the temporary directory. `None` (after
    /// printing why) when openssl is missing, unless the test script
    /// promised it in `PERCORE_TEST_TOOLS`, where that is a failure.
    pub fn new(name: &str) -> Option<TestCert> {
        let dir = std::env::temp_dir().join(format!("percore-cert-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("certificate directory");
        let ca = dir.join("ca.pem");
        let ca_key = dir.join("ca.key");
        let made = openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=percore test CA",
            "-keyout",
            &path(&ca_key),
            "-out",
            &path(&ca),
        ])?;
        assert!(made, "openssl could not make the test CA");
        let certs = TestCert {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
            ca,
            dir,
        };
        certs.leaf("localhost", &certs.cert, &certs.key);
        Some(certs)
    }

    /// Another server certificate of this CA, for `name`: returns its
    /// certificate and key.
    pub fn other(&self, name: &str) -> (PathBuf, PathBuf) {
        let (cert, key) = (
            self.dir.join(format!("{name}.pem")),
            self.dir.join(format!("{name}.key")),
        );
        self.leaf(name, &cert, &key);
        (cert, key)
    }

    fn leaf(&self, name: &str, cert: &Path, key: &Path) {
        let csr = self.dir.join(format!("{name}.csr"));
        let ext = self.dir.join(format!("{name}.ext"));
        std::fs::write(
            &ext,
            format!(
                "subjectAltName=DNS:{name},IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
                 keyUsage=digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n"
            ),
        )
        .expect("extensions file");
        let made = openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &path(key),
            "-out",
            &path(&csr),
        ]) == Some(true)
            && openssl(&[
                "x509",
                "-req",
                "-in",
                &path(&csr),
                "-CA",
                &path(&self.ca),
                "-CAkey",
                &path(&self.dir.join("ca.key")),
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &path(&ext),
                "-out",
                &path(cert),
            ]) == Some(true);
        assert!(made, "openssl could not make the certificate for {name}");
    }
}

impl Drop for TestCert {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// `Some(succeeded)`, or `None` when openssl is not installed.
fn openssl(args: &[&str]) -> Option<bool> {
    match Command::new("openssl").args(args).output() {
        Ok(out) => Some(out.status.success()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let promised = std::env::var("PERCORE_TEST_TOOLS").unwrap_or_default();
            assert!(
                !promised.split(',').any(|t| t == "openssl"),
                "openssl not installed, though the test script installs it"
            );
            println!("skipped: openssl not installed");
            None
        }
        Err(e) => panic!("run openssl: {e}"),
    }
}
