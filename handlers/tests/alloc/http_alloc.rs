//! Zero heap allocations per request in steady state, on both backends.
//!
//! A counting global allocator counts only on the server's core thread
//! (marked by the handler factory, which runs there) and only inside the
//! measured window, after a warm-up that lets every per-connection buffer
//! reach its working size. The window covers over 10,000 keep-alive
//! requests of every shape the echo serves: GET, HEAD, POST with small and
//! multi-read bodies, chunked POST, 405, and pipelined batches; and a
//! service's 4xx, also when it is answered before its body's rest came;
//! and through the router, a request with two typed path parameters and
//! the router's own 404, 405 and `HEAD`.
//!
//! On failure the sizes of the first allocations are printed; set
//! `PERCORE_ALLOC_TRAP=1` to abort at the first one and read its backtrace
//! in a debugger.

use crate::support;

use std::io::Write as _;

use percore_handlers::http::{HttpError, Routed, Router};
use percore_test_kit::alloc::*;
use percore_test_kit::http::*;
use percore_test_kit::*;
use std::sync::atomic::{AtomicU64, Ordering};
use support::http::*;

/// Allocations made by [`Refuser`] itself, for the error it returns.
static OWN_ALLOCS: AtomicU64 = AtomicU64::new(0);

/// Refuses every request with a 404 `HttpError`, counting the
/// allocations of the `io::Error` it makes (a box, the layer's to drop).
struct Refuser;

impl Service for Refuser {
    async fn call(&self, _: &mut Request<'_>, _: &mut Response<'_>) -> std::io::Result<()> {
        let before = ALLOCS.load(Ordering::Relaxed);
        let e = std::io::Error::from(HttpError::new(404, "no such thing"));
        OWN_ALLOCS.fetch_add(ALLOCS.load(Ordering::Relaxed) - before, Ordering::Relaxed);
        Err(e)
    }
}

/// One round of every request shape; returns how many requests it made.
fn round(c: &mut Client, big: &[u8], batch: &[u8]) -> usize {
    let mut n = 0;
    for _ in 0..20 {
        assert_eq!(c.roundtrip(&get("/")).body, HELLO);
        n += 1;
    }
    c.send(b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response_to(true).status, 200);
    for _ in 0..10 {
        assert_eq!(
            c.roundtrip(&post(
                "/",
                "text/plain",
                b"0123456789abcdef0123456789abcdef"
            ))
            .status,
            200
        );
    }
    let chunked = b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    assert_eq!(c.roundtrip(chunked).body, b"hello world");
    assert_eq!(
        c.roundtrip(b"DELETE / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        405
    );
    assert_eq!(c.roundtrip(&post("/big", "a/b", big)).body.len(), big.len());
    c.send(batch);
    for _ in 0..10 {
        assert_eq!(c.response().status, 200);
    }
    n + 1 + 10 + 1 + 1 + 1 + 10
}

backend_tests! {
    /// Over 10,000 keep-alive requests after warm-up: zero allocations on
    /// the server's core thread.
    fn zero_allocations_per_request(backend) {
        TRAP.store(std::env::var_os("PERCORE_ALLOC_TRAP").is_some(), Ordering::Relaxed);
        let mut config = Config::default();
        config.max_requests = u32::MAX;
        let server = TestServer::start(backend, config, || {
            TRACKED.with(|t| t.set(true));
            HttpEcho
        });
        let big = vec![b'b'; 40 * 1024];
        let batch: Vec<u8> = (0..10).flat_map(|_| get("/p")).collect();
        let mut c = Client::connect(server.addr);
        for _ in 0..100 {
            round(&mut c, &big, &batch);
        }

        ALLOCS.store(0, Ordering::Relaxed);
        COUNTING.store(true, Ordering::SeqCst);
        let mut requests = 0;
        while requests < 10_000 {
            requests += round(&mut c, &big, &batch);
        }
        COUNTING.store(false, Ordering::SeqCst);

        let allocs = ALLOCS.load(Ordering::Relaxed);
        let sizes: Vec<usize> = SIZES.iter().map(|s| s.load(Ordering::Relaxed)).collect();
        println!("{backend}: {allocs} allocations over {requests} requests (first sizes {sizes:?})");
        assert_eq!(allocs, 0, "allocations on the core thread over {requests} requests; first sizes {sizes:?}");
        drop(c);
    }

    /// A routed request with two path parameters, and the router's own
    /// 404, 405 and `HEAD`: nothing allocated, routing included.
    fn a_routed_request_allocates_nothing(backend) {
        let mut config = Config::default();
        config.max_requests = u32::MAX;
        let server = TestServer::start(backend, config, || {
            TRACKED.with(|t| t.set(true));
            Router::new(())
                .get("/users/{id}/posts/{post}", post_of)
                .post("/users/{id}/posts/{post}", post_of)
                .build()
                .expect("routes")
        });
        let mut c = Client::connect(server.addr);
        let routed = |c: &mut Client| {
            assert_eq!(c.roundtrip(&get("/users/7/posts/35")).body, b"42");
            assert_eq!(c.roundtrip(&get("/users/1/posts/x")).status, 400);
            assert_eq!(c.roundtrip(&get("/nowhere")).status, 404);
            assert_eq!(c.roundtrip(b"PUT /users/1/posts/2 HTTP/1.1\r\nHost: t\r\n\r\n").status, 405);
            c.send(b"HEAD /users/1/posts/2 HTTP/1.1\r\nHost: t\r\n\r\n");
            assert_eq!(c.response_to(true).status, 200);
        };
        for _ in 0..100 {
            routed(&mut c);
        }
        ALLOCS.store(0, Ordering::Relaxed);
        COUNTING.store(true, Ordering::SeqCst);
        let mut counted = 0;
        while counted < 2000 {
            assert_eq!(c.roundtrip(&get("/users/7/posts/35")).body, b"42");
            assert_eq!(c.roundtrip(&get("/nowhere")).status, 404);
            counted += 2;
        }
        COUNTING.store(false, Ordering::SeqCst);
        let allocs = ALLOCS.load(Ordering::Relaxed);
        let sizes: Vec<usize> = SIZES.iter().map(|s| s.load(Ordering::Relaxed)).collect();
        println!("{backend}: {allocs} allocations over {counted} routed requests (first sizes {sizes:?})");
        assert_eq!(allocs, 0, "allocations on the core thread; first sizes {sizes:?}");
        drop(c);
    }

    /// A service's 4xx keeps the connection, so a client can make one
    /// after another in steady state: the layer's answer to it allocates
    /// nothing beyond the error the service made.
    fn a_kept_refusal_allocates_nothing_in_the_layer(backend) {
        refusals_allocate_nothing_in_the_layer(backend, "refusals", |c| {
            let r = c.roundtrip(&get("/missing"));
            assert_eq!((r.status, r.closes()), (404, false));
        });
    }

    /// A refusal answered before the rest of its body came (the answer
    /// written while that rest is read and dropped): nothing allocated in
    /// the layer either.
    fn a_refusal_before_the_rest_allocates_nothing_in_the_layer(backend) {
        refusals_allocate_nothing_in_the_layer(backend, "early refusals", |c| {
            c.send(b"POST /missing HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
            let r = c.response();
            assert_eq!((r.status, r.closes()), (404, false));
            c.send(b"defghij");
        });
    }
}

/// Adds the two path parameters, formatted into the reused body.
async fn post_of(_: &(), req: &mut Routed<'_, '_>, res: &mut Response<'_>) -> std::io::Result<()> {
    let id: u32 = req.param("id")?;
    let post: u32 = req.param("post")?;
    write!(res.body_mut(), "{}", id + post)?;
    Ok(())
}

/// 1000 exchanges of `refused` on one connection to a [`Refuser`], after
/// 100 to warm up: the only allocations on the core thread are the
/// service's own errors.
fn refusals_allocate_nothing_in_the_layer(
    backend: Backend,
    what: &str,
    refused: impl Fn(&mut Client),
) {
    let mut config = Config::default();
    config.max_requests = u32::MAX;
    let server = TestServer::start(backend, config, || {
        TRACKED.with(|t| t.set(true));
        Refuser
    });
    let mut c = Client::connect(server.addr);
    for _ in 0..100 {
        refused(&mut c);
    }

    ALLOCS.store(0, Ordering::Relaxed);
    OWN_ALLOCS.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::SeqCst);
    for _ in 0..1000 {
        refused(&mut c);
    }
    COUNTING.store(false, Ordering::SeqCst);

    let (allocs, own) = (
        ALLOCS.load(Ordering::Relaxed),
        OWN_ALLOCS.load(Ordering::Relaxed),
    );
    let sizes: Vec<usize> = SIZES.iter().map(|s| s.load(Ordering::Relaxed)).collect();
    println!("{backend}: {allocs} allocations over 1000 {what}, {own} the service's own (first sizes {sizes:?})");
    assert!(own > 0, "the service's error was not counted");
    assert_eq!(
        allocs - own,
        0,
        "the layer's allocations; first sizes {sizes:?}"
    );
    drop(c);
}
