//! Static files: [`StaticFiles`] serves a directory tree over HTTP, as a
//! [`Service`] of its own or from a [`Router`](crate::http::Router) route.
//!
//! ```no_run
//! use percore_handlers::files::StaticFiles;
//! use percore_handlers::http::HttpHandler;
//!
//! fn main() -> std::io::Result<()> {
//!     let files = StaticFiles::new("./public")?;
//!     percore::Server::builder()
//!         .address("127.0.0.1:8083".parse().expect("an address"))
//!         .serve(move |_core| HttpHandler::new(files.clone()))
//! }
//! ```
//!
//! From a router, hand it the rest of the path as sent (still
//! percent-encoded):
//!
//! ```no_run
//! use std::io;
//! use percore_handlers::files::StaticFiles;
//! use percore_handlers::http::{Response, Routed, Router};
//!
//! async fn assets(files: &StaticFiles, req: &mut Routed<'_, '_>, res: &mut Response<'_>) -> io::Result<()> {
//!     let rest = req.param_raw("rest").unwrap_or_default();
//!     files.serve(req, &format!("/{rest}"), res).await
//! }
//!
//! # fn main() -> io::Result<()> {
//! let files = StaticFiles::new("./public")?;
//! let routes = Router::new(files).get("/assets/{*rest}", assets).build();
//! # let _ = routes;
//! # Ok(())
//! # }
//! ```
//!
//! # What it answers
//!
//! - `GET` and `HEAD` only; anything else is `405` with `Allow: GET, HEAD`.
//! - The path is percent-decoded segment by segment; `..`, `.`, encoded
//!   slashes, backslashes and NUL bytes are refused, and a symbolic link
//!   is followed only if it stays under the root (see `resolve`). Every
//!   refusal, like a missing file, is a `404`: a client cannot tell
//!   what exists outside. The checks look at the tree before the file is
//!   opened (the open itself refuses a final link): a tree that someone
//!   rearranges with links while it is served is outside what they
//!   guard, so the root should be writable only by whoever may publish.
//! - A directory is served by its `index.html`, never listed. A directory
//!   named without its trailing slash gets `301` to the slash form (as
//!   nginx does), so that the index's relative links resolve.
//! - `Content-Type` from a small table by extension
//!   (`application/octet-stream` otherwise), `Content-Length`,
//!   `Last-Modified`, a strong `ETag` (inode, size, modification time),
//!   `Accept-Ranges: bytes`.
//! - `304` for `If-None-Match` matching the tag, or, without it,
//!   `If-Modified-Since` not older than the file.
//! - One range (`bytes=a-b`, `a-`, `-n`): `206` with `Content-Range`;
//!   outside the file: `416` with `Content-Range: bytes */len`. Several
//!   ranges get the whole file with `200`, as RFC 9110 allows. `If-Range`
//!   that does not match also gets the whole file.
//!
//! # Reading
//!
//! A file is read with [`percore::fs::File::read_at`], which never blocks
//! the core, in pieces of 64 KiB at most, each sent with
//! [`Response::flush`] before the next is read: a large file costs a
//! connection no more memory than a small one. A file that shrinks while
//! it is sent ends the response short, and the connection with it (the
//! length was already announced), which a client sees as a truncated
//! body.
//!
//! No metadata is cached: each request costs a `statx` per path
//! component, an `open` and the reads.

mod conditional;
mod mime;
mod resolve;

use std::io;
use std::path::Path;
use std::sync::Arc;

use percore::fs::{File, OpenOptions};

use crate::http::{Request, Response, Service};
use conditional::{Range, Validators};
use resolve::Target;

/// The largest piece of a file read and sent at once.
const CHUNK: usize = 64 * 1024;

/// Serves the files under one directory: `GET`, `HEAD`, conditional
/// requests and single ranges (see the [module docs](self)).
///
/// Cheap to clone (one per core): the root is shared.
#[derive(Debug, Clone)]
pub struct StaticFiles {
    /// The root, resolved once: every file served must resolve under it.
    root: Arc<Path>,
    /// The file a directory is served by.
    index: Arc<str>,
}

impl StaticFiles {
    /// Serves the directory `root`, with `index.html` for directories.
    ///
    /// # Errors
    ///
    /// `root` does not exist or is not a directory (resolved with the
    /// blocking `realpath` here, at start-up, not on a core).
    pub fn new(root: impl AsRef<Path>) -> io::Result<StaticFiles> {
        let root = std::fs::canonicalize(root)?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", root.display()),
            ));
        }
        Ok(StaticFiles {
            root: root.into(),
            index: "index.html".into(),
        })
    }

    /// The resolved root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Answers `req` with the file that `path` names under the root;
    /// `path` is as sent (percent-encoded), starting with `/`. A
    /// [`Service`] passes [`Request::path`]; a router route passes the
    /// part its pattern leaves.
    ///
    /// # Errors
    ///
    /// A file system error other than "not found" (a 500), or a send
    /// error while streaming.
    pub async fn serve(
        &self,
        req: &Request<'_>,
        path: &str,
        res: &mut Response<'_>,
    ) -> io::Result<()> {
        let method = req.method();
        if method != "GET" && method != "HEAD" {
            res.header("Allow", b"GET, HEAD")?;
            res.send(405, Some(b"text/plain"), b"method not allowed\n")?;
            return Ok(());
        }
        let target = match resolve::relative(path) {
            Some((rel, slash)) => resolve::resolve(&self.root, &rel, slash, &self.index).await?,
            None => Target::Missing,
        };
        match target {
            Target::File(path) => self.send_file(req, &path, res).await,
            Target::Directory => {
                let mut location = req.path().to_owned();
                location.push('/');
                if let Some(query) = req.query() {
                    location.push('?');
                    location.push_str(query);
                }
                res.header("Location", location.as_bytes())?;
                res.send(301, Some(b"text/plain"), b"moved permanently\n")?;
                Ok(())
            }
            Target::Missing => {
                res.send(404, Some(b"text/plain"), b"not found\n")?;
                Ok(())
            }
        }
    }

    async fn send_file(
        &self,
        req: &Request<'_>,
        path: &Path,
        res: &mut Response<'_>,
    ) -> io::Result<()> {
        // The resolved path has no links; refusing one at the last step
        // narrows what a link swapped in since then could reach.
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .await
        {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                res.send(404, Some(b"text/plain"), b"not found\n")?;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        // The open file's own metadata: the one whose bytes are sent.
        let meta = file.metadata().await?;
        let len = meta.len();
        let tags = Validators::of(&meta);
        res.header("ETag", tags.etag.as_bytes())?;
        res.header("Last-Modified", &tags.last_modified)?;
        if tags.not_modified(req.header("If-None-Match"), req.header("If-Modified-Since")) {
            res.set_status(304);
            return Ok(());
        }
        res.header("Accept-Ranges", b"bytes")?;
        let range = if tags.range_allowed(req.header("If-Range")) {
            conditional::range(req.header("Range"), len)
        } else {
            Range::Whole
        };
        let (start, end) = match range {
            Range::Whole => (0, len),
            Range::Part { start, end } => {
                res.set_status(206);
                let value = format!("bytes {start}-{}/{len}", end - 1);
                res.header("Content-Range", value.as_bytes())?;
                (start, end)
            }
            Range::Unsatisfiable => {
                res.header("Content-Range", format!("bytes */{len}").as_bytes())?;
                res.send(416, Some(b"text/plain"), b"range not satisfiable\n")?;
                return Ok(());
            }
        };
        let name = path.file_name().map_or(&b""[..], |n| n.as_encoded_bytes());
        res.header("Content-Type", mime::content_type(name).as_bytes())?;
        res.set_content_length(end - start)?;
        if req.method() == "HEAD" {
            return Ok(());
        }
        stream(&file, start, end, res).await
    }
}

/// Sends bytes `start..end` of `file`, a piece at a time. A piece that
/// fits is sent with the response; a longer body is flushed piece by
/// piece, so that one buffer of [`CHUNK`] bytes is all it holds.
async fn stream(file: &File, start: u64, end: u64, res: &mut Response<'_>) -> io::Result<()> {
    let total = end - start;
    let mut buf = Vec::with_capacity(usize::try_from(total).unwrap_or(CHUNK).min(CHUNK));
    let mut pos = start;
    while pos < end {
        buf.clear();
        let (read, back) = file.read_at(buf, pos).await;
        buf = back;
        let n = read?;
        if n == 0 {
            // Shorter than its length said: truncated while sent. The
            // error closes the connection, the body incomplete.
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the file shrank while it was sent",
            ));
        }
        let n = n.min(usize::try_from(end - pos).unwrap_or(usize::MAX));
        res.write(&buf[..n]);
        pos += n as u64;
        if total > CHUNK as u64 {
            res.flush().await?;
        }
    }
    Ok(())
}

impl Service for StaticFiles {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        let path = req.path();
        self.serve(req, path, res).await
    }
}
