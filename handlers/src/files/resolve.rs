//! From a request path to a file under the root, never outside it.
//!
//! Two steps. The path as sent is split into segments, each
//! percent-decoded on its own; a segment that decodes to `.` or `..`, or
//! holds a `/` (`%2f`), a backslash or a NUL, refuses the whole path.
//! What is left can only name something below the root by its names, so
//! the one way out is a symbolic link: every component is looked at with
//! `statx` without following links, and only when one is a link is the
//! whole path resolved (`realpath`, off the core) and required to stay
//! under the root's own resolved path. The common path, free of links,
//! thus costs a `statx` per component and no thread.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use percent_encoding::percent_decode_str;
use percore::fs::Metadata;

/// A request path's place under the root.
#[derive(Debug)]
pub(crate) enum Target {
    /// A regular file: its resolved path, free of links. (Its metadata is
    /// read again from the open file, whose bytes are the ones sent.)
    File(PathBuf),
    /// A directory named without its trailing slash: redirect.
    Directory,
    /// Nothing to serve: refused, missing, outside the root, or neither a
    /// file nor a directory with an index.
    Missing,
}

/// The relative path that `path` (as sent, starting with `/`) names, and
/// whether it ended with a slash; `None` for a path that tries to leave
/// the root or holds bytes no file name here may.
pub(crate) fn relative(path: &str) -> Option<(PathBuf, bool)> {
    let rest = path.strip_prefix('/')?;
    let mut rel = PathBuf::new();
    for raw in rest.split('/') {
        let seg: Vec<u8> = percent_decode_str(raw).collect();
        if seg == b"." || seg == b".." || seg.iter().any(|&b| matches!(b, b'/' | b'\\' | 0)) {
            return None;
        }
        // Empty segments (`a//b`, the trailing slash) add nothing.
        if !seg.is_empty() {
            rel.push(OsStr::from_bytes(&seg));
        }
    }
    Some((rel, rest.is_empty() || rest.ends_with('/')))
}

/// What `rel` names under `root` (a resolved path), with `index` served
/// for a directory asked for with a trailing slash.
pub(crate) async fn resolve(
    root: &Path,
    rel: &Path,
    slash: bool,
    index: &str,
) -> io::Result<Target> {
    let Some((path, meta)) = walk(root, root.join(rel)).await? else {
        return Ok(Target::Missing);
    };
    if meta.is_file() {
        // `/file.txt/` names a directory that is not there (404, as on
        // nginx), not the file.
        return Ok(if slash {
            Target::Missing
        } else {
            Target::File(path)
        });
    }
    if !meta.is_dir() {
        return Ok(Target::Missing);
    }
    if !slash {
        return Ok(Target::Directory);
    }
    let index_path = path.join(index);
    Ok(match walk(root, index_path).await? {
        Some((path, meta)) if meta.is_file() => Target::File(path),
        _ => Target::Missing,
    })
}

/// `path` (under `root`) resolved to a path with no links that is still
/// under `root`, with its metadata; `None` if it does not exist or leads
/// out.
async fn walk(root: &Path, path: PathBuf) -> io::Result<Option<(PathBuf, Metadata)>> {
    let Ok(below) = path.strip_prefix(root) else {
        return Ok(None);
    };
    let mut here = root.to_path_buf();
    let mut meta = None;
    for part in below.components() {
        here.push(part);
        match percore::fs::symlink_metadata(&here).await {
            Ok(m) if m.is_symlink() => return resolve_links(root, path).await,
            Ok(m) => meta = Some(m),
            Err(e) if gone(&e) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    Ok(match meta {
        Some(meta) => Some((path, meta)),
        // The root itself: stat it like any directory.
        None => Some((path, percore::fs::metadata(root).await?)),
    })
}

/// The slow path, for a path with a link in it: `realpath` off the core,
/// then the prefix check that keeps the answer under the root.
async fn resolve_links(root: &Path, path: PathBuf) -> io::Result<Option<(PathBuf, Metadata)>> {
    let real = match percore::spawn_blocking(move || std::fs::canonicalize(path)).await? {
        Ok(real) => real,
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    if !real.starts_with(root) {
        return Ok(None);
    }
    match percore::fs::metadata(&real).await {
        Ok(meta) => Ok(Some((real, meta))),
        Err(e) if gone(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Errors that mean "no such file here" to a client: missing, a file
/// used as a directory, a loop of links, or a name too long. Permission
/// errors are the operator's to see, as 500s in the log.
fn gone(e: &io::Error) -> bool {
    // ENAMETOOLONG and ELOOP have no stable `ErrorKind`.
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    ) || matches!(e.raw_os_error(), Some(libc::ENAMETOOLONG | libc::ELOOP))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_every_way_out() {
        for path in [
            "/../secret",
            "/%2e%2e/secret",
            "/a/..%2f..%2fsecret",
            "/a/%2E%2E",
            "/%00",
            "/..\\secret",
            "/a%5c..%5csecret",
            "/./a",
            "relative",
        ] {
            assert_eq!(relative(path), None, "{path}");
        }
    }

    #[test]
    fn keeps_plain_names() {
        assert_eq!(relative("/"), Some((PathBuf::new(), true)));
        assert_eq!(
            relative("/a//b.txt"),
            Some((PathBuf::from("a/b.txt"), false))
        );
        assert_eq!(relative("/a%20b/"), Some((PathBuf::from("a b"), true)));
        assert_eq!(relative("/..a"), Some((PathBuf::from("..a"), false)));
    }
}
