//! [`Metadata`]: what `statx` says about a file, on both backends.

use std::time::{Duration, SystemTime};

/// A file's type, size, permissions and times.
#[derive(Debug, Clone)]
pub struct Metadata {
    stx: libc::statx,
}

impl Metadata {
    pub(crate) fn from_statx(stx: libc::statx) -> Metadata {
        Metadata { stx }
    }

    fn file_type(&self) -> u32 {
        u32::from(self.stx.stx_mode) & libc::S_IFMT
    }

    /// The size in bytes (of the file's content: a sparse file counts its
    /// holes).
    pub fn len(&self) -> u64 {
        self.stx.stx_size
    }

    /// Whether the size is zero.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether this is a regular file.
    pub fn is_file(&self) -> bool {
        self.file_type() == libc::S_IFREG
    }

    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.file_type() == libc::S_IFDIR
    }

    /// Whether this is a symbolic link (only by a path's metadata, which
    /// does not follow the last link; see [`symlink_metadata`](super::symlink_metadata)).
    pub fn is_symlink(&self) -> bool {
        self.file_type() == libc::S_IFLNK
    }

    /// The permission bits (`0o7777`), as `chmod` sets them.
    pub fn mode(&self) -> u32 {
        u32::from(self.stx.stx_mode) & 0o7777
    }

    /// The inode number.
    pub fn ino(&self) -> u64 {
        self.stx.stx_ino
    }

    /// How many disk blocks of 512 bytes the file occupies: less than its
    /// length for a sparse file.
    pub fn blocks(&self) -> u64 {
        self.stx.stx_blocks
    }

    /// The last modification time.
    pub fn modified(&self) -> SystemTime {
        let t = self.stx.stx_mtime;
        let since = Duration::new(t.tv_sec.unsigned_abs(), t.tv_nsec);
        if t.tv_sec >= 0 {
            SystemTime::UNIX_EPOCH + since
        } else {
            SystemTime::UNIX_EPOCH - since
        }
    }
}
