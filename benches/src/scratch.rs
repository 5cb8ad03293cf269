//! [`ScratchDir`]: a fresh temporary directory of this process, removed
//! with everything in it when dropped: where a server's socket file and a
//! run's certificates live.

use std::io;
use std::path::{Path, PathBuf};

/// A fresh directory under the temporary directory, removed when dropped.
///
/// Named after the process, so that two runs never share one and a
/// directory a crashed run left behind is replaced by the next run that
/// gets its pid.
#[derive(Debug)]
pub struct ScratchDir {
    dir: PathBuf,
}

impl ScratchDir {
    /// Creates `percore-bench-<pid>-<name>` in the temporary directory,
    /// replacing one a crashed run of the same pid left behind.
    ///
    /// # Errors
    ///
    /// As [`std::fs::create_dir`].
    pub fn new(name: &str) -> io::Result<ScratchDir> {
        let dir = std::env::temp_dir().join(format!("percore-bench-{}-{name}", std::process::id()));
        // Absent is the usual case; any other failure shows in create_dir.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir)?;
        Ok(ScratchDir { dir })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for ScratchDir {
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
    fn removed_on_drop() {
        let d = ScratchDir::new("scratch-test-drop").unwrap();
        let path = d.path().to_path_buf();
        std::fs::write(path.join("f"), b"x").unwrap();
        assert!(path.is_dir());
        drop(d);
        assert!(!path.exists());
    }
}
