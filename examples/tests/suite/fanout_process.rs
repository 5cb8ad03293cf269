//! The `fanout` binary as an operator runs it, in a child process, on both
//! backends: `--stats` prints each core's proxy counters every second, not
//! only in the stop summary; and pointed at itself it warns at start-up and
//! answers the sub-requests that come back 508 at once instead of looping
//! until its deadline.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use percore_test_kit::*;

const FANOUT: &str = env!("CARGO_BIN_EXE_fanout");
const HTTP_ECHO: &str = env!("CARGO_BIN_EXE_http_echo");

fn cmd(bin: &str, backend: &str, args: &[&str]) -> Command {
    server_command(bin, backend, args)
}

fn start(cmd: Command) -> ChildServer {
    ChildServer::spawn(cmd, Duration::from_secs(60))
        .unwrap_or_else(|f| panic!("did not start: {f:?}"))
}

/// Stops the child with SIGTERM; it must exit 0. Returns its log.
fn stop(child: ChildServer) -> String {
    child.signal(libc::SIGTERM);
    let (status, log) = child.wait(Duration::from_secs(60));
    assert!(status.success(), "exited with {status}:\n{log}");
    log
}

/// One `GET path` on a connection of its own (`Connection: close`): the
/// status and the body.
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("send");
    let mut bytes = Vec::new();
    s.read_to_end(&mut bytes).expect("read the response");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

/// The value of `key` in a `key=value` line.
fn field(line: &str, key: &str) -> u64 {
    let prefix = format!("{key}=");
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(&prefix))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
}

/// Waits up to a minute (a hang guard) for a periodic proxy line (`TIME stats cpu=N fanout ...`)
/// showing `requests` fanned-out requests; returns it.
fn proxy_stats_line(child: &ChildServer, requests: u64) -> String {
    let wanted = format!(" fanout requests={requests} ");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let log = child.log();
        let line = log
            .lines()
            .rfind(|l| l.contains(" stats cpu=") && l.contains(&wanted));
        if let Some(line) = line {
            return line.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no periodic line with{wanted}:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A port free a moment ago: for the one test that must know the proxy's
/// port before it starts (its own upstream).
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

backend_process_tests! {
    fn stats_lines_carry_the_proxy_counters(backend) {
        // 1. Three GETs at width 2 through one upstream: six sub-requests,
        // over two pooled connections.
        let echo = start(cmd(HTTP_ECHO, backend, &["--port", "0"]));
        let upstream = echo.addr.to_string();
        let px = start(cmd(
            FANOUT,
            backend,
            &[
                "--port",
                "0",
                "--stats",
                "--width",
                "2",
                "--upstream",
                &upstream,
            ],
        ));
        for i in 0..3 {
            let (status, body) = get(px.addr, &format!("/s{i}"));
            assert_eq!(status, 200, "{backend}: {body}");
        }
        let line = proxy_stats_line(&px, 3);
        println!("{backend}: {line}");
        assert_eq!(field(&line, "failed"), 0, "{line}");
        assert_eq!(field(&line, "sub_requests"), 6, "{line}");
        let (connects, reuses) = (field(&line, "connects"), field(&line, "reuses"));
        assert!(
            connects >= 1 && connects + reuses == 6,
            "every sub-request on a new or a pooled connection: {line}"
        );
        assert_eq!(field(&line, "errors_connect"), 0, "{line}");
        // It follows its core's own line.
        let log = px.log();
        // After the time, as the log's own lines give it.
        let at = line.split_whitespace().next().unwrap_or_default();
        assert!(at.contains('T') && at.ends_with('Z'), "{line}");
        let cpu = line.split_whitespace().nth(2).expect("cpu=N");
        assert!(
            log.lines()
                .any(|l| l.contains(&format!(" stats {cpu} backend={backend}"))),
            "{log}"
        );
        stop(px);
        stop(echo);

        // 2. An upstream that refuses: each GET fails with 502, counted
        // as failed, by its reason.
        let dead = TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .to_string();
        let px = start(cmd(
            FANOUT,
            backend,
            &["--port", "0", "--stats", "--upstream", &dead],
        ));
        for _ in 0..2 {
            assert_eq!(get(px.addr, "/dead").0, 502);
        }
        let line = proxy_stats_line(&px, 2);
        println!("{backend}: {line}");
        assert_eq!(field(&line, "failed"), 2, "{line}");
        assert_eq!(field(&line, "failed_504"), 0, "{line}");
        assert_eq!(field(&line, "errors_connect"), 2, "{line}");
        assert_eq!(field(&line, "sub_requests"), 0, "{line}");
        stop(px);
    }

    fn pointed_at_itself_it_warns_and_answers_at_once(backend) {
        // The port is found free, then taken by the proxy: retried if
        // something else took it in between.
        let mut started = None;
        for _ in 0..3 {
            let port = free_port().to_string();
            let me = format!("127.0.0.1:{port}");
            let args = ["--port", &port, "--upstream", &me, "--timeout-ms", "10000"];
            if let Ok(child) =
                ChildServer::spawn(cmd(FANOUT, backend, &args), Duration::from_secs(60))
            {
                started = Some((child, me));
                break;
            }
        }
        let (px, me) = started.expect("fanout started on a free port");
        assert!(
            px.wait_for_log(
                &format!("--upstream {me} is this proxy's own address"),
                Duration::from_secs(60)
            ),
            "{backend}: no start-up warning:\n{}",
            px.log()
        );
        // A 200 holding the 508 at all shows the loop was cut at once: a
        // request fanned out again would wait for the deadline.
        let (status, body) = get(px.addr, "/me");
        assert_eq!(status, 200, "{backend}: {body}");
        assert!(body.contains("\"status\":508"), "{backend}: {body}");
        assert!(body.contains("loop detected"), "{backend}: {body}");
        let log = stop(px);
        assert!(log.contains("loop detected"), "{backend}: {log}");
        let summary = log
            .lines()
            .find(|l| l.contains("fanout requests="))
            .unwrap_or_else(|| panic!("{backend}: no stop summary:\n{log}"));
        assert_eq!(field(summary, "requests"), 1, "{summary}");
        assert_eq!(field(summary, "loops"), 1, "{summary}");
    }
}
