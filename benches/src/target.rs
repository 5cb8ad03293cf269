//! Where a client finds a server: [`Target`], a loopback TCP address, the
//! same with TLS, or a Unix socket file; and [`SocketDir`], the temporary
//! directory a server's socket file lives in.
//!
//! Why an enum and not a second address beside the TCP one: a server
//! listens on one transport, the one its service asks for, so a client
//! gets exactly one place to connect to and a job that needs another
//! transport fails with a message instead of measuring the wrong socket.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::scratch::ScratchDir;

/// Where a server listens and its clients connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A TCP address (on loopback in the harness).
    Tcp(SocketAddr),
    /// A Unix domain socket file.
    Unix(PathBuf),
    /// TLS over TCP: the address, and the PEM file of the authority that
    /// signed the server's certificate, which the clients trust.
    Tls {
        /// The TCP address (on loopback in the harness).
        addr: SocketAddr,
        /// The CA certificate (PEM).
        ca: PathBuf,
    },
}

impl Target {
    /// The TCP address, for the clients that only speak TCP.
    ///
    /// # Errors
    ///
    /// `InvalidInput` if the server listens on a Unix socket or speaks TLS.
    pub fn tcp(&self) -> io::Result<SocketAddr> {
        match self {
            Target::Tcp(addr) => Ok(*addr),
            _ => Err(self.mismatch("a plain TCP")),
        }
    }

    /// The address and the CA file, for the clients that speak TLS.
    ///
    /// # Errors
    ///
    /// `InvalidInput` if the server does not speak TLS.
    pub fn tls(&self) -> io::Result<(SocketAddr, &Path)> {
        match self {
            Target::Tls { addr, ca } => Ok((*addr, ca)),
            _ => Err(self.mismatch("a TLS")),
        }
    }

    fn mismatch(&self, wanted: &str) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("this client needs {wanted} server; the server listens on {self}"),
        )
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Tcp(addr) => write!(f, "{addr}"),
            Target::Unix(path) => write!(f, "unix:{}", path.display()),
            Target::Tls { addr, .. } => write!(f, "https://{addr}"),
        }
    }
}

/// A fresh directory for one server's socket file, removed with
/// everything in it when dropped.
///
/// One directory per server, so that no server can find another's file
/// in its place, and so that a file a server failed to remove (a stop
/// that timed out) goes with the directory.
#[derive(Debug)]
pub struct SocketDir {
    dir: ScratchDir,
}

impl SocketDir {
    /// Creates `percore-bench-<pid>-<name>` in the temporary directory
    /// (see [`ScratchDir::new`]).
    ///
    /// # Errors
    ///
    /// As [`std::fs::create_dir`].
    pub fn new(name: &str) -> io::Result<SocketDir> {
        Ok(SocketDir {
            dir: ScratchDir::new(name)?,
        })
    }

    /// The path of the socket file (not created here: the server binds it).
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("server.sock")
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_clients_refuse_a_unix_target() {
        let tcp = Target::Tcp(SocketAddr::from(([127, 0, 0, 1], 80)));
        assert_eq!(tcp.tcp().unwrap().port(), 80);
        let unix = Target::Unix(PathBuf::from("/tmp/x.sock"));
        let err = unix.tcp().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("unix:/tmp/x.sock"), "{err}");
        assert_eq!(unix.tls().unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn tls_clients_and_plain_clients_are_kept_apart() {
        let addr = SocketAddr::from(([127, 0, 0, 1], 443));
        let tls = Target::Tls {
            addr,
            ca: PathBuf::from("/tmp/ca.pem"),
        };
        assert_eq!(tls.tls().unwrap(), (addr, Path::new("/tmp/ca.pem")));
        let err = tls.tcp().unwrap_err();
        assert!(err.to_string().contains("https://127.0.0.1:443"), "{err}");
        assert!(Target::Tcp(addr).tls().is_err());
    }

    #[test]
    fn socket_dir_is_removed_on_drop() {
        let d = SocketDir::new("test-drop").unwrap();
        let path = d.path().to_path_buf();
        std::fs::write(d.socket(), b"x").unwrap();
        assert!(path.is_dir());
        drop(d);
        assert!(!path.exists());
    }
}
