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
//! A second case does the same under `quorum:2` at width 3, where the
//! branch still running when two have answered is cut off and its
//! response read to the end by the drain, which pools the connection
//! again: cut-off branches allocate nothing either. Its steady state is
//! less sure: all the test servers share the CPUs, so on a busy machine a
//! drain may still be reading when the next request needs its connection
//! (the pool grows by a connect) or when the next cut-off comes (the drain
//! grows by a worker), and a new peak of drains overlapping can come late
//! in any run. So this case counts both, in the proxy's counters, and
//! allows what each one costs at most ([`per_connect`], [`PER_WORKER`]);
//! it keeps its idle connections and workers for the whole run (no idle
//! timeout: neither ages out and comes back, and an idle worker holds no
//! timer). Allocations per cut-off branch would be thousands.
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

use crate::support;

use percore_handlers::proxy::{
    Config as ProxyConfig, FanOut, Policy, ProxyStats, ProxyStatsReader,
};
use percore_test_kit::alloc::*;
use percore_test_kit::http::*;
use percore_test_kit::upstream::entries;
use percore_test_kit::*;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::http::*;

/// Requests before counting starts.
const WARM_UP: usize = 500;
/// The same with cut-off branches, whose drains grow the pools and the
/// drain's workers for longer (see the module docs).
const WARM_UP_CUT_OFF: usize = 3_000;
/// What a connect allocates on the proxy's core: its descriptor's shared
/// state, and on io_uring also the operation's address and its completion;
/// and, when the new connection raises the peak of upstream exchanges at
/// once (a loaded machine reconnects before the old connection is gone),
/// a buffer beyond those already in use (two: written, then grown for the
/// response; seen as 118 then 236 bytes).
fn per_connect(backend: Backend) -> u64 {
    let buffer = 2;
    if backend == Backend::Uring {
        3 + buffer
    } else {
        1 + buffer
    }
}

/// What a new drain worker allocates: its task (three) and its seat; a
/// buffer for the drain it runs beyond those already in use (two: written,
/// then grown for the response); and, as the new peak of drains at once,
/// at most one doubling each of the idle workers' list, the core's waiters
/// for the stop, the buffers' free list and a timer-wheel slot.
const PER_WORKER: u64 = 10;

/// Requests counted.
const MEASURED: usize = 6_000;

/// Keep-alive without a request cap (the default closes a connection after
/// 1000 requests, which would make the proxy reconnect to its upstreams).
fn uncapped() -> Config {
    let mut c = Config::default();
    c.max_requests = u32::MAX;
    c
}

/// One GET through the proxy: 200 with `answers` entries, each the
/// upstream's JSON.
fn request(c: &mut Client, answers: usize) {
    let r = c.roundtrip(&get("/search?q=alloc"));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let e = entries(&r.body);
    assert_eq!(e.len(), answers);
    assert!(e
        .iter()
        .all(|(_, status, body)| *status == 200 && body.as_bytes() == HELLO));
}

backend_tests! {
    /// 6,000 keep-alive requests at width 4 after warm-up: zero
    /// allocations on the proxy's core thread.
    fn zero_allocations_per_request(backend) {
        let (allocs, _) = measure(backend, 4, Policy::All, 4, WARM_UP);
        assert_eq!(allocs, 0, "allocations on the proxy's core thread over {MEASURED} requests");
    }

    /// The same under `quorum:2` at width 3, with branches cut off and
    /// drained.
    fn zero_allocations_per_cut_off_branch(backend) {
        let (allocs, done) = measure(backend, 3, Policy::Quorum(2), 2, WARM_UP_CUT_OFF);
        assert!(done.drained > 0, "no branch was cut off and drained");
        let explained = per_connect(backend) * done.connects + PER_WORKER * done.drain_workers;
        assert!(
            allocs <= explained,
            "{allocs} allocations on the proxy's core thread, {explained} explained by \
             the window's {} connects and {} new drain workers",
            done.connects,
            done.drain_workers
        );
    }
}

/// The allocations on the proxy's core over [`MEASURED`] requests of
/// `width` branches under `policy` (`answers` entries each), after
/// `warm_up`, and how the proxy's counters moved meanwhile; prints them
/// with the first sizes. A policy that cuts branches off keeps idle
/// connections and drain workers for the whole run (see the module docs).
fn measure(
    backend: Backend,
    width: usize,
    policy: Policy,
    answers: usize,
    warm_up: usize,
) -> (u64, ProxyStats) {
    TRAP.store(
        std::env::var_os("PERCORE_ALLOC_TRAP").is_some(),
        Ordering::Relaxed,
    );
    let upstreams: Vec<TestServer> = (0..3)
        .map(|_| TestServer::echo_with(backend, uncapped()))
        .collect();
    let addrs: Vec<_> = upstreams.iter().map(|s| s.addr).collect();
    let mut config = ProxyConfig::new(addrs);
    config.width = width;
    config.policy = policy;
    if policy != Policy::All {
        config.pool.idle_timeout = Duration::MAX;
    }
    config.validate().expect("valid proxy config");
    let reader: Arc<Mutex<Option<ProxyStatsReader>>> = Arc::default();
    let registry = reader.clone();
    let proxy = TestServer::start(backend, uncapped(), move || {
        TRACKED.with(|t| t.set(true));
        let proxy = FanOut::new(config.clone()).expect("validated");
        *registry.lock().unwrap_or_else(|e| e.into_inner()) = Some(proxy.stats_reader());
        proxy
    });
    let stats = || {
        let reader = reader.lock().unwrap_or_else(|e| e.into_inner());
        reader.as_ref().expect("registered at start").snapshot()
    };
    let mut c = Client::connect(proxy.addr);
    for _ in 0..warm_up {
        request(&mut c, answers);
    }
    let warm = stats();

    ALLOCS.store(0, Ordering::Relaxed);
    for slot in &SIZES {
        slot.store(0, Ordering::Relaxed);
    }
    COUNTING.store(true, Ordering::SeqCst);
    for _ in 0..MEASURED {
        request(&mut c, answers);
    }
    COUNTING.store(false, Ordering::SeqCst);
    let done = stats();

    let allocs = ALLOCS.load(Ordering::Relaxed);
    let sizes: Vec<usize> = SIZES.iter().map(|s| s.load(Ordering::Relaxed)).collect();
    let mut window = ProxyStats::default();
    window.connects = done.connects - warm.connects;
    window.cancelled = done.cancelled - warm.cancelled;
    window.drained = done.drained - warm.drained;
    window.drain_workers = done.drain_workers - warm.drain_workers;
    println!(
        "{backend} {policy:?}: {allocs} allocations on the proxy's core over {MEASURED} \
         requests ({} sub-requests; connects={} cancelled={} drained={} drain_workers={}; \
         first sizes {sizes:?})",
        MEASURED * width,
        window.connects,
        window.cancelled,
        window.drained,
        window.drain_workers,
    );
    drop(c);
    drop(proxy);
    drop(upstreams);
    (allocs, window)
}
