//! The end of a graceful stop, on both backends: a service call still
//! running a little before the drain deadline is cut off and its client
//! answered `503 Service Unavailable: the server is stopping` with
//! `Connection: close`, instead of seeing its connection close without an
//! answer when the drain cancels it. (A request that finishes in time is
//! answered normally: `http_slow.rs`.)
//!
//! The test servers drain for 2 s, so the cut-off comes at 1.8 s (a tenth
//! of the drain before its end).

use crate::support;

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use percore_test_kit::http::*;
use percore_test_kit::log_capture;
use percore_test_kit::*;
use support::http::*;

/// The test server's drain (see `TestServer::start`).
const DRAIN: Duration = Duration::from_secs(2);

/// Never answers. Counts the calls that reached the wait; with path
/// `/stream` it first sends the head and a chunk of its body, with
/// `/upload` it reads the body (which the test's client never finishes).
struct Never {
    waiting: Arc<AtomicUsize>,
}

impl Service for Never {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        if req.path() == "/stream" {
            res.write(b"part one\n");
            res.flush().await?;
        }
        if req.path() == "/upload" {
            self.waiting.fetch_add(1, Ordering::SeqCst);
            req.body().await?;
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        std::future::pending::<()>().await;
        Ok(())
    }
}

/// A server of [`Never`] and the count of calls waiting in it.
fn never(backend: Backend) -> (TestServer, Arc<AtomicUsize>) {
    let waiting = Arc::new(AtomicUsize::new(0));
    let count = waiting.clone();
    let server = TestServer::start(backend, Config::default(), move || Never {
        waiting: count.clone(),
    });
    (server, waiting)
}

backend_tests! {
    parallel;
    /// 1. Two requests wait in the service (a GET and a HEAD) when the stop
    /// begins. 2. Each is answered 503 with `Connection: close` and a body
    /// saying why (none for the HEAD): at the cut-off, not long after the
    /// stop (a lower bound), and not at the drain deadline, which would
    /// close the connection without an answer. 3. Then the connections
    /// close and the server stops; 4. the log says what happened, naming
    /// the request.
    fn a_call_still_running_near_the_drain_deadline_gets_503(backend) {
        log_capture::install();
        let (mut server, waiting) = never(backend);
        let target = format!("/never-{backend}");
        let mut get_client = Client::connect(server.addr);
        get_client.send(&get(&target));
        let mut head_client = Client::connect(server.addr);
        head_client.send(format!("HEAD {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        // 1.
        wait_until(Duration::from_secs(60), "both calls to wait", || {
            waiting.load(Ordering::SeqCst) == 2
        }, |done| *done);
        let stopped = Instant::now();
        server.begin_stop();
        // 2.
        let r = get_client.response();
        let answered = stopped.elapsed();
        assert_eq!(r.status, 503, "{:?}", String::from_utf8_lossy(&r.body));
        assert!(r.closes(), "503 with Connection: close: {:?}", r.headers);
        assert_eq!(r.body, b"Service Unavailable: the server is stopping\n");
        assert!(answered >= DRAIN / 2, "answered {answered:?} after the stop, for a {DRAIN:?} drain");
        let h = head_client.response_to(true);
        assert_eq!(h.status, 503);
        assert!(h.closes());
        // 3.
        get_client.expect_eof();
        head_client.expect_eof();
        drop((get_client, head_client));
        assert!(server.stop_within(Duration::from_secs(60)).is_some(), "the server stopped");
        // 4.
        let lines = log_capture::warnings(&target);
        assert!(
            lines.iter().any(|l| l.contains("answered 503") && l.contains("method=\"GET\"")),
            "{lines:?}"
        );
    }

    /// A call cut off while it waits for a slow client's body is answered
    /// 503 like any other, and the log blames the body, not the service.
    fn a_body_still_arriving_at_the_cut_off_is_logged_as_such(backend) {
        log_capture::install();
        let (mut server, waiting) = never(backend);
        let mut c = Client::connect(server.addr);
        c.send(format!("POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nslow-{backend}").as_bytes());
        wait_until(Duration::from_secs(60), "the call to read the body", || {
            waiting.load(Ordering::SeqCst) == 1
        }, |done| *done);
        server.begin_stop();
        let r = c.response();
        assert_eq!(r.status, 503, "{:?}", String::from_utf8_lossy(&r.body));
        drop(c);
        assert!(server.stop_within(Duration::from_secs(60)).is_some(), "the server stopped");
        let lines = log_capture::lines_with(&["target=\"/upload\"", "answered 503"]);
        assert!(lines.iter().any(|l| l.contains("the request's body was still arriving")), "{lines:?}");
        assert!(!lines.iter().any(|l| l.contains("the service had not answered")), "{lines:?}");
    }

    /// A call that already sent its response head (streaming) cannot be
    /// answered 503: its body ends incomplete (no last chunk) and the
    /// connection closes, at the cut-off; the log says so.
    fn a_streaming_call_is_cut_off_incomplete(backend) {
        log_capture::install();
        let (mut server, waiting) = never(backend);
        let mut c = Client::connect(server.addr);
        c.send(&get("/stream"));
        wait_until(Duration::from_secs(60), "the call to wait", || {
            waiting.load(Ordering::SeqCst) == 1
        }, |done| *done);
        server.begin_stop();
        let bytes = c.read_to_end();
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.to_ascii_lowercase().contains("transfer-encoding: chunked\r\n"), "{text}");
        assert!(text.contains("part one\n"), "{text}");
        assert!(!text.ends_with("0\r\n\r\n"), "no last chunk: {text}");
        assert!(!text.contains("503"), "{text}");
        drop(c);
        assert!(server.stop_within(Duration::from_secs(60)).is_some(), "the server stopped");
        let lines = log_capture::warnings("target=\"/stream\"");
        assert!(lines.iter().any(|l| l.contains("ends incomplete")), "{lines:?}");
        assert!(!lines.iter().any(|l| l.contains("answered 503")), "{lines:?}");
    }

    /// A connection whose last answer is out lingers, reading and dropping
    /// what its client still sends, for the linger timeout (here two
    /// minutes). A stop that begins meanwhile cuts the linger short,
    /// though the client keeps its end open: the server stops within a
    /// minute, before the drain deadline (two minutes here too), where it
    /// would otherwise cancel the lingering connection.
    fn a_stop_cuts_short_a_linger_that_began_before_it(backend) {
        const LATER: Duration = Duration::from_secs(120);
        let mut config = Config::default();
        config.linger_timeout = LATER;
        let mut server = TestServer::echo_with_drain(backend, config, LATER);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        assert_eq!(r.status, 200);
        assert!(r.closes(), "{:?}", r.headers);
        c.expect_eof();
        let took = server.stop_within(Duration::from_secs(60));
        assert!(took.is_some(), "the linger was not cut short by the stop");
        drop(c);
    }

    /// A request head still arriving at the stop, whether it began before
    /// the stop or in the grace after it, is not left for the drain to
    /// cancel without a word: shortly before the drain deadline (at the
    /// cut-off) its client gets `408` with `Connection: close`. The grace
    /// is set past the cut-off, which then ends it, so the head sent after
    /// the stop cannot miss a 1 s grace on a slow machine.
    fn a_head_still_arriving_at_the_cut_off_is_answered_408(backend) {
        for before_the_stop in [true, false] {
            let mut config = Config::default();
            config.stop_grace = Duration::from_secs(60);
            let mut server = TestServer::echo_with(backend, config);
            let mut c = Client::connect(server.addr);
            assert_eq!(c.roundtrip(&get("/")).status, 200);
            let partial = b"GET /slow HTTP/1.1\r\nHost: t\r\n";
            if before_the_stop {
                c.send(partial);
                std::thread::sleep(Duration::from_millis(100));
            }
            server.begin_stop();
            if !before_the_stop {
                std::thread::sleep(Duration::from_millis(100));
                c.send(partial);
            }
            let r = c.response();
            assert_eq!(r.status, 408, "head sent before the stop: {before_the_stop}");
            assert!(r.closes(), "{:?}", r.headers);
            drop(c);
            assert!(server.stop_within(Duration::from_secs(60)).is_some(), "the server stopped");
        }
    }
}
