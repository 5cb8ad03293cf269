//! `StaticFiles` on both backends: no way out of the root (dot segments,
//! encoded dots and slashes, NUL, backslashes, links leading out),
//! content types, 304 by tag and by date, ranges (206, 416, several),
//! `HEAD`, 405, directories, a 1 MiB file byte for byte, a file
//! truncated while it is sent, the open-file cache (files opened once,
//! bounded, off when asked), and the same answers as nginx serving the
//! same directory.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use percore_handlers::files::StaticFiles;
use percore_handlers::http::{Routed, Router};
use percore_test_kit::http::*;
use percore_test_kit::*;
use support::http::*;

/// What the file outside the root holds: no response may carry it.
const SECRET: &[u8] = b"TOP-SECRET-BYTES";

/// A temporary tree: `base/root` served, `base/secret` beside it.
struct Tree(PathBuf);

impl Tree {
    fn new(name: &str) -> Tree {
        let base =
            std::env::temp_dir().join(format!("percore-files-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("root");
        std::fs::create_dir_all(root.join("a/sub")).expect("create the tree");
        std::fs::write(base.join("secret"), SECRET).expect("secret");
        std::fs::write(root.join("hello.txt"), b"hello, world\n").expect("file");
        std::fs::write(root.join("a/index.html"), b"<p>index</p>\n").expect("index");
        for ext in [
            "html", "css", "js", "json", "png", "jpg", "gif", "svg", "wasm", "pdf", "bin",
        ] {
            std::fs::write(root.join(format!("f.{ext}")), ext).expect("typed file");
        }
        let big: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
        std::fs::write(root.join("big.bin"), big).expect("big file");
        std::os::unix::fs::symlink(base.join("secret"), root.join("leak")).expect("link out");
        std::os::unix::fs::symlink(&base, root.join("up")).expect("link to the parent");
        std::os::unix::fs::symlink("hello.txt", root.join("alias.txt")).expect("link in");
        Tree(base)
    }

    fn root(&self) -> PathBuf {
        self.0.join("root")
    }

    fn serve(&self, backend: Backend) -> TestServer {
        serve(backend, StaticFiles::new(self.root()).expect("a root"))
    }

    /// The fds this process holds open on files of the tree.
    fn open_fds(&self) -> usize {
        let base = self.0.display().to_string();
        fd_table().iter().filter(|fd| fd.contains(&base)).count()
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn serve(backend: Backend, files: StaticFiles) -> TestServer {
    TestServer::start(backend, Config::default(), move || files.clone())
}

/// A period no test outlasts: entries never expire while it runs.
const HOUR: Duration = Duration::from_secs(3600);

fn request(method: &str, path: &str, extra: &str) -> Vec<u8> {
    format!("{method} {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n").into_bytes()
}

/// Sends one request on a new connection and reads whatever comes back
/// until the server closes or a minute passes.
fn raw(addr: std::net::SocketAddr, req: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    s.write_all(req).expect("send");
    s.write_all(b"GET /hello.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .ok();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

async fn assets(
    files: &StaticFiles,
    req: &mut Routed<'_, '_>,
    res: &mut Response<'_>,
) -> std::io::Result<()> {
    let rest = req.param_raw("rest").unwrap_or_default();
    files.serve(req, &format!("/{rest}"), res).await
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

backend_tests! {
    /// Every trick to leave the root gets no byte from outside it.
    fn no_way_out_of_the_root(backend) {
        let tree = Tree::new(&format!("out-{backend:?}"));
        let server = tree.serve(backend);
        for path in [
            "/../secret",
            "/%2e%2e/secret",
            "/%2E%2E/secret",
            "/a/..%2f..%2fsecret",
            "/a/%2e%2e%2f%2e%2e%2fsecret",
            "/%00",
            "/hello.txt%00",
            "/..\\secret",
            "/..%5csecret",
            "/leak",
            "/up/secret",
            "/a/../../secret",
            "/./../secret",
        ] {
            let out = raw(server.addr, &request("GET", path, ""));
            assert!(!contains(&out, SECRET), "{path} leaked: {}", String::from_utf8_lossy(&out));
            let status = &out.get(9..12).unwrap_or_default();
            assert!(
                matches!(*status, b"404" | b"403" | b"400"),
                "{path}: {}",
                String::from_utf8_lossy(&out)
            );
        }
        // A link that stays inside is followed.
        let r = one(server.addr, &get("/alias.txt"));
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello, world\n"[..]));
    }

    /// Content types by extension, `Content-Length`, validators.
    fn content_types_and_headers(backend) {
        let tree = Tree::new(&format!("types-{backend:?}"));
        let server = tree.serve(backend);
        let mut c = Client::connect(server.addr);
        for (ext, ty) in [
            ("html", "text/html; charset=utf-8"),
            ("css", "text/css; charset=utf-8"),
            ("js", "text/javascript; charset=utf-8"),
            ("json", "application/json"),
            ("png", "image/png"),
            ("jpg", "image/jpeg"),
            ("gif", "image/gif"),
            ("svg", "image/svg+xml"),
            ("wasm", "application/wasm"),
            ("pdf", "application/pdf"),
            ("bin", "application/octet-stream"),
        ] {
            let r = c.roundtrip(&get(&format!("/f.{ext}")));
            assert_eq!(r.status, 200, "{ext}");
            assert_eq!(r.header("content-type"), Some(ty), "{ext}");
            assert_eq!(r.body, ext.as_bytes());
        }
        let r = c.roundtrip(&get("/hello.txt"));
        assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
        assert_eq!(r.header("content-length"), Some("13"));
        assert!(r.header("etag").is_some_and(|t| t.starts_with('"')));
        assert!(r.header("last-modified").is_some_and(|d| d.ends_with(" GMT")));
        assert_eq!(c.roundtrip(&get("/missing.txt")).status, 404);
    }

    /// 304 by tag and by date; `If-None-Match` wins over the date.
    fn not_modified_by_tag_and_by_date(backend) {
        let tree = Tree::new(&format!("cond-{backend:?}"));
        let server = tree.serve(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/hello.txt"));
        let (tag, date) = (r.header("etag").unwrap().to_owned(), r.header("last-modified").unwrap().to_owned());
        let r = c.roundtrip(&request("GET", "/hello.txt", &format!("If-None-Match: {tag}\r\n")));
        assert_eq!((r.status, r.body.len()), (304, 0));
        assert_eq!(r.header("etag"), Some(tag.as_str()));
        let r = c.roundtrip(&request("GET", "/hello.txt", &format!("If-None-Match: \"x\", W/{tag}\r\n")));
        assert_eq!(r.status, 304);
        let r = c.roundtrip(&request("GET", "/hello.txt", &format!("If-Modified-Since: {date}\r\n")));
        assert_eq!(r.status, 304);
        let old = "If-Modified-Since: Thu, 01 Jan 1970 00:00:00 GMT\r\n";
        assert_eq!(c.roundtrip(&request("GET", "/hello.txt", old)).status, 200);
        let both = format!("If-None-Match: \"other\"\r\nIf-Modified-Since: {date}\r\n");
        let r = c.roundtrip(&request("GET", "/hello.txt", &both));
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello, world\n"[..]));
    }

    /// One range: 206 with `Content-Range`; outside: 416; several: 200.
    fn ranges(backend) {
        let tree = Tree::new(&format!("range-{backend:?}"));
        let server = tree.serve(backend);
        let mut c = Client::connect(server.addr);
        let range = |c: &mut Client, r: &str| c.roundtrip(&request("GET", "/hello.txt", &format!("Range: {r}\r\n")));
        let r = range(&mut c, "bytes=0-4");
        assert_eq!((r.status, r.body.as_slice()), (206, &b"hello"[..]));
        assert_eq!(r.header("content-range"), Some("bytes 0-4/13"));
        let r = range(&mut c, "bytes=7-");
        assert_eq!((r.status, r.body.as_slice()), (206, &b"world\n"[..]));
        let r = range(&mut c, "bytes=-6");
        assert_eq!((r.status, r.body.as_slice()), (206, &b"world\n"[..]));
        let r = range(&mut c, "bytes=13-");
        assert_eq!(r.status, 416);
        assert_eq!(r.header("content-range"), Some("bytes */13"));
        let r = range(&mut c, "bytes=0-1,3-4");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello, world\n"[..]));
        let r = c.roundtrip(&request("GET", "/hello.txt", "Range: bytes=0-4\r\nIf-Range: \"stale\"\r\n"));
        assert_eq!(r.status, 200);
        // A range of the large file crosses pieces.
        let r = c.roundtrip(&request("GET", "/big.bin", "Range: bytes=65530-200000\r\n"));
        assert_eq!(r.status, 206);
        let want: Vec<u8> = (65530..=200000u32).map(|i| (i % 251) as u8).collect();
        assert!(r.body == want, "range of the large file differs");
    }

    /// `HEAD` has the headers and no body; other methods get 405.
    fn head_and_other_methods(backend) {
        let tree = Tree::new(&format!("head-{backend:?}"));
        let server = tree.serve(backend);
        let mut c = Client::connect(server.addr);
        let r = c.send(&request("HEAD", "/big.bin", "")).response_to(true);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), Some("1048576"));
        assert!(r.header("etag").is_some());
        // Nothing followed the head: the next answer comes right after.
        let r = c.roundtrip(&get("/hello.txt"));
        assert_eq!(r.body, b"hello, world\n");
        let r = c.roundtrip(&post("/hello.txt", "text/plain", b"x"));
        assert_eq!(r.status, 405);
        assert_eq!(r.header("allow"), Some("GET, HEAD"));
    }

    /// A directory: index with a slash, 301 without, 404 without index.
    fn directories(backend) {
        let tree = Tree::new(&format!("dir-{backend:?}"));
        let server = tree.serve(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/a/"));
        assert_eq!((r.status, r.body.as_slice()), (200, &b"<p>index</p>\n"[..]));
        let r = c.roundtrip(&get("/a"));
        assert_eq!((r.status, r.header("location")), (301, Some("/a/")));
        // Never `//a/`: a browser would take `a` for a host.
        let r = c.roundtrip(&get("//a"));
        assert_eq!((r.status, r.header("location")), (301, Some("/a/")));
        let r = c.roundtrip(&get("///a?x=1"));
        assert_eq!((r.status, r.header("location")), (301, Some("/a/?x=1")));
        assert_eq!(c.roundtrip(&get("/a/sub/")).status, 404);
        assert_eq!(c.roundtrip(&get("/")).status, 404);
    }

    /// A file named with a trailing slash is not served, as on nginx:
    /// the slash says "a directory". Asked before and after the file is
    /// in the cache.
    fn a_file_with_a_trailing_slash_is_404(backend) {
        let tree = Tree::new(&format!("slash-{backend:?}"));
        let server = tree.serve(backend);
        let mut c = Client::connect(server.addr);
        for path in ["/hello.txt/", "/a/index.html/", "/hello.txt//"] {
            assert_eq!(c.roundtrip(&get(path)).status, 404, "{path}");
        }
        assert_eq!(c.roundtrip(&get("/hello.txt")).status, 200);
        assert_eq!(c.roundtrip(&get("/hello.txt/")).status, 404);
    }

    /// A cached file deleted, or replaced by rename, and never asked for
    /// again: its descriptor is closed soon all the same (the disk space
    /// is freed), and the next request gets a 404, or the new file.
    fn a_deleted_file_is_closed_unasked(backend) {
        let tree = Tree::new(&format!("deleted-{backend:?}"));
        // The default cache: the sweep must come with it.
        let server = tree.serve(backend);
        let mut c = Client::connect(server.addr);
        assert_eq!(c.roundtrip(&get("/hello.txt")).status, 200);
        assert_eq!(c.roundtrip(&get("/f.css")).body, b"css");
        drop(c);
        assert_eq!(tree.open_fds(), 2, "{:?}", fd_table());
        std::fs::remove_file(tree.root().join("hello.txt")).unwrap();
        let fresh = tree.root().join("f.new");
        std::fs::write(&fresh, b"new css").unwrap();
        std::fs::rename(&fresh, tree.root().join("f.css")).unwrap();
        // A hang detector, not a measure: the sweep runs every second.
        let started = std::time::Instant::now();
        while tree.open_fds() > 0 {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "deleted files still open: {:?}",
                fd_table()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut c = Client::connect(server.addr);
        assert_eq!(c.roundtrip(&get("/hello.txt")).status, 404);
        assert_eq!(c.roundtrip(&get("/f.css")).body, b"new css");
    }

    /// 1 MiB, streamed in pieces, byte for byte.
    fn a_large_file_byte_for_byte(backend) {
        let tree = Tree::new(&format!("big-{backend:?}"));
        let server = tree.serve(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/big.bin"));
        assert_eq!(r.status, 200);
        assert!(r.body == std::fs::read(tree.root().join("big.bin")).unwrap(), "body differs");
        assert_eq!(c.roundtrip(&get("/hello.txt")).status, 200);
    }

    /// A file cut short while it is sent ends the response short and
    /// closes the connection: no hang, no panic.
    fn a_file_truncated_while_sent(backend) {
        let tree = Tree::new(&format!("trunc-{backend:?}"));
        let path = tree.root().join("huge.bin");
        // Larger than what loopback socket buffers hold, so that the
        // server is still reading when the file is cut.
        let len = 64u64 << 20;
        std::fs::File::create(&path).unwrap().set_len(len).unwrap();
        let server = tree.serve(backend);
        let mut s = TcpStream::connect(server.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s.write_all(&get("/huge.bin")).unwrap();
        let mut first = [0; 4096];
        let n = s.read(&mut first).expect("the head");
        assert!(first[..n].starts_with(b"HTTP/1.1 200"));
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(1000).unwrap();
        let mut rest = Vec::new();
        let started = std::time::Instant::now();
        let _ = s.read_to_end(&mut rest);
        assert!(started.elapsed() < Duration::from_secs(60), "hung");
        assert!(((n + rest.len()) as u64) < len, "the whole length was sent");
        assert_eq!(server.stats().panics, 0);
        // The server goes on serving.
        assert_eq!(one(server.addr, &get("/hello.txt")).status, 200);
    }

    /// From a router route: the rest of the path names the file, and the
    /// same refusals hold.
    fn from_a_router_route(backend) {
        let tree = Tree::new(&format!("router-{backend:?}"));
        let files = StaticFiles::new(tree.root()).expect("a root");
        let server = TestServer::start(backend, Config::default(), move || {
            Router::new(files.clone()).get("/static/{*rest}", assets).build().expect("routes")
        });
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/static/hello.txt"));
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello, world\n"[..]));
        let r = c.roundtrip(&get("/static/a"));
        assert_eq!((r.status, r.header("location")), (301, Some("/static/a/")));
        for path in ["/static/../secret", "/static/%2e%2e/secret", "/static/leak"] {
            let out = raw(server.addr, &request("GET", path, ""));
            assert!(!contains(&out, SECRET), "{path} leaked");
        }
    }

    /// nginx serving the same directory answers the same statuses and
    /// bodies (error bodies are each server's own page, so only their
    /// statuses are compared).
    fn the_same_answers_as_nginx(backend) {
        let tree = Tree::new(&format!("nginx-{backend:?}"));
        let root = tree.root();
        let Some(nginx) = Nginx::start(|_| format!("  root {};\n", root.display())) else {
            return;
        };
        let server = tree.serve(backend);
        let cases: [(&str, &str, &str); 11] = [
            ("GET", "/hello.txt", ""),
            ("GET", "/hello.txt/", ""),
            ("GET", "/a/index.html/", ""),
            ("GET", "/big.bin", ""),
            ("GET", "/a/", ""),
            ("GET", "/missing.txt", ""),
            ("GET", "/hello.txt", "Range: bytes=2-5\r\n"),
            ("GET", "/hello.txt", "Range: bytes=-4\r\n"),
            ("GET", "/big.bin", "Range: bytes=100000-\r\n"),
            ("GET", "/hello.txt", "Range: bytes=500-\r\n"),
            ("HEAD", "/hello.txt", ""),
        ];
        for (method, path, extra) in cases {
            let req = request(method, path, extra);
            let ask = |addr| Client::connect(addr).send(&req).response_to(method == "HEAD");
            let (ours, theirs) = (ask(server.addr), ask(nginx.addr));
            assert_eq!(ours.status, theirs.status, "{method} {path} {extra}");
            if ours.status < 300 {
                assert!(ours.body == theirs.body, "{method} {path} {extra}: bodies differ");
                assert_eq!(ours.header("content-length"), theirs.header("content-length"));
                assert_eq!(ours.header("content-range"), theirs.header("content-range"));
            }
        }
    }

    /// With the cache on, a file asked for again and again is opened
    /// once, and served from the open file even once replaced: the
    /// entry's period has not run out.
    fn the_cache_opens_a_file_once(backend) {
        let tree = Tree::new(&format!("once-{backend:?}"));
        let files = StaticFiles::new(tree.root()).expect("a root").cache(16, HOUR);
        let server = serve(backend, files.clone());
        let mut c = Client::connect(server.addr);
        for _ in 0..5 {
            let r = c.roundtrip(&get("/hello.txt"));
            assert_eq!((r.status, r.body.as_slice()), (200, &b"hello, world\n"[..]));
        }
        let r = c.send(&request("HEAD", "/hello.txt", "")).response_to(true);
        assert_eq!(r.status, 200);
        assert_eq!(files.cache_stats().opened, 1);
        assert_eq!(files.cache_stats().held, 1);
        assert_eq!(tree.open_fds(), 1, "{:?}", fd_table());
        // Replaced by rename: the cached file is still the one served.
        let fresh = tree.root().join("hello.new");
        std::fs::write(&fresh, b"replaced\n").unwrap();
        std::fs::rename(&fresh, tree.root().join("hello.txt")).unwrap();
        assert_eq!(c.roundtrip(&get("/hello.txt")).body, b"hello, world\n");
        assert_eq!(files.cache_stats().opened, 1);
        // Misses are not cached: each 404 looks again.
        assert_eq!(c.roundtrip(&get("/later.txt")).status, 404);
        std::fs::write(tree.root().join("later.txt"), b"here\n").unwrap();
        assert_eq!(c.roundtrip(&get("/later.txt")).body, b"here\n");
        drop(c);
        drop(server);
        // The core's thread is gone, and its table with it.
        assert_eq!(files.cache_stats().held, 0);
        assert_eq!(tree.open_fds(), 0, "{:?}", fd_table());
    }

    /// With a period of zero there is no cache: a file replaced by
    /// rename is served with its new bytes at once.
    fn no_cache_serves_a_replaced_file_at_once(backend) {
        let tree = Tree::new(&format!("nocache-{backend:?}"));
        let files = StaticFiles::new(tree.root()).expect("a root").cache(16, Duration::ZERO);
        let server = serve(backend, files.clone());
        let mut c = Client::connect(server.addr);
        assert_eq!(c.roundtrip(&get("/hello.txt")).body, b"hello, world\n");
        let fresh = tree.root().join("hello.new");
        std::fs::write(&fresh, b"replaced\n").unwrap();
        std::fs::rename(&fresh, tree.root().join("hello.txt")).unwrap();
        let r = c.roundtrip(&get("/hello.txt"));
        assert_eq!((r.status, r.body.as_slice()), (200, &b"replaced\n"[..]));
        assert_eq!(files.cache_stats(), Default::default());
        assert_eq!(tree.open_fds(), 0, "{:?}", fd_table());
    }

    /// More distinct files than the capacity: the cache holds no more
    /// than its capacity open, and serves every one right.
    fn the_cache_holds_no_more_than_its_capacity(backend) {
        let tree = Tree::new(&format!("cap-{backend:?}"));
        for i in 0..20 {
            std::fs::write(tree.root().join(format!("n{i}.txt")), format!("file {i}\n")).unwrap();
        }
        let files = StaticFiles::new(tree.root()).expect("a root").cache(4, HOUR);
        let server = serve(backend, files.clone());
        let mut c = Client::connect(server.addr);
        for round in 0..2 {
            for i in 0..20 {
                let r = c.roundtrip(&get(&format!("/n{i}.txt")));
                assert_eq!(r.body, format!("file {i}\n").as_bytes(), "round {round}");
                let stats = files.cache_stats();
                assert!(stats.held <= 4, "{stats:?}");
                assert!(tree.open_fds() <= 4, "{:?}", fd_table());
            }
        }
        // Twenty names in turn through four places: every one missed.
        assert_eq!(files.cache_stats().opened, 40);
        // A file hit often stays while the others pass through.
        for i in 0..20 {
            assert_eq!(c.roundtrip(&get("/hello.txt")).status, 200);
            assert_eq!(c.roundtrip(&get(&format!("/n{i}.txt"))).status, 200);
        }
        assert_eq!(files.cache_stats().opened, 40 + 1 + 20);
    }

    /// A file cut short after the cache opened it: the length announced
    /// is the cached one, and the response ends short as it does when the
    /// file shrinks while it is sent.
    fn a_cached_file_truncated(backend) {
        let tree = Tree::new(&format!("cached-trunc-{backend:?}"));
        let files = StaticFiles::new(tree.root()).expect("a root").cache(16, HOUR);
        let server = serve(backend, files.clone());
        let r = one(server.addr, &get("/big.bin"));
        assert_eq!((r.status, r.body.len()), (200, 1 << 20));
        std::fs::OpenOptions::new().write(true).open(tree.root().join("big.bin")).unwrap().set_len(1000).unwrap();
        let out = raw(server.addr, &get("/big.bin"));
        assert!(out.starts_with(b"HTTP/1.1 200"), "{:?}", String::from_utf8_lossy(&out[..out.len().min(200)]));
        assert!(out.len() < 1 << 20, "the whole length was sent");
        assert_eq!(server.stats().panics, 0);
        assert_eq!(files.cache_stats().opened, 1);
        assert_eq!(one(server.addr, &get("/hello.txt")).status, 200);
    }
}
