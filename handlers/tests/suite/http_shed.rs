//! FAULTS N2: overload shed early. With `Config::shed_queue_delay` set, a
//! core whose loop turns run long answers new requests 503 with
//! `Retry-After` without calling the service; every request still gets
//! an answer, 200 or 503, and the counts add up.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use percore::net::Endpoint;
use percore::Readiness;
use percore_handlers::http::{Config, HttpHandler, Request, Response, Service};
use percore_handlers::metrics::{Admin, Metrics};
use percore_test_kit::http::*;
use percore_test_kit::*;

/// Blocks its core `ms` per request (only on path `only`, if given), so
/// that requests arriving meanwhile wait: a turn that serves one runs
/// longer than the bound.
struct Blocking {
    calls: Arc<AtomicU64>,
    ms: u64,
    only: Option<&'static str>,
}

impl Blocking {
    /// 3 ms on every request.
    fn slow(calls: &Arc<AtomicU64>) -> Self {
        Blocking {
            calls: calls.clone(),
            ms: 3,
            only: None,
        }
    }
}

impl Service for Blocking {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.only.is_none_or(|path| req.path() == path) {
            std::thread::sleep(Duration::from_millis(self.ms));
        }
        res.send(200, None, b"ok")?;
        Ok(())
    }
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

/// `clients` threads each send `rounds` requests, one per connection;
/// returns how many were answered 200 and how many 503.
fn load(addr: std::net::SocketAddr, clients: usize, rounds: usize) -> (u64, u64) {
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            std::thread::spawn(move || {
                let (mut ok, mut shed) = (0u64, 0u64);
                for _ in 0..rounds {
                    let resp = one(addr, GET);
                    match resp.status {
                        200 => ok += 1,
                        503 => {
                            assert_eq!(resp.header("retry-after"), Some("1"), "{resp:?}");
                            assert!(
                                !resp.closes(),
                                "a bodiless request keeps its connection: {resp:?}"
                            );
                            shed += 1;
                        }
                        other => panic!("unexpected status {other}: {resp:?}"),
                    }
                }
                (ok, shed)
            })
        })
        .collect();
    threads.into_iter().fold((0, 0), |(ok, shed), t| {
        let (o, s) = t.join().expect("client thread");
        (ok + o, shed + s)
    })
}

backend_tests! {
    parallel;
    /// Eight clients, 25 requests each, against a bound of 1 ms: some are
    /// shed (503, `Retry-After`, the connection kept), the rest served, none lost; the
    /// service saw only the served ones, the counter the shed ones, and
    /// `/readyz` says `overloaded` once, then `ready` again.
    fn an_overloaded_core_sheds_with_503(backend) {
        let calls = Arc::new(AtomicU64::new(0));
        let mut config = Config::default();
        config.shed_queue_delay = Some(Duration::from_millis(1));
        let readiness = Readiness::new();
        let metrics = Metrics::new(readiness.clone());
        let (made, registry, admin) = (calls.clone(), metrics.clone(), metrics.clone());
        let server = builder(backend)
            .readiness(readiness)
            .add_listener(std::net::SocketAddr::from(([127, 0, 0, 1], 0)), move |_core| {
                HttpHandler::new(Admin::new(admin.clone()))
            })
            .start(move |core| {
                let handler = HttpHandler::with_config(Blocking::slow(&made), config);
                registry.register_http(core, handler.stats_reader());
                handler
            })
            .expect("start");
        let Endpoint::Tcp(admin) = server.listeners()[1].addr.clone() else {
            panic!("the admin listener is TCP")
        };
        let (ok, shed) = load(server.local_addr(), 8, 25);
        assert_eq!(ok + shed, 200, "every request answered");
        assert!(shed > 0, "some requests shed ({ok} served)");
        assert!(ok > 0, "some requests served ({shed} shed)");
        assert_eq!(calls.load(Ordering::Relaxed), ok, "a shed request never reaches the service");
        let scrape = one(admin, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        let text = String::from_utf8_lossy(&scrape.body);
        let line = format!("percore_http_shed_total{{core=\"{}\"}} {shed}\n", server.stats()[0].cpu);
        assert!(text.contains(&line), "no {line:?} in:\n{text}");
        let ready = |expect: &str| {
            let resp = one(admin, b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n");
            assert_eq!(String::from_utf8_lossy(&resp.body), expect, "{resp:?}");
            resp.status
        };
        assert_eq!(ready("overloaded\n"), 503);
        assert_eq!(ready("ready\n"), 200);
        server.shutdown();
        server.join().expect("join");
    }

    /// With shedding on, the core publishes its queue delay: while a
    /// client keeps it busy with requests that each take 3 ms, a snapshot
    /// (and `/metrics`' `percore_queue_delay_seconds`) shows a turn of at
    /// least that.
    fn the_queue_delay_is_published(backend) {
        let calls = Arc::new(AtomicU64::new(0));
        let mut config = Config::default();
        config.shed_queue_delay = Some(Duration::from_secs(60));
        let made = calls.clone();
        let server = builder(backend)
            .start(move |_core| HttpHandler::with_config(Blocking::slow(&made), config))
            .expect("start");
        let addr = server.local_addr();
        let busy = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let going = busy.clone();
        let client = std::thread::spawn(move || {
            let mut c = Client::connect(addr);
            while going.load(Ordering::Relaxed) {
                assert_eq!(c.roundtrip(GET).status, 200);
            }
        });
        wait_until(Duration::from_secs(60), "a turn of 3 ms published", || server.stats()[0].queue_delay, |d| *d >= Duration::from_millis(3));
        busy.store(false, Ordering::Relaxed);
        client.join().expect("the client");
        server.shutdown();
        server.join().expect("join");
    }

    /// Requests read together wait for the ones before them: with a
    /// bound of 1 s, pipelined requests whose first blocks its core 1.2 s
    /// get 200, then 503s, though the turn before was short; the shed
    /// ones never reach the service. A shed request without a body keeps
    /// the connection (the next one is answered on it), one that asks
    /// to close closes it, and one with a body closes it unread.
    fn a_turn_past_the_bound_sheds_the_requests_behind(backend) {
        let calls = Arc::new(AtomicU64::new(0));
        let mut config = Config::default();
        config.shed_queue_delay = Some(Duration::from_secs(1));
        let made = calls.clone();
        let server = builder(backend)
            .start(move |_core| HttpHandler::with_config(Blocking { calls: made.clone(), ms: 1200, only: None }, config))
            .expect("start");
        const CLOSE: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        const POST: &[u8] = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
        let closes = |answers: &[u8]| String::from_utf8_lossy(answers).to_ascii_lowercase().matches("connection: close").count();
        let answers = exchange(server.local_addr(), &[GET, GET, CLOSE, GET].concat());
        assert_eq!(statuses(&answers), [200, 503, 503], "{}", String::from_utf8_lossy(&answers));
        assert_eq!(closes(&answers), 1, "only the one that asked closes: {}", String::from_utf8_lossy(&answers));
        let answers = exchange(server.local_addr(), &[GET, POST, GET].concat());
        assert_eq!(statuses(&answers), [200, 503], "{}", String::from_utf8_lossy(&answers));
        assert_eq!(closes(&answers), 1, "a shed body closes: {}", String::from_utf8_lossy(&answers));
        assert_eq!(calls.load(Ordering::Relaxed), 2, "the shed requests never reached the service");
        server.shutdown();
        server.join().expect("join");
    }

    /// A client refused with `Retry-After: 1` that asks again on the same
    /// connection sooner, while the core still refuses, gets its next
    /// 503 when that second is over, not at once (counted as held); one
    /// that waited the second gets it at once. A stop ends a hold: the
    /// held answers go out and the server stops.
    fn a_refusal_asked_again_too_soon_is_held(backend) {
        let (server, stats, calls) = blocking_on_one_path(backend, true);
        // The blocking request is served; the one read with it waited past
        // the bound and is refused.
        let round = [&b"GET /block HTTP/1.1\r\nHost: x\r\n\r\n"[..], GET].concat();
        let mut c = Client::connect(server.local_addr());
        let started = std::time::Instant::now();
        let refused = |c: &mut Client| refused_after_a_block(c, &round);
        refused(&mut c);
        assert_eq!(stats(), (1, 0), "the first refusal goes out at once");
        refused(&mut c);
        assert_eq!(stats(), (2, 1), "asked again within the second: held");
        assert!(started.elapsed() >= Duration::from_secs(1), "held until the Retry-After passed: {:?}", started.elapsed());
        std::thread::sleep(Duration::from_millis(1100));
        refused(&mut c);
        assert_eq!(stats(), (3, 1), "after the second: at once");
        // Held again, then the server stops: the answers go out.
        c.send(&round);
        wait_until(Duration::from_secs(60), "the fourth refusal", &stats, |(shed, _)| *shed == 4);
        server.shutdown();
        assert_eq!(c.response().status, 200);
        assert_eq!(c.response().status, 503);
        c.expect_eof();
        server.join().expect("join");
        assert_eq!(stats(), (4, 2));
        assert_eq!(calls.load(Ordering::Relaxed), 4, "a refused request never reaches the service");
    }

    /// With `shed_hold` off, a refusal asked again at once goes out at
    /// once (as behind a balancer that pools its connections).
    fn a_refusal_is_not_held_when_holding_is_off(backend) {
        let (server, stats, _calls) = blocking_on_one_path(backend, false);
        let round = [&b"GET /block HTTP/1.1\r\nHost: x\r\n\r\n"[..], GET].concat();
        let mut c = Client::connect(server.local_addr());
        refused_after_a_block(&mut c, &round);
        refused_after_a_block(&mut c, &round);
        assert_eq!(stats(), (2, 0), "nothing held");
        server.shutdown();
        server.join().expect("join");
    }

    /// Off by default: the same load is served whole, however slowly.
    fn no_shedding_by_default(backend) {
        let calls = Arc::new(AtomicU64::new(0));
        let made = calls.clone();
        let handler = move |_: &percore::CoreContext| HttpHandler::new(Blocking::slow(&made));
        let server = builder(backend).start(handler).expect("start");
        let (ok, shed) = load(server.local_addr(), 4, 10);
        assert_eq!((ok, shed), (40, 0));
        assert_eq!(calls.load(Ordering::Relaxed), 40);
        server.shutdown();
        server.join().expect("join");
    }
}

/// A server whose `/block` blocks its core 100 ms, against a bound of
/// 50 ms, holding refusals or not; with a reader of its shed and held
/// counts, and of the service's calls.
fn blocking_on_one_path(
    backend: percore::Backend,
    hold: bool,
) -> (
    percore::ServerHandle,
    impl Fn() -> (u64, u64),
    Arc<AtomicU64>,
) {
    let calls = Arc::new(AtomicU64::new(0));
    let mut config = Config::default();
    config.shed_queue_delay = Some(Duration::from_millis(50));
    config.shed_hold = hold;
    let made = calls.clone();
    let readers = Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = readers.clone();
    let server = builder(backend)
        .start(move |_core| {
            let blocking = Blocking {
                calls: made.clone(),
                ms: 100,
                only: Some("/block"),
            };
            let handler = HttpHandler::with_config(blocking, config);
            kept.lock().expect("readers").push(handler.stats_reader());
            handler
        })
        .expect("start");
    let stats = move || {
        let readers = readers.lock().expect("readers");
        readers
            .iter()
            .map(|r| r.snapshot())
            .fold((0, 0), |(s, h), x| (s + x.shed, h + x.shed_held))
    };
    (server, stats, calls)
}

/// Sends `round` (a blocking request, then one read with it, which
/// waited past the bound): the first is served, the second refused with
/// `Retry-After: 1`, its connection kept.
fn refused_after_a_block(c: &mut Client, round: &[u8]) {
    c.send(round);
    assert_eq!(c.response().status, 200);
    let resp = c.response();
    assert_eq!(
        (resp.status, resp.header("retry-after")),
        (503, Some("1")),
        "{resp:?}"
    );
    assert!(
        !resp.closes(),
        "a refused GET keeps its connection: {resp:?}"
    );
}
