//! Where a client finds a server: [`Target`], a loopback TCP address or a
//! Unix socket file, and [`SocketDir`], the temporary directory a server's
//! socket file lives in.
//!
//! Why an enum and not a second address beside the TCP one: a server
//! listens on one transport, the one its service asks for, so a client
//! gets exactly one place to connect to and a job that needs the other
//! transport fails with a message instead of measuring the wrong socket.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Where a server listens and its clients connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A TCP address (on loopback in the harness).
    Tcp(SocketAddr),
    /// A Unix domain socket file.
    Unix(PathBuf),
}

impl Target {
    /// The TCP address, for the clients that only speak TCP.
    ///
    /// # Errors
    ///
    /// `InvalidInput` if the server listens on a Unix socket.
    pub fn tcp(&self) -> io::Result<SocketAddr> {
        match self {
            Target::Tcp(addr) => Ok(*addr),
            Target::Unix(_) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("this client needs a TCP server; the server listens on {self}"),
            )),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Tcp(addr) => write!(f, "{addr}"),
            Target::Unix(path) => write!(f, "unix:{}", path.display()),
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
    dir: PathBuf,
}

impl SocketDir {
    /// Creates `percore-bench-<pid>-<name>` in the temporary directory,
    /// replacing one a crashed run of the same pid left behind.
    ///
    /// # Errors
    ///
    /// As [`std::fs::create_dir`].
    pub fn new(name: &str) -> io::Result<SocketDir> {
        let dir = std::env::temp_dir().join(format!("percore-bench-{}-{name}", std::process::id()));
        // Absent is the usual case; any other failure shows in create_dir.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir)?;
        Ok(SocketDir { dir })
    }

    /// The path of the socket file (not created here: the server binds it).
    pub fn socket(&self) -> PathBuf {
        self.dir.join("server.sock")
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        // Leftovers in the temporary directory are harmless: nothing to
        // report from a destructor.
        let _ = std::fs::remove_dir_all(&self.dir);
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
