//! The HTTP layer's per-core counters, on both backends: every response
//! counted once by its status class, whether the service or the layer
//! sent it, and the layer's own answers by reason (refused, timed out,
//! service failed or panicked, cut off by a stop); and the access log,
//! a line per response when it is on.

use crate::support;

use std::io;
use std::time::Duration;

use log_capture::lines_with;
use percore_handlers::http::HttpError;
use percore_test_kit::http::*;
use percore_test_kit::log_capture;
use percore_test_kit::*;
use support::http::*;

/// A route per outcome.
struct Outcomes;

impl Service for Outcomes {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        match req.path() {
            "/ok" => res.send(200, None, b"ok")?,
            "/moved" => res.send(301, None, b"")?,
            "/missing" => res.send(404, None, b"")?,
            "/refuse" => return Err(HttpError::new(403, "no").into()),
            "/fail" => return Err(io::Error::other("the database is down")),
            "/panic" => panic!("a bug in the service"),
            "/slow" => percore::time::sleep(Duration::from_secs(30)).await,
            "/stream-forever" => {
                res.send(200, None, b"")?;
                loop {
                    res.write(&[b's'; 64 * 1024]);
                    res.flush().await?;
                }
            }
            "/read" => {
                req.body().await?;
                res.send(200, None, b"ok")?;
            }
            "/stream-then-read" => {
                res.send(200, None, b"")?;
                res.flush().await?;
                req.body().await?;
            }
            // The whole response goes out (its declared length, or a HEAD
            // answer's head), then the exchange fails.
            "/whole-then-read" | "/whole-then-fail" => {
                res.send(200, None, b"ok")?;
                res.set_content_length(2)?;
                res.flush().await?;
                if req.path() == "/whole-then-fail" {
                    return Err(io::Error::other("failed after the response"));
                }
                req.body().await?;
            }
            _ => res.send(200, None, b"")?,
        }
        Ok(())
    }
}

/// The head timeout is short (a test counts a 408 at it); the client's
/// pauses between requests and within bodies are under timeouts of a
/// minute.
fn server(backend: Backend) -> TestServer {
    let mut config = short_config();
    config.idle_timeout = Duration::from_secs(60);
    config.body_timeout = Duration::from_secs(60);
    config.write_timeout = Duration::from_secs(60);
    config.limits.max_body = 16;
    TestServer::start(backend, config, || Outcomes)
}

/// Waits until the counters read `want` (they are written before the
/// response is sent, but read from another thread).
fn expect_stats(server: &TestServer, want: HttpStats) {
    wait_until(
        Duration::from_secs(60),
        "the HTTP counters",
        || server.http_stats() == want,
        |done| *done,
    );
}

/// Answers `/status` with its handler's counters and its core's
/// accepted connections; any other path with 200.
struct Status(HttpStatsReader);

impl Service for Status {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        if req.path() == "/status" {
            let core = percore::core_stats();
            let body = format!("accepted={} {}", core.accepted, self.0.snapshot());
            res.send(200, Some(b"text/plain"), body.as_bytes())?;
        } else {
            res.send(200, None, b"")?;
        }
        Ok(())
    }
}

backend_tests! {
    parallel;
    /// A service built with `HttpHandler::with_stats` reads its own
    /// counters, and `percore::core_stats` its core's, while it serves.
    fn a_service_reads_its_counters(backend) {
        let server = TestServer::start_with_stats(backend, Config::default(), Status);
        for _ in 0..3 {
            Client::connect(server.addr).roundtrip(&get("/x"));
        }
        wait_until(Duration::from_secs(60), "the counters", || server.http_stats().status_2xx == 3, |done| *done);
        let r = Client::connect(server.addr).roundtrip(&get("/status"));
        let body = String::from_utf8_lossy(&r.body);
        assert!(body.starts_with("accepted=4 2xx=3 "), "{body}");
    }


    /// The service's own answers count by class only, and so does a 4xx
    /// `HttpError` it returns (its refusal of the request); its other
    /// errors and its panics count as service errors too.
    fn service_answers_are_counted_by_class(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        for (path, status) in [("/ok", 200), ("/moved", 301), ("/missing", 404), ("/ok", 200)] {
            assert_eq!(c.roundtrip(&get(path)).status, status, "{path}");
        }
        let mut want = HttpStats::default();
        want.status_2xx = 2;
        want.status_3xx = 1;
        want.status_4xx = 1;
        expect_stats(&server, want);

        log_capture::install();
        expect_kept_error(server.addr, &get("/refuse"), 403);
        expect_error(server.addr, &get("/fail"), 500);
        let target = format!("/panic?from={backend}");
        expect_error(server.addr, &get(&target), 500);
        want.status_4xx += 1;
        want.status_5xx += 2;
        want.service_errors = 2;
        expect_stats(&server, want);
        // The panic's log names its request, and (the executor's line) its
        // message.
        let target = format!("target=\"{target}\"");
        assert_eq!(lines_with(&["ERROR", "service panicked", &target, "status=500"]).len(), 1);
        wait_until(Duration::from_secs(60), "the executor's line", || {
            !lines_with(&["ERROR", "task panicked", "a bug in the service"]).is_empty()
        }, |done| *done);
    }

    /// Requests the layer answers itself: malformed, over a limit, too
    /// slow; none reaches the service.
    fn the_layers_own_answers_say_why(backend) {
        let server = server(backend);
        let smuggled = b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n";
        expect_error(server.addr, smuggled, 400);
        expect_error(server.addr, &post("/ok", "text/plain", &[b'x'; 17]), 413);
        expect_error(server.addr, b"GET / HTTP/2.0\r\nHost: t\r\n\r\n", 505);
        expect_error(server.addr, b"GET / HTTP/1.1\r\nHost: t\r\nExpect: x\r\n\r\n", 417);
        let mut want = HttpStats::default();
        want.status_4xx = 3;
        want.status_5xx = 1;
        want.refused = 4;
        expect_stats(&server, want);

        // A head that never ends: 408 at the head timeout.
        let mut slow = Client::connect(server.addr);
        slow.send(b"GET / HTTP/1.1\r\nHost: t\r\n");
        assert_eq!(slow.response().status, 408);
        want.status_4xx += 1;
        want.timeouts = 1;
        expect_stats(&server, want);
    }

    /// A response whose head went out before the client left in the
    /// middle of its body is counted: its status reached the client.
    fn a_streamed_head_counts_when_the_client_leaves_mid_body(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        c.send(b"POST /stream-then-read HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
        assert_eq!(c.response_to(true).status, 200);
        c.shutdown_write();
        c.read_to_end();
        let mut want = HttpStats::default();
        want.status_2xx = 1;
        expect_stats(&server, want);
    }

    /// A client that resets in the middle of a streamed body fails the
    /// service's next write; the service passes the error on, as `?`
    /// does. That is the client's doing: the response counts by its
    /// status, not as a service error, and no warning is logged.
    fn a_client_that_leaves_a_stream_is_not_a_service_error(backend) {
        log_capture::install();
        let server = server(backend);
        let target = format!("/stream-forever?from={backend}");
        let mut c = Client::connect(server.addr);
        c.send(&get(&target));
        c.take(64 * 1024);
        c.reset();
        let mut want = HttpStats::default();
        want.status_2xx = 1;
        expect_stats(&server, want);
        // Logged (if at all) before the counters are written.
        assert!(log_capture::warnings(&target).is_empty(), "{:?}", log_capture::warnings(&target));
        assert_eq!(one(server.addr, &get("/ok")).status, 200);
    }

    /// A stop that cuts off a service still running near the drain
    /// deadline answers 503, counted as cut off.
    fn a_call_cut_off_by_the_stop_is_counted(backend) {
        let mut server = server(backend);
        let mut c = Client::connect(server.addr);
        c.send(&get("/slow"));
        wait_until(Duration::from_secs(60), "the request to be taken", || server.stats().requests == 1, |done| *done);
        server.begin_stop();
        assert_eq!(c.response().status, 503);
        let mut want = HttpStats::default();
        want.status_5xx = 1;
        want.cut_off = 1;
        expect_stats(&server, want);
        assert!(server.stop_within(Duration::from_secs(60)).is_some(), "stopped");
    }

    /// With the access log on, each response has its line, under its own
    /// target: the client, the request (`-` for one whose head did not
    /// parse; a `Content-Length` over the body limit names its request),
    /// the status and the time taken. Off, there is none.
    fn the_access_log_has_a_line_per_response(backend) {
        log_capture::install();
        let mut config = short_config();
        config.access_log = true;
        config.limits.max_body = 16;
        let server = TestServer::start(backend, config, || Outcomes);
        let mut c = Client::connect(server.addr);
        let peer = c.local_addr();
        let path = format!("/missing?from={backend}");
        assert_eq!(c.roundtrip(&get(&path)).status, 404);
        expect_error(server.addr, b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n", 400);
        let peer = format!("peer={peer}");
        let target = format!("target={path}");
        wait_until(Duration::from_secs(60), "the access-log lines", || {
            lines_with(&["percore_handlers::http::access", &peer, "method=GET", &target, "status=404", "micros="]).len() == 1
        }, |done| *done);
        wait_until(Duration::from_secs(60), "the line of the refused request", || {
            !lines_with(&["percore_handlers::http::access", "method=-", "target=-", "status=400"]).is_empty()
        }, |done| *done);
        // A `Content-Length` over the limit is refused on a parsed head:
        // its line names the request.
        let big = format!("/big?from={backend}");
        expect_error(server.addr, &post(&big, "text/plain", &[b'x'; 17]), 413);
        let big = format!("target={big}");
        wait_until(Duration::from_secs(60), "the line of the refused body", || {
            lines_with(&["percore_handlers::http::access", "method=POST", &big, "status=413"]).len() == 1
        }, |done| *done);

        let quiet = TestServer::start(backend, short_config(), || Outcomes);
        let path = format!("/unlogged-{backend}");
        assert_eq!(one(quiet.addr, &get(&path)).status, 200);
        drop(quiet);
        assert!(lines_with(&[&format!("target={path}")]).is_empty(), "logged with the access log off");
    }

    /// Every way a response goes out has its one line, with the status
    /// sent: pipelined, HEAD, a service error or panic, a streamed head
    /// whose client left mid-body (`incomplete=true`), a call cut off by
    /// the stop; and a request whose client left before any response,
    /// 499. A response whose whole body went out before the exchange
    /// failed (a declared length sent in full, a HEAD answer's head) is
    /// not `incomplete`.
    fn the_access_log_has_one_line_on_every_path(backend) {
        log_capture::install();
        let mut config = short_config();
        config.access_log = true;
        let mut server = TestServer::start(backend, config, || Outcomes);
        let tag = format!("every-{backend}");
        let mut c = Client::connect(server.addr);
        let head = format!("HEAD /missing?{tag}-head HTTP/1.1\r\nHost: t\r\n\r\n");
        c.send(&[get(&format!("/ok?{tag}-pipelined")), head.into_bytes()].concat());
        assert_eq!(c.response().status, 200);
        assert_eq!(c.response_to(true).status, 404);
        expect_error(server.addr, &get(&format!("/fail?{tag}-fail")), 500);
        expect_error(server.addr, &get(&format!("/panic?{tag}-panic")), 500);
        let mut left = Client::connect(server.addr);
        let streamed = format!("POST /stream-then-read?{tag}-left HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
        left.send(streamed.as_bytes());
        assert_eq!(left.response_to(true).status, 200);
        left.shutdown_write();
        left.read_to_end();
        let mut gone = Client::connect(server.addr);
        let unfinished = format!("POST /read?{tag}-gone HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
        gone.send(unfinished.as_bytes());
        gone.shutdown_write();
        gone.expect_eof();
        // Answered without its body, before the body's rest (never sent)
        // was to be dropped: the answer stands.
        let mut answered = Client::connect(server.addr);
        let unread = format!("POST /ok?{tag}-answered-gone HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
        answered.send(unread.as_bytes());
        answered.shutdown_write();
        assert_eq!(answered.response().body, b"ok");
        answered.read_to_end();
        for (case, method) in [("whole-left", "POST"), ("head-left", "HEAD")] {
            let mut c = Client::connect(server.addr);
            let request = format!("{method} /whole-then-read?{tag}-{case} HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
            c.send(request.as_bytes());
            let r = c.response_to(method == "HEAD");
            assert_eq!(r.status, 200, "{case}");
            if method == "POST" {
                assert_eq!(r.body, b"ok", "{case}");
            }
            c.shutdown_write();
            c.read_to_end();
        }
        let mut whole_fail = Client::connect(server.addr);
        whole_fail.send(&get(&format!("/whole-then-fail?{tag}-whole-fail")));
        assert_eq!(whole_fail.response().body, b"ok");
        whole_fail.read_to_end();
        let mut cut = Client::connect(server.addr);
        cut.send(&get(&format!("/slow?{tag}-cut")));
        wait_until(Duration::from_secs(60), "the slow request to be taken", || server.stats().requests == 11, |done| *done);
        server.begin_stop();
        assert_eq!(cut.response().status, 503);
        assert!(server.stop_within(Duration::from_secs(60)).is_some(), "stopped");

        let cases = [
            ("pipelined", 200),
            ("head", 404),
            ("fail", 500),
            ("panic", 500),
            ("left", 200),
            ("gone", 499),
            ("answered-gone", 200),
            ("whole-left", 200),
            ("head-left", 200),
            ("whole-fail", 200),
            ("cut", 503),
        ];
        for (case, status) in cases {
            let target = format!("?{tag}-{case} ");
            wait_until(Duration::from_secs(60), "the line", || {
                !lines_with(&["percore_handlers::http::access", &target]).is_empty()
            }, |done| *done);
            let lines = lines_with(&["percore_handlers::http::access", &target]);
            assert_eq!(lines.len(), 1, "{case}: {lines:?}");
            assert!(lines[0].contains(&format!(" status={status} ")), "{case}: {lines:?}");
            assert_eq!(lines[0].contains("incomplete=true"), case == "left", "{case}: {lines:?}");
        }
    }

    /// A target holds what the parser admits, a quote and a backslash
    /// among them: those are percent-encoded, so that a request cannot open
    /// a quoted field in the log. Raw UTF-8 (NEL or LINE SEPARATOR, which
    /// some log readers take for the end of a line) is refused with a 400
    /// before it could be logged.
    fn the_access_log_escapes_the_target(backend) {
        log_capture::install();
        let mut config = short_config();
        config.access_log = true;
        let server = TestServer::start(backend, config, || Outcomes);
        let path = format!("/esc-{backend}?q=\"\\x");
        assert_eq!(one(server.addr, &get(&path)).status, 200);
        let logged = format!("target=/esc-{backend}?q=%22%5Cx status=200");
        wait_until(Duration::from_secs(60), "the escaped line", || {
            lines_with(&["percore_handlers::http::access", &logged]).len() == 1
        }, |done| *done);
        let raw = format!("/raw-{backend}?q=\u{85}x\u{2028}é");
        assert_eq!(one(server.addr, &get(&raw)).status, 400);
        assert!(lines_with(&["\u{85}"]).is_empty(), "a raw NEL logged");
        assert!(lines_with(&["\u{2028}"]).is_empty(), "a raw LINE SEPARATOR logged");
        assert!(lines_with(&[&format!("esc-{backend}?q=\"")]).is_empty(), "a raw quote logged");
    }
}
