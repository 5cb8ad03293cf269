//! `http_echo --admin` as an operator scrapes it, on both backends: the
//! scrape passes `promtool check metrics`, and a real Prometheus that
//! scrapes it (with `docs/fleet/prometheus.yml`) finds the HTTP response
//! counters and the latency histogram matching the requests sent.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use percore_test_kit::http::Client;
use percore_test_kit::*;

const HTTP_ECHO: &str = env!("CARGO_BIN_EXE_http_echo");
const PROMETHEUS_YML: &str = include_str!("../../../docs/fleet/prometheus.yml");
const LIMIT: Duration = Duration::from_secs(60);

/// `http_echo` on one core with an admin port; returns it and the admin
/// address.
fn start(backend: &str) -> (ChildServer, SocketAddr) {
    let mut cmd = Command::new(HTTP_ECHO);
    cmd.args([
        "--port",
        "0",
        "--admin",
        "0",
        "--cores",
        "0",
        "--backend",
        backend,
        "--steer",
        "--move-connections",
    ])
    .env("RUST_LOG", "info")
    .env_remove("PERCORE_BACKEND")
    .env_remove("PERCORE_FAULT");
    let server = ChildServer::spawn(cmd, LIMIT).unwrap_or_else(|f| panic!("did not start: {f:?}"));
    assert!(
        server.wait_for_log("admin on http://", LIMIT),
        "{}",
        server.log()
    );
    let log = server.log();
    let admin = log
        .split("admin on http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|addr| addr.parse().ok())
        .unwrap_or_else(|| panic!("no admin address in {log}"));
    (server, admin)
}

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut client = Client::connect(addr);
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n");
    let resp = client.roundtrip(request.as_bytes());
    (
        resp.status,
        String::from_utf8_lossy(&resp.body).into_owned(),
    )
}

/// Sends `n` requests on one kept-alive connection, each answered 200.
fn send(addr: SocketAddr, n: usize) {
    let mut client = Client::connect(addr);
    for _ in 0..n {
        let resp = client.roundtrip(b"GET /hello HTTP/1.1\r\nHost: test\r\n\r\n");
        assert_eq!(resp.status, 200);
    }
}

backend_process_tests! {
    /// The scrape is valid exposition text with every family, the health
    /// answers are right, and the histogram counts the requests.
    fn scrape_passes_promtool(backend) {
        let (server, admin) = start(backend);
        send(server.addr, 25);
        assert_eq!(get(admin, "/healthz"), (200, "ok\n".to_owned()));
        assert_eq!(get(admin, "/readyz"), (200, "ready\n".to_owned()));
        assert_eq!(get(admin, "/nowhere").0, 404);
        let (status, text) = get(admin, "/metrics");
        assert_eq!(status, 200);
        for line in [
            "percore_http_responses_total{core=\"0\",class=\"2xx\"} 25",
            "percore_http_request_duration_seconds_count{core=\"0\"} 25",
            "percore_http_request_duration_seconds_bucket{core=\"0\",le=\"+Inf\"} 25",
            "percore_ready 1",
            // One core: it draws every connection.
            "percore_steering_active 1",
            "percore_steering_weight{core=\"0\"} 1",
        ] {
            assert!(text.contains(line), "no {line:?} in:\n{text}");
        }
        let info = format!("percore_core_info{{core=\"0\",backend=\"{backend}\"");
        assert!(text.contains(&info), "{text}");
        for family in ["process_open_fds", "process_resident_memory_bytes", "percore_uptime_seconds",
                       "percore_cpu_seconds_total", "percore_listener_connections_accepted_total",
                       "percore_stalls_total", "percore_stall_duration_seconds_count",
                       "percore_steering_attaches_total", "percore_connections_moved_in_total",
                       "percore_connections_moved_out_total",
                       "percore_connection_moves_refused_total"] {
            assert!(text.contains(&format!("\n{family}")), "no {family} in:\n{text}");
        }
        if installed("promtool") {
            let mut check = Command::new("promtool")
                .args(["check", "metrics"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("promtool");
            use std::io::Write;
            check.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("write");
            let out = check.wait_with_output().expect("promtool");
            assert!(
                out.status.success(),
                "promtool: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        server.signal(libc::SIGTERM);
        let (status, log) = server.wait(LIMIT);
        assert!(status.success(), "{status}: {log}");
    }

    /// A real Prometheus scrapes the admin port; its HTTP API then holds
    /// the counters and histogram of exactly the requests sent.
    fn prometheus_scrapes_the_counters(backend) {
        let (server, admin) = start(backend);
        let config = PROMETHEUS_YML
            .replace("scrape_interval: 15s", "scrape_interval: 200ms")
            .replace("scrape_timeout: 5s", "scrape_timeout: 200ms")
            .replace(
                r#"["10.0.0.11:9100", "10.0.0.12:9100", "10.0.0.13:9100"]"#,
                &format!("[\"{admin}\"]"),
            );
        assert!(config.contains(&admin.to_string()), "{config}");
        let Some(prometheus) = Prometheus::start(&config) else {
            return;
        };
        const SENT: usize = 40;
        send(server.addr, SENT);
        let expect = |query: &str, want: f64| {
            let deadline = std::time::Instant::now() + LIMIT;
            loop {
                let last = prometheus.query(query);
                if last == Some(want) {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{query}: {last:?}, not {want}; prometheus log:\n{}",
                    prometheus.log()
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        };
        expect("sum(percore_http_responses_total{job=\"percore\",class=\"2xx\"})", SENT as f64);
        expect("sum(percore_http_request_duration_seconds_count{job=\"percore\"})", SENT as f64);
        expect("sum(percore_http_request_duration_seconds_bucket{job=\"percore\",le=\"+Inf\"})", SENT as f64);
        expect("count(percore_http_request_duration_seconds_bucket{job=\"percore\"}) > 40", 44.0);
        expect("percore_ready{job=\"percore\"}", 1.0);
        expect("up{job=\"percore\"}", 1.0);
        drop(prometheus);
        server.signal(libc::SIGTERM);
        let (status, log) = server.wait(LIMIT);
        assert!(status.success(), "{status}: {log}");
    }
}
