//! Zero heap allocations per request in the fan-out proxy's steady state,
//! on both backends.
//!
//! One proxy (width 4, policy `all`) in front of three in-process
//! `HttpEcho` upstreams, all on one-core test servers. A counting global
//! allocator counts only on the proxy's core thread (marked by the proxy's
//! factory, which runs there; the upstreams' threads are not marked) and
//! only inside the measured window, after a warm-up that fills the
//! per-core connection pools, buffer free lists and arenas. The window
//! covers 6,000 keep-alive GETs, each fanned out to four sub-requests
//! round-robin over the three upstreams (so one upstream takes two of a
//! request's branches, and which one rotates from request to request).
//!
//! Allocations this test has caught, each a first push into a `Vec` with
//! no capacity yet, long after warm-up: a never-used timing-wheel slot,
//! reached from the proxy's per-request deadline (the slots now get their
//! capacity in `Wheel::new`); and the io_uring driver's stack of spare
//! completion queues, first pushed to when a multishot receive ended at its
//! byte limit, after about 64 KiB on one connection (now reserved in
//! `Driver::new`).
//!
//! On failure the sizes of the first allocations are printed; with
//! `PERCORE_ALLOC_TRAP=1` (and `--nocapture`) the first one prints its
//! backtrace and aborts.

#[macro_use]
#[path = "support/http.rs"]
mod common;
#[path = "support/fanout.rs"]
mod fake;

#[path = "../../framework/tests/support/counting_alloc.rs"]
mod counting;

use common::*;
use counting::*;
use fake::entries;
use percore_handlers::proxy::{Config as ProxyConfig, FanOut};
use std::sync::atomic::Ordering;

/// Sub-requests per request.
const WIDTH: usize = 4;
/// Requests before counting starts.
const WARM_UP: usize = 500;
/// Requests counted.
const MEASURED: usize = 6_000;

/// Keep-alive without a request cap (the default closes a connection after
/// 1000 requests, which would make the proxy reconnect to its upstreams).
fn uncapped() -> Config {
    let mut c = Config::default();
    c.max_requests = u32::MAX;
    c
}

/// One GET through the proxy: 200 with one entry per branch, each the
/// upstream's JSON.
fn request(c: &mut Client) {
    let r = c.roundtrip(&get("/search?q=alloc"));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let e = entries(&r.body);
    assert_eq!(e.len(), WIDTH);
    assert!(e
        .iter()
        .all(|(_, status, body)| *status == 200 && body.as_bytes() == HELLO));
}

http_tests! {
    /// 6,000 keep-alive requests at width 4 after warm-up: zero
    /// allocations on the proxy's core thread.
    fn zero_allocations_per_request(backend) {
        let _serial = serial();
        TRAP.store(std::env::var_os("PERCORE_ALLOC_TRAP").is_some(), Ordering::Relaxed);
        let upstreams: Vec<TestServer> =
            (0..3).map(|_| TestServer::echo_with(backend, uncapped())).collect();
        let addrs: Vec<_> = upstreams.iter().map(|s| s.addr).collect();
        let mut config = ProxyConfig::new(addrs);
        config.width = WIDTH;
        config.validate().expect("valid proxy config");
        let proxy = TestServer::start(backend, uncapped(), move || {
            TRACKED.with(|t| t.set(true));
            FanOut::new(config.clone()).expect("validated")
        });
        let mut c = Client::connect(proxy.addr);
        for _ in 0..WARM_UP {
            request(&mut c);
        }

        ALLOCS.store(0, Ordering::Relaxed);
        for slot in &SIZES {
            slot.store(0, Ordering::Relaxed);
        }
        COUNTING.store(true, Ordering::SeqCst);
        for _ in 0..MEASURED {
            request(&mut c);
        }
        COUNTING.store(false, Ordering::SeqCst);

        let allocs = ALLOCS.load(Ordering::Relaxed);
        let sizes: Vec<usize> = SIZES.iter().map(|s| s.load(Ordering::Relaxed)).collect();
        println!(
            "{backend}: {allocs} allocations on the proxy's core over {MEASURED} requests \
             ({} sub-requests; first sizes {sizes:?})",
            MEASURED * WIDTH
        );
        assert_eq!(
            allocs, 0,
            "allocations on the proxy's core thread over {MEASURED} requests; first sizes {sizes:?}"
        );
        drop(c);
        drop(proxy);
        drop(upstreams);
    }
}
