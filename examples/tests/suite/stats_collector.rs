//! The `stats_collector` binary on both backends: four senders at once
//! send a known stream of counters (some sampled), gauges and timings,
//! with bad lines among them; once `/metrics` has counted every datagram
//! sent, each total is checked exactly. Then its limits: an oversized
//! datagram is counted and skipped, an empty one is a datagram without
//! lines, names past `--max-names` are counted and not kept, a flood
//! from one sender leaves it answering; and SIGTERM stops it cleanly.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use percore_test_kit::http::Client;
use percore_test_kit::*;

const COLLECTOR: &str = env!("CARGO_BIN_EXE_stats_collector");

/// Senders at once, and the datagrams each sends.
const SENDERS: usize = 4;
const DATAGRAMS: usize = 200;
/// Datagrams a sender sends before waiting for the collector to have
/// counted all sent so far: UDP drops what a full socket cannot take,
/// and this keeps the queue far below its size whatever the speed.
const WINDOW: usize = 25;

/// The running collector, killed if a failed assertion leaves it running.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts the collector; its HTTP and UDP addresses, from its log line.
fn start(backend: &str, extra: &[&str]) -> (Running, SocketAddr, SocketAddr) {
    let mut child = Command::new(COLLECTOR)
        .args(["--port", "0", "--udp-port", "0", "--host", "127.0.0.1"])
        .args(["--backend", backend])
        .args(extra)
        .env("NO_COLOR", "1")
        .env_remove("PERCORE_BACKEND")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn stats_collector");
    let mut log = BufReader::new(child.stderr.take().expect("piped stderr"));
    let child = Running(child);
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            log.read_line(&mut line).expect("log") > 0,
            "stats_collector exited"
        );
        let line = strip_ansi(&line);
        if let Some(http) = parse_listening(&line) {
            let udp = line
                .split("statsd on udp ")
                .nth(1)
                .and_then(|rest| rest.split(';').next())
                .and_then(|a| a.parse().ok())
                .expect("the UDP address in the start line");
            // The rest of the log is not read: a thread drains it.
            std::thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
            return (child, http, udp);
        }
    }
}

/// `/metrics`, as name → value (labels kept in the name).
fn scrape(http: SocketAddr) -> HashMap<String, f64> {
    let mut client = Client::connect(http);
    client.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let resp = client.response_to(false);
    assert_eq!(resp.status, 200);
    String::from_utf8(resp.body)
        .expect("text")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(k, v)| (k.to_owned(), v.parse().expect("a number")))
        .collect()
}

/// Waits (a minute at most: a hang guard) until `/metrics` has counted
/// `datagrams`.
fn wait_for(http: SocketAddr, datagrams: u64) -> HashMap<String, f64> {
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        let m = scrape(http);
        let got = m["statsd_datagrams_received_total"] as u64;
        if got >= datagrams {
            assert_eq!(got, datagrams, "more datagrams counted than sent");
            return m;
        }
        assert!(
            Instant::now() < give_up,
            "{got} of {datagrams} datagrams counted after a minute"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sender `s`'s datagram `i`: a counter, a sampled counter, the sender's
/// gauge, a timing, and every tenth a bad line.
fn datagram(s: usize, i: usize) -> String {
    let mut d = format!(
        "hits:1|c\nsampled:1|c|@0.5\ngauge.{s}:{i}|g\nlatency:{}|ms\n",
        i % 50
    );
    if i % 10 == 0 {
        d.push_str("not a line\n");
    }
    d
}

fn stop(mut child: Running, backend: &str) {
    // SAFETY: `kill` only signals the child's pid, ours until reaped below.
    unsafe { libc::kill(child.0.id() as libc::pid_t, libc::SIGTERM) };
    let status = wait_timeout(&mut child.0, Duration::from_secs(60))
        .unwrap_or_else(|| panic!("{backend}: SIGTERM did not stop stats_collector"));
    assert!(status.success(), "{backend}: exited with {status}");
}

backend_process_tests! {
    /// Four concurrent senders' totals, exactly.
    fn stats_collector_totals_are_exact(backend) {
        let (child, http, udp) = start(backend, &[]);
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let senders: Vec<_> = (0..SENDERS)
            .map(|s| {
                let sent = sent.clone();
                std::thread::spawn(move || {
                    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
                    for window in 0..DATAGRAMS / WINDOW {
                        for i in window * WINDOW..(window + 1) * WINDOW {
                            socket.send_to(datagram(s, i).as_bytes(), udp).expect("send");
                        }
                        let so_far = sent.fetch_add(WINDOW as u64, std::sync::atomic::Ordering::SeqCst);
                        // Paced: at most every sender's window in flight.
                        let _ = wait_until_counted(http, so_far + WINDOW as u64);
                    }
                })
            })
            .collect();
        for sender in senders {
            sender.join().expect("sender");
        }
        let total = (SENDERS * DATAGRAMS) as u64;
        let m = wait_for(http, total);
        let n = total as f64;
        assert_eq!(m["statsd_lines_total"], n * 4.0 + (SENDERS * DATAGRAMS / 10) as f64);
        assert_eq!(m["statsd_bad_lines_total"], (SENDERS * DATAGRAMS / 10) as f64);
        assert_eq!(m["statsd_counter_total{name=\"hits\"}"], n);
        assert_eq!(m["statsd_counter_total{name=\"sampled\"}"], n * 2.0);
        for s in 0..SENDERS {
            // One sender's datagrams reach one core, in order.
            assert_eq!(m[&format!("statsd_gauge{{name=\"gauge.{s}\"}}")], (DATAGRAMS - 1) as f64);
        }
        let per_sender: f64 = (0..DATAGRAMS).map(|i| (i % 50) as f64).sum();
        assert_eq!(m["statsd_timing_ms_count{name=\"latency\"}"], n);
        assert_eq!(m["statsd_timing_ms_sum{name=\"latency\"}"], per_sender * SENDERS as f64);
        assert_eq!(m["statsd_timing_ms_min{name=\"latency\"}"], 0.0);
        assert_eq!(m["statsd_timing_ms_max{name=\"latency\"}"], 49.0);
        stop(child, backend);
    }

    /// Oversized and empty datagrams, names past the limit, and a flood
    /// from one sender: each counted, none a crash, and the collector
    /// still counts what comes after.
    fn stats_collector_limits(backend) {
        let (child, http, udp) = start(backend, &["--max-datagram", "1000", "--max-names", "3"]);
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let long = "x:1|c\n".repeat(300); // 1,800 bytes
        socket.send_to(long.as_bytes(), udp).expect("send long");
        socket.send_to(b"", udp).expect("send empty");
        socket.send_to(b"a:1|c\nb:1|g\nc:1|ms\nd:1|c\na:1|c", udp).expect("send names");
        let m = wait_for(http, 3);
        assert_eq!(m["statsd_truncated_datagrams_total"], 1.0);
        assert_eq!(m["statsd_lines_total"], 5.0, "the long datagram's lines are skipped");
        assert_eq!(m["statsd_names_over_limit_total"], 1.0);
        assert_eq!(m["statsd_counter_total{name=\"a\"}"], 2.0);
        assert!(!m.contains_key("statsd_counter_total{name=\"d\"}"));
        // A flood: as fast as one socket sends, unpaced. The kernel drops
        // what a full socket cannot take; the collector counts what it
        // got, never more, and keeps answering: another sender's gauge
        // change is seen.
        let flood = 20_000u64;
        for _ in 0..flood {
            let _ = socket.send_to(b"a:1|c", udp);
        }
        let other = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let give_up = Instant::now() + Duration::from_secs(60);
        let m = loop {
            other.send_to(b"b:7|g", udp).expect("send after the flood");
            let m = scrape(http);
            if m["statsd_gauge{name=\"b\"}"] == 7.0 {
                break m;
            }
            assert!(Instant::now() < give_up, "the gauge change was not seen for a minute");
            std::thread::sleep(Duration::from_millis(20));
        };
        let flooded = m["statsd_counter_total{name=\"a\"}"] - 2.0;
        assert!(flooded <= flood as f64, "{flooded} of a flood of {flood} counted");
        assert_eq!(m["statsd_names_over_limit_total"], 1.0, "no new name was kept");
        stop(child, backend);
    }
}

/// Waits until `/metrics` counts `datagrams`, without asserting the
/// count is exact (other senders add theirs meanwhile).
fn wait_until_counted(http: SocketAddr, datagrams: u64) -> u64 {
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        let got = scrape(http)["statsd_datagrams_received_total"] as u64;
        if got >= datagrams || Instant::now() >= give_up {
            return got;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}
