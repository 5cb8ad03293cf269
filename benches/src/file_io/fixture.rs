//! [`Fixture`]: the run's directory and the files every implementation
//! reads (made once, before the first cell), and the page-cache helpers.

use std::ffi::CString;
use std::fs;
use std::io::{self, Write as _};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::plan::Plan;
use super::{random_offsets, READ_LEN};

/// Where the bench's files go when `--dir` is not given: on the root disk
/// (`/tmp` may be a tmpfs, which has no device behind it).
pub const DEFAULT_PARENT: &str = "/var/tmp";

/// The run's directory and its shared files, removed when dropped.
#[derive(Debug)]
pub struct Fixture {
    /// `percore-file-io-<pid>` in the parent directory; everything lives
    /// here.
    pub dir: PathBuf,
    /// The file system type of `dir` (`ext4`, `tmpfs`, ...).
    pub fs_type: String,
    /// The vectored-read file, `plan.vec_size` bytes.
    pub vec_file: PathBuf,
    /// The warm file of the 4 KiB reads, `plan.warm_size` bytes.
    pub warm_file: PathBuf,
    /// The files of the tree at each depth: `(depth, paths)`.
    pub trees: Vec<(usize, Arc<Vec<PathBuf>>)>,
    /// Offsets of the random reads, the same for every implementation.
    pub rand_offsets: Arc<Vec<u64>>,
    /// Offsets of the warm reads: front to back, wrapping.
    pub seq_offsets: Arc<Vec<u64>>,
}

impl Fixture {
    /// Makes the directory under `parent` and its files.
    ///
    /// # Errors
    ///
    /// Any failure to create, write or read them back.
    pub fn new(parent: &Path, plan: &Plan) -> io::Result<Fixture> {
        let parent = parent.canonicalize()?;
        let dir = parent.join(format!("percore-file-io-{}", std::process::id()));
        // A crashed run of the same pid may have left it.
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir)?;
        let mut fx = Fixture {
            fs_type: fs_type(&dir),
            vec_file: dir.join("vectored"),
            warm_file: dir.join("warm"),
            dir,
            trees: Vec::new(),
            rand_offsets: Arc::new(random_offsets(plan.reads, plan.warm_size)),
            seq_offsets: Arc::new(
                (0..plan.reads as u64)
                    .map(|i| (i * READ_LEN as u64) % plan.warm_size)
                    .collect(),
            ),
        };
        write_file(&fx.vec_file, plan.vec_size)?;
        write_file(&fx.warm_file, plan.warm_size)?;
        warm(&fx.warm_file)?;
        for &depth in &plan.depths {
            let files = make_tree(&fx.dir, depth, plan.tree_files)?;
            fx.trees.push((depth, Arc::new(files)));
        }
        Ok(fx)
    }

    /// The files of the tree at `depth`.
    pub fn tree(&self, depth: usize) -> Arc<Vec<PathBuf>> {
        self.trees
            .iter()
            .find(|(d, _)| *d == depth)
            .map(|(_, f)| f.clone())
            .expect("a tree for every depth of the plan")
    }

    /// A path for a cell's new file.
    pub fn scratch_file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_dir_all(&self.dir) {
            eprintln!("warning: could not remove {}: {e}", self.dir.display());
        }
    }
}

/// The data every write cell writes: `len` bytes of a pattern, not zeroes
/// (which a file system could store sparsely).
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 + 1).collect()
}

/// Writes a `size`-byte file of the pattern and flushes it to the device.
fn write_file(path: &Path, size: u64) -> io::Result<()> {
    let chunk = pattern(1 << 20);
    let mut f = fs::File::create(path)?;
    let mut left = size;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    f.sync_all()
}

/// Reads the whole file, so that the page cache holds it.
pub fn warm(path: &Path) -> io::Result<()> {
    io::copy(&mut fs::File::open(path)?, &mut io::sink()).map(drop)
}

/// Flushes the file and drops its pages from the page cache: the next
/// read goes to the device (or the VM host's cache).
pub fn drop_cache(path: &Path) -> io::Result<()> {
    let f = fs::File::open(path)?;
    f.sync_all()?;
    // SAFETY: the fd is open for the call's duration; the advice changes
    // no memory of ours.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// `files` empty files `depth` directories below `root`:
/// `root/d<depth>/a/a/.../f<i>`.
fn make_tree(root: &Path, depth: usize, files: usize) -> io::Result<Vec<PathBuf>> {
    let mut leaf = root.join(format!("d{depth}"));
    for _ in 1..depth {
        leaf.push("a");
    }
    fs::create_dir_all(&leaf)?;
    (0..files)
        .map(|i| {
            let p = leaf.join(format!("f{i}"));
            fs::write(&p, b"x").map(|()| p)
        })
        .collect()
}

/// The type of the file system `dir` is on, by its `statfs` magic.
fn fs_type(dir: &Path) -> String {
    let Ok(c) = CString::new(dir.as_os_str().as_bytes()) else {
        return "unknown".into();
    };
    // SAFETY: all-zero is a valid `statfs` (plain integers).
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` is writable.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return "unknown".into();
    }
    let name = match st.f_type as i64 {
        0xEF53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x0102_1994 => "tmpfs",
        0x794C_7630 => "overlayfs",
        0x2FC1_2FC1 => "zfs",
        0x6969 => "nfs",
        0x0187 => "autofs",
        _ => return format!("f_type {:#x}", st.f_type),
    };
    name.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makes_and_removes_its_directory() {
        let plan = Plan {
            vec_size: 64 * 1024,
            warm_size: 64 * 1024,
            tree_files: 3,
            reads: 10,
            ..Plan::quick()
        };
        let fx = Fixture::new(&std::env::temp_dir(), &plan).unwrap();
        let dir = fx.dir.clone();
        assert_eq!(fs::metadata(&fx.warm_file).unwrap().len(), 64 * 1024);
        let deep = fx.tree(16);
        assert_eq!(deep.len(), 3);
        assert_eq!(deep[0].strip_prefix(&dir).unwrap().components().count(), 17);
        drop_cache(&fx.vec_file).unwrap();
        assert_ne!(fx.fs_type, "");
        drop(fx);
        assert!(!dir.exists());
    }
}
