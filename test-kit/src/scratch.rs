//! What the file tests share: a scratch directory of the test's own, and
//! a future run on a `block_on` core with a hang guard.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A failure guard only: no verdict waits on it.
const HANG: Duration = Duration::from_secs(60);

/// A fresh directory of the test's own (named by the process and `name`),
/// removed on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh `percore-<pid>-<name>` directory under `base`.
    pub fn new(base: &Path, name: &str) -> TempDir {
        let dir = base.join(format!("percore-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the test's directory");
        TempDir(dir)
    }

    /// A fresh directory under the system's temporary directory.
    pub fn tmp(name: &str) -> TempDir {
        TempDir::new(&std::env::temp_dir(), name)
    }

    /// The directory itself.
    pub fn dir(&self) -> &Path {
        &self.0
    }

    /// `name` in the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `f` on a `block_on` core of `backend`; panics if it runs for a
/// minute (a hang) or the core cannot start.
pub fn on_core<T: 'static>(backend: percore::Backend, f: impl Future<Output = T> + 'static) -> T {
    percore::block_on(backend, async move {
        percore::time::timeout(HANG, f)
            .await
            .expect("the test hung")
    })
    .expect("run a core")
}
