//! What an operator sees when upstreams fail, on both backends: the
//! rate-limited WARN lines (one per second per core, the next carrying
//! the count left out) for failed sub-requests and mirror copies, and the
//! OS's reason when the proxy runs out of file descriptors: a 502 body
//! with "Too many open files (os error 24)" and a WARN saying to raise
//! `ulimit -n`; and the WARN for an upstream whose branches are always
//! cancelled before it answers, even when the drain reads its answers
//! after the cut-off.
//!
//! The log is captured process-wide and one case lowers the process's
//! soft `RLIMIT_NOFILE` (filling every free descriptor below it), so these
//! cases have a test binary of their own and run one at a time.

mod support;

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use log_capture::warnings;
use percore_handlers::proxy::Policy;
use percore_test_kit::http::*;
use percore_test_kit::log_capture;
use percore_test_kit::upstream::{entries, refused_addr, Conn, Fake};
use percore_test_kit::*;
use support::fanout::{proxy, proxy_counted};
use support::http::*;

/// One case at a time: the log and the descriptor limit are per process.
static SERIAL: Mutex<()> = Mutex::new(());

/// Takes the case lock and starts the capture afresh.
fn start_case() -> MutexGuard<'static, ()> {
    log_capture::install();
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    log_capture::clear();
    guard
}

/// The process out of descriptors until dropped: the soft limit lowered
/// to a little above what is open, and every free slot below it filled.
struct Starved {
    saved: libc::rlimit,
    _fillers: Vec<File>,
}

impl Starved {
    fn new() -> Starved {
        let open = std::fs::read_dir("/proc/self/fd")
            .expect("/proc/self/fd")
            .count();
        let mut saved = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct it is given.
        let got = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut saved) };
        assert_eq!(got, 0);
        let low = libc::rlimit {
            rlim_cur: (open as libc::rlim_t + 16).min(saved.rlim_cur),
            rlim_max: saved.rlim_max,
        };
        // SAFETY: setrlimit reads the struct it is given.
        let set = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) };
        assert_eq!(set, 0);
        let mut fillers = Vec::new();
        // Threads of earlier tests may still close sockets, each opening a
        // hole that the proxy's connect would take: fill again until the
        // table has stayed full for 50 ms.
        loop {
            let before = fillers.len();
            loop {
                match File::open("/dev/null") {
                    Ok(f) => fillers.push(f),
                    Err(e) if e.raw_os_error() == Some(libc::EMFILE) => break,
                    Err(e) => panic!("filling the descriptor table: {e}"),
                }
            }
            if fillers.len() == before {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Starved {
            saved,
            _fillers: fillers,
        }
    }
}

impl Drop for Starved {
    fn drop(&mut self) {
        // SAFETY: setrlimit reads the struct it is given.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &self.saved) };
    }
}

backend_tests! {
    parallel;
    /// With no descriptor left, the proxy's connect fails with `EMFILE`:
    /// a 502 naming the upstream and "Too many open files (os error 24)",
    /// and a WARN saying to raise `ulimit -n`. With descriptors back, the
    /// same client connection gets the usual refusal.
    fn out_of_descriptors(backend) {
        let _case = start_case();
        let dead = refused_addr();
        let px = proxy(backend, &[dead], |_| {});
        let mut c = Client::connect(px.addr);
        // The client's connection is accepted before the limit drops.
        wait_until(Duration::from_secs(60), "the accept", || px.stats().accepted == 1, |done| *done);

        let starved = Starved::new();
        let r = c.roundtrip(&get("/"));
        drop(starved);
        let text = String::from_utf8_lossy(&r.body).into_owned();
        assert_eq!(r.status, 502, "{text}");
        let emfile = io::Error::from_raw_os_error(libc::EMFILE);
        assert!(text.contains(&format!("upstream {dead}: connect failed: {emfile}")), "{text}");
        assert!(text.contains("Too many open files (os error 24)"), "{text}");
        let lines = warnings(&dead.to_string());
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("Too many open files (os error 24)"), "{lines:?}");
        assert!(lines[0].contains("raise its limit (ulimit -n)"), "{lines:?}");

        let r = c.roundtrip(&get("/"));
        let text = String::from_utf8_lossy(&r.body).into_owned();
        let refused = io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert!(text.contains(&format!("connect failed: {refused}")), "{text}");
    }

    /// Failed sub-requests log a WARN naming the upstream and the reason,
    /// at most one a second per core: five quick failures make fewer
    /// lines, and the line after a pause counts those left out.
    fn failures_warn_at_most_once_a_second(backend) {
        let _case = start_case();
        let dead = refused_addr();
        let px = proxy(backend, &[dead], |_| {});
        let mut c = Client::connect(px.addr);
        for _ in 0..4 {
            assert_eq!(c.roundtrip(&get("/")).status, 502);
        }
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(c.roundtrip(&get("/")).status, 502);
        // Fewer lines than failures, unless a slow machine spread the
        // first four over as many seconds; then none was left out.
        let lines = warnings(&format!("upstream {dead}: connect failed: Connection refused"));
        assert!((2..=5).contains(&lines.len()), "rate-limited: {lines:?}");
        assert!(!lines[0].contains("not logged"), "{lines:?}");
        let last = &lines[lines.len() - 1];
        if lines.len() < 5 {
            assert!(last.contains("more upstream failure"), "counts those left out: {lines:?}");
        }
    }

    /// A mirror copy that fails logs a WARN naming the shadow; the client
    /// is answered by the upstreams as usual.
    fn mirror_failures_warn(backend) {
        let _case = start_case();
        let up = TestServer::echo(backend);
        let shadow = refused_addr();
        let px = proxy(backend, &[up.addr], |c| c.mirror = Some(shadow.into()));
        assert_eq!(Client::connect(px.addr).roundtrip(&get("/")).status, 200);
        let needle = format!("mirror {shadow}: connect failed: Connection refused");
        wait_until(Duration::from_secs(60), "the mirror's WARN", || !warnings(&needle).is_empty(), |done| *done);
    }

    /// Under `first`, an upstream that takes requests and never answers
    /// fails none: its branches are cancelled once the other answers. After
    /// 100 such requests in a row a WARN names it; an answer from it starts
    /// the count again.
    fn an_upstream_always_cut_off_warns(backend) {
        let _case = start_case();
        let hung = Fake::start(|mut c: Conn| while c.read_request().is_some() {});
        let ok = Fake::answering_ok();
        let px = proxy(backend, &[hung.addr, ok.addr], |c| {
            c.width = 2;
            c.policy = Policy::First;
        });
        let mut c = Client::connect(px.addr);
        let needle = format!("upstream {}: the last 100 requests sent to it were answered by the others first", hung.addr);
        for i in 1..=100 {
            assert!(warnings(&needle).is_empty(), "warned after {i} requests");
            assert_eq!(c.roundtrip(&get("/")).status, 200);
        }
        wait_until(Duration::from_secs(60), "the WARN", || warnings(&needle).len() == 1, |done| *done);
        assert!(warnings(&ok.addr.to_string()).is_empty(), "the healthy upstream was named");
    }

    /// An upstream that always answers, but only once the client has the
    /// other's answer (so always after it, however slow the machine), is
    /// "always slower": its answers, read by the drain after each cut-off
    /// and its connections pooled again, do not end its run, and the WARN
    /// comes after 100 requests all the same.
    fn an_upstream_always_slower_warns_though_its_answers_are_drained(backend) {
        let _case = start_case();
        // Request `/rN` is answered once the client has N answers.
        let released = Arc::new(AtomicUsize::new(0));
        let let_go = released.clone();
        let slow = Fake::start(move |mut c: Conn| {
            while let Some(req) = c.read_request() {
                let text = String::from_utf8_lossy(&req);
                let n: usize = text
                    .strip_prefix("GET /r")
                    .and_then(|rest| rest.split(' ').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                let give_up = std::time::Instant::now() + Duration::from_secs(60);
                while let_go.load(Ordering::SeqCst) < n && std::time::Instant::now() < give_up {
                    std::thread::sleep(Duration::from_millis(1));
                }
                c.ok(b"late");
            }
        });
        let ok = Fake::answering_ok();
        let (px, counters) = proxy_counted(backend, &[slow.addr, ok.addr], |c| {
            c.width = 2;
            c.policy = Policy::First;
        });
        let mut c = Client::connect(px.addr);
        let needle = format!("upstream {}: the last 100 requests sent to it were answered by the others first", slow.addr);
        let mut drained = 0;
        for i in 1..=100 {
            assert!(warnings(&needle).is_empty(), "warned after {i} requests");
            if i == 100 {
                // The answers let go so far are drained (polled: the drain
                // reads them in its own time).
                wait_until(Duration::from_secs(60), "50 answers drained", || counters.get().drained >= 50, |done| *done);
            }
            drained = counters.get().drained;
            let r = c.roundtrip(&get(&format!("/r{i}")));
            assert_eq!(r.status, 200);
            assert_eq!(entries(&r.body)[0].0, ok.addr.to_string(), "request {i}");
            released.fetch_add(1, Ordering::SeqCst);
        }
        assert!(drained >= 50, "{drained} drained before the last request: {}", counters.get());
        wait_until(Duration::from_secs(60), "the WARN", || warnings(&needle).len() == 1, |done| *done);
    }

    /// A request in which an upstream answered is not one that cut it
    /// off, even when another of its branches was still running; and at
    /// width 3 over two upstreams (one gets a single branch of three, and
    /// loses two races in three by chance) the WARN comes after 200. The
    /// first request goes out as a, b, a: `a` answers its first request
    /// only, `b` hangs on its first only, so `a` answers the first request
    /// with its other branch still running and is cut off in each one
    /// after.
    fn an_upstream_that_answered_is_not_cut_off_in_that_request(backend) {
        let _case = start_case();
        let a_seen = Arc::new(AtomicUsize::new(0));
        let b_seen = Arc::new(AtomicUsize::new(0));
        let a = Fake::start(move |mut c: Conn| {
            while c.read_request().is_some() {
                if a_seen.fetch_add(1, Ordering::SeqCst) == 0 {
                    c.ok(b"a");
                }
            }
        });
        let b = Fake::start(move |mut c: Conn| {
            while c.read_request().is_some() {
                if b_seen.fetch_add(1, Ordering::SeqCst) > 0 {
                    c.ok(b"b");
                }
            }
        });
        let px = proxy(backend, &[a.addr, b.addr], |c| {
            c.width = 3;
            c.policy = Policy::First;
        });
        let mut c = Client::connect(px.addr);
        let needle = format!("upstream {}: the last 200 requests", a.addr);
        for i in 1..=201 {
            assert!(warnings(&needle).is_empty(), "warned after {} requests", i - 1);
            assert_eq!(c.roundtrip(&get("/")).status, 200);
        }
        wait_until(Duration::from_secs(60), "the WARN", || warnings(&needle).len() == 1, |done| *done);
    }
}
