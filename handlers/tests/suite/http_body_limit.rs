//! `Service::body_limit`: a route's own limit on request bodies, above or
//! below the configured one, on both backends. A `Content-Length` over it
//! is answered 413 before the service runs; a chunked body that grows past
//! it fails its read with 413; a request without a body never asks.

use crate::support;

use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use percore_handlers::http::RequestHead;
use percore_test_kit::http::*;
use percore_test_kit::*;
use support::http::*;

/// The configured limit of the test server.
const CONFIGURED: u64 = 1024;
/// The limit of `/upload`, above the configured one.
const UPLOAD: u64 = 64 * 1024;
/// The limit of `/tiny`, below it.
const TINY: u64 = 10;

/// Answers how many body bytes it read, streaming them; its limits
/// depend on the path. Counts the calls that reached it and the limits
/// asked for.
struct Routes {
    called: Arc<AtomicU32>,
    asked: Cell<u32>,
    asked_total: Arc<AtomicU32>,
}

impl Service for Routes {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        self.called.fetch_add(1, Ordering::SeqCst);
        let mut read = 0usize;
        while let Some(piece) = req.chunk().await? {
            read += piece.len();
        }
        res.write(read.to_string().as_bytes());
        Ok(())
    }

    fn body_limit(&self, head: &RequestHead<'_, '_>, configured: u64) -> u64 {
        assert_eq!(configured, CONFIGURED);
        self.asked.set(self.asked.get() + 1);
        self.asked_total.store(self.asked.get(), Ordering::SeqCst);
        match head.path() {
            p if p.starts_with("/upload") => UPLOAD,
            "/tiny" => TINY,
            _ => configured,
        }
    }
}

struct Counts {
    called: Arc<AtomicU32>,
    asked: Arc<AtomicU32>,
}

fn server(backend: Backend) -> (TestServer, Counts) {
    let mut config = Config::default();
    config.limits.max_body = CONFIGURED;
    let called = Arc::new(AtomicU32::new(0));
    let asked = Arc::new(AtomicU32::new(0));
    let (c, a) = (called.clone(), asked.clone());
    let server = TestServer::start(backend, config, move || Routes {
        called: c.clone(),
        asked: Cell::new(0),
        asked_total: a.clone(),
    });
    (server, Counts { called, asked })
}

fn posted(path: &str, len: u64) -> Vec<u8> {
    post(path, "application/octet-stream", &vec![b'x'; len as usize])
}

fn chunked(path: &str, len: usize) -> Vec<u8> {
    let mut req = format!("POST {path} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        .into_bytes();
    // Pieces of 500 bytes, so the limit is crossed part way.
    let mut left = len;
    while left > 0 {
        let n = left.min(500);
        req.extend_from_slice(format!("{n:x}\r\n").as_bytes());
        req.extend(std::iter::repeat_n(b'y', n));
        req.extend_from_slice(b"\r\n");
        left -= n;
    }
    req.extend_from_slice(b"0\r\n\r\n");
    req
}

backend_tests! {
    parallel;
    /// `Content-Length` against each route's limit: the configured one,
    /// one above it and one below it, each at and just past the limit,
    /// the route told by the head's path (query and absolute form
    /// stripped). Refused bodies never reach the service.
    fn content_length_follows_the_route(backend) {
        let (server, counts) = server(backend);
        let routes = [
            ("/small", CONFIGURED),
            ("/upload/a?name=x", UPLOAD),
            ("http://t/tiny?x=1", TINY),
        ];
        for (path, limit) in routes {
            let r = one(server.addr, &posted(path, limit));
            assert_eq!((r.status, r.body), (200, limit.to_string().into_bytes()), "{path} at its limit");
            expect_error(server.addr, &posted(path, limit + 1), 413);
        }
        assert_eq!(counts.called.load(Ordering::SeqCst), 3, "only the bodies within limits were served");
        assert_eq!(counts.asked.load(Ordering::SeqCst), 6);
    }

    /// A chunked body is held to its route's limit as it arrives.
    fn chunked_bodies_follow_the_route(backend) {
        let (server, _) = server(backend);
        let r = one(server.addr, &chunked("/upload/b", 5000));
        assert_eq!((r.status, r.body), (200, b"5000".to_vec()));
        expect_error(server.addr, &chunked("/small", 5000), 413);
        expect_error(server.addr, &chunked("/upload/c", UPLOAD as usize + 500), 413);
    }

    /// Requests without a body (or with an empty one) do not ask.
    fn bodiless_requests_do_not_ask(backend) {
        let (server, counts) = server(backend);
        let mut c = Client::connect(server.addr);
        assert_eq!(c.roundtrip(&get("/upload")).body, b"0");
        assert_eq!(c.roundtrip(&posted("/tiny", 0)).body, b"0");
        assert_eq!(counts.asked.load(Ordering::SeqCst), 0);
        assert_eq!(c.roundtrip(&posted("/tiny", 3)).body, b"3");
        assert_eq!(counts.asked.load(Ordering::SeqCst), 1);
    }
}
