//! Draining under `first` and `quorum:K`, on both backends: a branch cut
//! off after its sub-request was sent has its response read to the end
//! and its connection pooled, if, and only if, the response ended cleanly
//! and allows reuse; one that does not end is closed at the request's
//! deadline, and every drain ends when the server stops.
//!
//! The cases count descriptors of the whole process, so they run one at
//! a time.

use crate::support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use percore_handlers::proxy::Policy;
use percore_test_kit::http::*;
use percore_test_kit::log_capture;
use percore_test_kit::upstream::{entries, eventually, Conn, Fake};
use percore_test_kit::*;
use support::fanout::{proxy_counted, proxy_counted_draining};
use support::http::*;

/// The process's open descriptors.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

/// Keep-alive without a request cap, so the upstreams never close.
fn uncapped() -> Config {
    let mut c = Config::default();
    c.max_requests = u32::MAX;
    c
}

/// Requests before counting, and counted (together under the proxy's
/// own 1000 per client connection).
const WARM_UP: usize = 100;
const MEASURED: usize = 800;

/// Three in-process `HttpEcho` upstreams behind a proxy of width 3 under
/// `policy`: the connects stay bounded while requests go on, as the
/// cut-off branches' connections come back through the drain. (Before
/// draining, each cut-off closed its connection: about one new connection
/// per request here.)
///
/// The bound is what the drain explains, not a count that holds only on
/// an idle machine: no connection is closed here (none ages out, and
/// `drain_closed` stays 0), and a request's branches go one to each
/// upstream, so an upstream is connected to anew only when every
/// connection it has is draining; it has at most one more connection than
/// the most drains ever at once, which is the count of drain workers (none
/// retires). On a busy machine drains overlap more, and both grow.
fn connects_stay_bounded(backend: Backend, policy: Policy, answers: usize) {
    let upstreams: Vec<TestServer> = (0..3)
        .map(|_| TestServer::echo_with(backend, uncapped()))
        .collect();
    let addrs: Vec<SocketAddr> = upstreams.iter().map(|s| s.addr).collect();
    let (px, counters) = proxy_counted(backend, &addrs, |c| {
        c.width = 3;
        c.policy = policy;
        c.pool.idle_timeout = Duration::MAX;
    });
    let mut c = Client::connect(px.addr);
    let mut request = || {
        let r = c.roundtrip(&get("/drain"));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let e = entries(&r.body);
        assert_eq!(e.len(), answers, "{e:?}");
        assert!(e.iter().all(|(_, s, b)| *s == 200 && b.as_bytes() == HELLO));
    };
    for _ in 0..WARM_UP {
        request();
    }
    let before = counters.get();
    for _ in 0..MEASURED {
        request();
    }
    let after = counters.get();
    let connects = after.connects - before.connects;
    let reuses = after.reuses - before.reuses;
    let cut_off = after.cancelled - before.cancelled;
    let drained = after.drained - before.drained;
    println!(
        "{backend} {policy:?}: over {MEASURED} requests {connects} connects, {reuses} reuses, \
         {cut_off} cut off, {drained} drained; total {after}"
    );
    assert!(cut_off > 0, "some branches were cut off: {after}");
    assert!(drained > 0, "cut-off connections came back: {after}");
    assert!(
        after.connects <= 3 * (1 + after.drain_workers),
        "{connects} connects over {MEASURED} requests: {after}"
    );
    assert_eq!(
        after.drain_closed, 0,
        "every echo answer is reusable: {after}"
    );
    assert_eq!(after.failed, 0, "{after}");
    drop(c);
    drop(px);
    drop(upstreams);
}

/// Polls `ready` every millisecond until it holds, for at most a minute
/// (a hang guard: the script then goes on, and the test fails on what
/// follows). The fakes order their answers by the test's progress this
/// way, not by delays a loaded machine could stretch.
fn wait_for(ready: impl Fn() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(60);
    while !ready() && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Requests `fake` has read so far.
fn seen(fake: &Fake) -> impl Fn() -> usize + Send + Sync + 'static {
    let seen = fake.seen.clone();
    move || {
        seen.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }
}

/// An upstream answering "ok" to its `k`-th request (from 0) once the
/// `other` upstream has read `k + 1` requests: the other branch of the
/// same client request has connected and sent its sub-request by then,
/// so it is cut off while reading. (Cut off while still connecting, as an
/// answer from a pooled connection at once can make it, a branch is
/// closed at once, not drained.)
fn ok_after_the_other(other: &Fake) -> Fake {
    let other = seen(other);
    let count = Arc::new(AtomicUsize::new(0));
    Fake::start(move |mut c: Conn| {
        while c.read_request().is_some() {
            let k = count.fetch_add(1, Ordering::SeqCst);
            wait_for(|| other() > k);
            c.ok(b"ok");
        }
    })
}

/// How many answers the client has: the test counts them, and the fakes
/// that must lose a race wait for them.
#[derive(Clone, Default)]
struct Answered(Arc<AtomicUsize>);

impl Answered {
    fn one_more(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    /// Waits (see [`wait_for`]) until the client has `n` answers.
    fn wait(&self, n: usize) {
        wait_for(|| self.0.load(Ordering::SeqCst) >= n);
    }
}

/// The path of a request's bytes.
fn path(req: &[u8]) -> String {
    let line = String::from_utf8_lossy(req);
    line.split(' ').nth(1).unwrap_or_default().to_owned()
}

/// The body of the first entry, and which upstream gave it.
fn only_entry(r: &Resp) -> (String, String) {
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let e = entries(&r.body);
    assert_eq!(e.len(), 1, "{e:?}");
    (e[0].0.clone(), e[0].2.clone())
}

/// An upstream that sends the head and half the body at once and the rest
/// only once the client has its answer is cut off under `first` by one
/// that answers once that half is out, with the first half (as a rule)
/// already read. Its connection is pooled only once the rest came, and
/// the next request on it gets its own answer, byte for byte (bytes of
/// the first response left on it would be read as the start of the
/// second). That next request is answered by it, the other upstream
/// waiting for the client to have the answer.
fn two_parts(backend: Backend) {
    let answered = Answered::default();
    let half_out = Arc::new(AtomicUsize::new(0));
    let slow = {
        let (answered, half_out) = (answered.clone(), half_out.clone());
        let first = Arc::new(AtomicUsize::new(0));
        Fake::start(move |mut c: Conn| {
            while let Some(req) = c.read_request() {
                if first.fetch_add(1, Ordering::SeqCst) == 0 {
                    c.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n");
                    c.send(&[b'a'; 1000]);
                    half_out.store(1, Ordering::SeqCst);
                    answered.wait(1);
                    c.send(&[b'b'; 1000]);
                } else {
                    c.ok(format!("slow answers {}", path(&req)).as_bytes());
                }
            }
        })
    };
    let fast = {
        let answered = answered.clone();
        let count = Arc::new(AtomicUsize::new(0));
        Fake::start(move |mut c: Conn| {
            while let Some(req) = c.read_request() {
                let k = count.fetch_add(1, Ordering::SeqCst);
                if k == 0 {
                    wait_for(|| half_out.load(Ordering::SeqCst) == 1);
                } else {
                    answered.wait(k + 1);
                }
                c.ok(format!("fast answers {}", path(&req)).as_bytes());
            }
        })
    };
    let (px, counters) = proxy_counted(backend, &[fast.addr, slow.addr], |c| {
        c.width = 2;
        c.policy = Policy::First;
    });
    let mut c = Client::connect(px.addr);
    let (from, body) = only_entry(&c.roundtrip(&get("/one")));
    assert_eq!(
        (from, body),
        (fast.addr.to_string(), "fast answers /one".to_owned())
    );
    // Not pooled before the rest of its response came.
    assert_eq!(counters.get().drained, 0);
    answered.one_more();
    assert!(
        eventually(Duration::from_secs(60), || counters.get().drained == 1),
        "drained: {}",
        counters.get()
    );
    let (from, body) = only_entry(&c.roundtrip(&get("/two")));
    answered.one_more();
    assert_eq!(
        (from, body),
        (slow.addr.to_string(), "slow answers /two".to_owned())
    );
    assert_eq!(slow.accepted(), 1, "the drained connection was reused");
    assert_eq!(slow.requests().len(), 2);
    let stats = counters.get();
    assert_eq!(stats.drain_closed, 0, "{stats}");
    assert_eq!(stats.failed, 0, "{stats}");
    drop(c);
    drop(px);
}

/// An upstream that sends half a response and then nothing: its cut-off
/// branches (one per request; the draining connections are not in the
/// pool, so each request connects anew) stay open until their request's
/// deadline, then are closed, and no descriptor is left behind. The
/// deadline (3 s) must outlast the other upstream's answer, which comes as
/// soon as the hung one has its sub-request.
fn hung_until_the_deadline(backend: Backend) {
    const DEADLINE: Duration = Duration::from_secs(3);
    let hung = Fake::start(|mut c: Conn| {
        if c.read_request().is_some() {
            c.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
            c.wait_close(Duration::from_secs(60));
        }
    });
    let fast = ok_after_the_other(&hung);
    let (px, counters) = proxy_counted(backend, &[fast.addr, hung.addr], |c| {
        c.width = 2;
        c.policy = Policy::First;
        c.deadline = DEADLINE;
    });
    let mut c = Client::connect(px.addr);
    // The warm-up pools a connection to `fast` (both ends are ours).
    let (_, body) = only_entry(&c.roundtrip(&get("/warm")));
    assert_eq!(body, "ok");
    assert!(
        eventually(Duration::from_secs(60), || hung.closed_by_peer() == 1),
        "the warm-up's drain ended"
    );
    std::thread::sleep(Duration::from_millis(50));
    let fds = open_fds();
    let sent = Instant::now();
    for i in 0..3 {
        let (_, body) = only_entry(&c.roundtrip(&get(&format!("/r{i}"))));
        assert_eq!(body, "ok");
    }
    assert!(
        eventually(Duration::from_secs(60), || hung.accepted() == 4),
        "a draining connection is never reused: {} connections",
        hung.accepted()
    );
    // Not closed before the deadline: a lower bound on when the last
    // close was seen (a slow machine only makes it later).
    assert!(
        eventually(Duration::from_secs(60), || hung.closed_by_peer() == 4),
        "closed at the deadline"
    );
    let closed = sent.elapsed();
    assert!(
        closed >= DEADLINE - Duration::from_millis(100),
        "closed after {closed:?}"
    );
    let stats = counters.get();
    assert_eq!((stats.drained, stats.drain_closed), (0, 4), "{stats}");
    assert!(
        eventually(Duration::from_secs(60), || open_fds() <= fds),
        "descriptors: {} now, {fds} before",
        open_fds()
    );
    drop(c);
    drop(px);
}

/// Responses the drain must not pool: one with `Connection: close`, one
/// whose chunked body grows over `max_response_body` (1000 bytes here)
/// after the cut-off. Either way the connection is closed, and the next
/// request to that upstream connects anew.
///
/// The first part goes out before the other upstream answers, the rest
/// only once the client has that answer.
fn not_reusable(backend: Backend, first_part: Vec<u8>, rest: Vec<u8>) {
    let answered = Answered::default();
    let part_out = Arc::new(AtomicUsize::new(0));
    let slow = {
        let (answered, part_out) = (answered.clone(), part_out.clone());
        let count = Arc::new(AtomicUsize::new(0));
        Fake::start(move |mut c: Conn| {
            while let Some(req) = c.read_request() {
                if count.fetch_add(1, Ordering::SeqCst) == 0 {
                    c.send(&first_part);
                    part_out.store(1, Ordering::SeqCst);
                    answered.wait(1);
                    c.send(&rest);
                    c.wait_close(Duration::from_secs(60));
                    return;
                }
                c.ok(format!("slow answers {}", path(&req)).as_bytes());
            }
        })
    };
    let fast = {
        let count = Arc::new(AtomicUsize::new(0));
        Fake::start(move |mut c: Conn| {
            while let Some(req) = c.read_request() {
                if count.fetch_add(1, Ordering::SeqCst) == 0 {
                    wait_for(|| part_out.load(Ordering::SeqCst) == 1);
                }
                c.ok(format!("fast answers {}", path(&req)).as_bytes());
            }
        })
    };
    let (px, counters) = proxy_counted(backend, &[fast.addr, slow.addr], |c| {
        c.width = 2;
        c.policy = Policy::First;
        c.max_response_body = 1000;
    });
    let mut c = Client::connect(px.addr);
    let (_, body) = only_entry(&c.roundtrip(&get("/one")));
    assert_eq!(body, "fast answers /one");
    answered.one_more();
    assert!(
        eventually(Duration::from_secs(60), || slow.closed_by_peer() == 1),
        "the proxy closed it"
    );
    let stats = counters.get();
    assert_eq!((stats.drained, stats.drain_closed), (0, 1), "{stats}");
    let r = c.roundtrip(&get("/two"));
    assert_eq!(r.status, 200);
    assert!(
        eventually(Duration::from_secs(60), || slow.accepted() == 2),
        "not pooled: the next request connected ({} connections)",
        slow.accepted()
    );
    drop(c);
    drop(px);
}

/// A stop with drains in progress (upstream hung; the request deadline
/// and the drain deadline two minutes) ends within a minute: the drains
/// close their connections as the stop begins, where they would
/// otherwise last until one of those deadlines.
fn stop_with_drains(backend: Backend) {
    const LATER: Duration = Duration::from_secs(120);
    log_capture::install();
    log_capture::clear();
    let hung = Fake::start(|mut c: Conn| {
        if c.read_request().is_some() {
            c.wait_close(Duration::from_secs(180));
        }
    });
    let fast = ok_after_the_other(&hung);
    let (mut px, counters) = proxy_counted_draining(backend, &[fast.addr, hung.addr], LATER, |c| {
        c.width = 2;
        c.policy = Policy::First;
        c.deadline = LATER;
    });
    let mut c = Client::connect(px.addr);
    for i in 0..2 {
        let (_, body) = only_entry(&c.roundtrip(&get(&format!("/r{i}"))));
        assert_eq!(body, "ok");
    }
    drop(c);
    assert!(eventually(Duration::from_secs(60), || hung.accepted() == 2));
    assert_eq!(hung.closed_by_peer(), 0, "still draining");
    px.stop_within(Duration::from_secs(60))
        .expect("the proxy stopped before a drain or request deadline");
    assert!(
        eventually(Duration::from_secs(60), || hung.closed_by_peer() == 2),
        "the drains' connections were closed"
    );
    let stats = counters.get();
    assert_eq!((stats.drained, stats.drain_closed), (0, 2), "{stats}");
    // The stop summary accounts for both: closed already, or (logged
    // before the drains' tasks ran) still reading.
    let summary = log_capture::lines_with(&["fanout requests=2 "]);
    assert_eq!(summary.len(), 1, "{summary:?}");
    let closed = number_after(&summary[0], " drain_closed=");
    let reading = number_after(&summary[0], "; ");
    assert_eq!(closed + reading, 2, "{summary:?}");
}

/// The number that follows `key` in `line` (0 if `key` is not there).
fn number_after(line: &str, key: &str) -> u64 {
    line.split_once(key)
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A pool whose connections never expire (`idle_timeout` of
/// `Duration::MAX`, which the pool takes as "never"): the drain's worker,
/// idle after its first drain, waits without end rather than panic on the
/// instant it would retire at, and takes the next drain as the first.
///
/// The slow upstream answers each request once the client has the fast
/// one's answer to it, so it always loses and is always drained.
fn never_expiring_pool(backend: Backend) {
    let answered = Answered::default();
    let slow = {
        let answered = answered.clone();
        let count = Arc::new(AtomicUsize::new(0));
        Fake::start(move |mut c: Conn| {
            while let Some(req) = c.read_request() {
                answered.wait(count.fetch_add(1, Ordering::SeqCst) + 1);
                c.ok(format!("slow answers {}", path(&req)).as_bytes());
            }
        })
    };
    let fast = ok_after_the_other(&slow);
    let (px, counters) = proxy_counted(backend, &[fast.addr, slow.addr], |c| {
        c.width = 2;
        c.policy = Policy::First;
        c.pool.idle_timeout = Duration::MAX;
    });
    let mut c = Client::connect(px.addr);
    for i in 1..=3 {
        let (_, body) = only_entry(&c.roundtrip(&get(&format!("/r{i}"))));
        assert_eq!(body, "ok");
        answered.one_more();
        assert!(
            eventually(Duration::from_secs(60), || counters.get().drained == i),
            "drain {i} ended: {}",
            counters.get()
        );
    }
    let stats = counters.get();
    assert_eq!(stats.drain_closed, 0, "{stats}");
    assert_eq!(slow.accepted(), 1, "each drained connection was reused");
    drop(c);
    drop(px);
}

backend_tests! {
    /// `quorum:2` of width 3 over three echoes.
    fn connects_stay_bounded_under_quorum(backend) {
        connects_stay_bounded(backend, Policy::Quorum(2), 2);
    }

    /// `first` of width 3 over three echoes.
    fn connects_stay_bounded_under_first(backend) {
        connects_stay_bounded(backend, Policy::First, 1);
    }

    /// See [`two_parts`].
    fn a_response_in_two_parts_is_reused_only_after_its_end(backend) {
        two_parts(backend);
    }

    /// See [`hung_until_the_deadline`].
    fn a_hung_cut_off_branch_is_closed_at_the_deadline(backend) {
        hung_until_the_deadline(backend);
    }

    /// See [`not_reusable`].
    fn a_response_with_connection_close_is_not_pooled(backend) {
        let head = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 10\r\n\r\n12345";
        not_reusable(backend, head.to_vec(), b"67890".to_vec());
    }

    /// See [`not_reusable`].
    fn a_response_over_the_body_limit_is_not_pooled(backend) {
        // Two chunks of 600 bytes (258 in hex), the first one's size line
        // before the pause: 1200 in all.
        let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n";
        let mut rest = vec![b'a'; 600];
        rest.extend_from_slice(b"\r\n258\r\n");
        rest.extend_from_slice(&[b'b'; 600]);
        rest.extend_from_slice(b"\r\n0\r\n\r\n");
        not_reusable(backend, head.to_vec(), rest);
    }

    /// See [`stop_with_drains`].
    fn a_stop_with_drains_in_progress_ends_promptly(backend) {
        stop_with_drains(backend);
    }

    /// See [`never_expiring_pool`].
    fn a_pool_that_never_expires_keeps_draining(backend) {
        never_expiring_pool(backend);
    }
}
