//! [`Backend`]: which kernel interface a core drives, as a server's
//! builder and `PERCORE_BACKEND` name it. A leaf, below the drivers it
//! names, so that the counters can say which one a core runs.

use std::fmt;
use std::str::FromStr;

/// Which kernel interface a core's executor drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// io_uring; failing to set it up is a start-up error.
    Uring,
    /// epoll with non-blocking syscalls; works wherever Linux does.
    Epoll,
    /// io_uring when the kernel allows it, otherwise epoll (logged once
    /// with the reason). The default.
    #[default]
    Auto,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Uring => "uring",
            Backend::Epoll => "epoll",
            Backend::Auto => "auto",
        })
    }
}

/// The string was not `uring`, `epoll` or `auto`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseBackendError(String);

impl fmt::Display for ParseBackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown backend {:?}: expected uring, epoll or auto",
            self.0
        )
    }
}

impl std::error::Error for ParseBackendError {}

impl FromStr for Backend {
    type Err = ParseBackendError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "uring" | "io_uring" | "io-uring" => Ok(Backend::Uring),
            "epoll" => Ok(Backend::Epoll),
            "auto" => Ok(Backend::Auto),
            _ => Err(ParseBackendError(s.to_owned())),
        }
    }
}
