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
//!   nginx does), so that the index's relative links resolve. A file
//!   named with a trailing slash (`/file.txt/`) is a `404`, as on nginx.
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
//! The body goes out with [`Response::send_file`]: a range of 16 KiB or
//! more that is in the page cache, on a connection without TLS, with
//! `sendfile` (no copy through the process); anything else is read with
//! [`percore::fs::File::read_at`], which never blocks the core, in pieces
//! of 64 KiB at most, each sent before the next is read. Either way a
//! large file costs a connection no more memory than a small one. A file
//! that shrinks while it is sent ends the response short, and the
//! connection with it (the length was already announced), which a client
//! sees as a truncated body.
//!
//! # The open-file cache
//!
//! Without a cache each request costs a `statx` per path component, an
//! `open` and an `fstat` before the reads (and on epoll each is a trip
//! to the blocking pool). Each core therefore keeps the files it served
//! lately open, as nginx's `open_file_cache` does: by default up to
//! 1,000 per core, each used for one second after it was opened and then
//! looked up anew. A file deleted or replaced by rename is thus served
//! at most that late; one edited in place keeps its old length and
//! validators as long (a file that shrank ends its responses short, as
//! above). Missing files are never cached.
//!
//! An entry whose second has run out is closed even if nobody asks for
//! its path again: while a core holds entries, a task of the core sweeps
//! them once a period, so a deleted file's descriptor, and with it the
//! file's disk space, is let go within about two periods of its last
//! opening (2 s by default; a response still sending it holds it to its
//! end). The sweep costs a core one timer wake per period while its
//! cache holds files and none when it holds none; a request pays no
//! more than before, as a hit makes no system call and a miss opens
//! the file as it always did. [`StaticFiles::cache`] sets both bounds,
//! and turns the cache off; [`StaticFiles::cache_stats`] counts what it
//! holds.

mod cache;
mod conditional;
mod mime;
mod resolve;

use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use percore::fs::OpenOptions;

use crate::http::{Request, Response, Service};
pub use cache::CacheStats;
use cache::{Cache, Open};
use conditional::{Range, Validators};
use resolve::Target;

/// Entries per core in the open-file cache, unless [`StaticFiles::cache`]
/// says otherwise.
pub const DEFAULT_CACHE_ENTRIES: usize = 1000;

/// How long a cache entry is used, unless [`StaticFiles::cache`] says
/// otherwise.
pub const DEFAULT_CACHE_VALID: Duration = Duration::from_secs(1);

/// Serves the files under one directory: `GET`, `HEAD`, conditional
/// requests and single ranges (see the [module docs](self)).
///
/// Cheap to clone (one per core): the root and the cache's settings are
/// shared, the cached files are each core's own.
#[derive(Debug, Clone)]
pub struct StaticFiles {
    /// The root, resolved once: every file served must resolve under it.
    root: Arc<Path>,
    /// The file a directory is served by.
    index: Arc<str>,
    /// The open-file cache; `None` when it is off.
    cache: Option<Cache>,
}

impl StaticFiles {
    /// Serves the directory `root`, with `index.html` for directories
    /// and the open-file cache at its defaults ([`DEFAULT_CACHE_ENTRIES`],
    /// [`DEFAULT_CACHE_VALID`]).
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
            cache: Cache::new(DEFAULT_CACHE_ENTRIES, DEFAULT_CACHE_VALID),
        })
    }

    /// Sets the open-file cache (see the [module docs](self)): each core
    /// keeps up to `entries` files open, each used for `valid` after it
    /// was opened and closed within about twice `valid` (a file deleted
    /// meanwhile keeps its disk space as long). Either at zero turns the
    /// cache off, so that every request looks at the tree anew.
    ///
    /// A new cache, empty, with counters of its own: clones made before
    /// keep the old one.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use percore_handlers::files::StaticFiles;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// // 10,000 files per core, each looked at again every 5 s.
    /// let files = StaticFiles::new("./public")?.cache(10_000, Duration::from_secs(5));
    /// // No cache: a file changed is served changed at once.
    /// let live = StaticFiles::new("./drafts")?.cache(0, Duration::ZERO);
    /// # let _ = (files, live);
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn cache(mut self, entries: usize, valid: Duration) -> StaticFiles {
        self.cache = Cache::new(entries, valid);
        self
    }

    /// What the open-file cache holds now and has opened, over all cores
    /// (all zeros when it is off).
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.as_ref().map(Cache::stats).unwrap_or_default()
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
        if let Some(open) = self.cache.as_ref().and_then(|c| c.get(path)) {
            return send_file(req, &open, res).await;
        }
        let target = match resolve::relative(path) {
            Some((rel, slash)) => resolve::resolve(&self.root, &rel, slash, &self.index).await?,
            None => Target::Missing,
        };
        match target {
            Target::File(resolved) => {
                let Some(open) = open(resolved).await? else {
                    res.send(404, Some(b"text/plain"), b"not found\n")?;
                    return Ok(());
                };
                let open = Rc::new(open);
                if let Some(cache) = &self.cache {
                    cache.insert(path, &open);
                }
                send_file(req, &open, res).await
            }
            Target::Directory => {
                // One leading slash: `//name/` would send the browser to
                // the host `name` (a network-path reference, RFC 3986
                // §4.2), a redirect anyone could aim with a link.
                let mut location = format!("/{}/", req.path().trim_start_matches('/'));
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
}

/// Opens the file at `path` (resolved, free of links) and reads its
/// metadata; `None` if it is gone since it was resolved.
async fn open(path: PathBuf) -> io::Result<Option<Open>> {
    // The resolved path has no links; refusing one at the last step
    // narrows what a link swapped in since then could reach.
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .await
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    // The open file's own metadata: the one whose bytes are sent.
    let meta = file.metadata().await?;
    Ok(Some(Open { path, file, meta }))
}

/// Answers `req` with the open file: validators, conditions, range, and
/// the bytes unless it is `HEAD`.
async fn send_file(req: &Request<'_>, open: &Open, res: &mut Response<'_>) -> io::Result<()> {
    let meta = &open.meta;
    let len = meta.len();
    let tags = Validators::of(meta);
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
    let name = open
        .path
        .file_name()
        .map_or(&b""[..], |n| n.as_encoded_bytes());
    res.header("Content-Type", mime::content_type(name).as_bytes())?;
    res.set_content_length(end - start)?;
    if req.method() == "HEAD" {
        return Ok(());
    }
    res.send_file(&open.file, start, end - start).await
}

impl Service for StaticFiles {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        let path = req.path();
        self.serve(req, path, res).await
    }
}
