//! Three `http_echo` instances behind a real HAProxy, as three hosts:
//! each in a network namespace of its own with its own address, HAProxy
//! run with `docs/fleet/haproxy.cfg` (health checks on `/readyz`, retries
//! on connect failures only, keep-alive to the instances), load from wrk
//! through it. On both backends:
//!
//! - a rolling restart of every instance with `--take-over`: no socket
//!   error and no non-2xx answer;
//! - one instance stopped gracefully: HAProxy sees it unready (a 503 from
//!   `/readyz`) and takes it out, no error;
//! - one instance killed with SIGKILL: errors only for requests sent to
//!   it (closed client connections, no 5xx, no other server failing),
//!   HAProxy marks it down, and once restarted it rejoins and serves
//!   again.
//!
//! Every verdict is a count or a state; waits are hang detectors.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use percore_test_kit::*;

const HTTP_ECHO: &str = env!("CARGO_BIN_EXE_http_echo");
const HAPROXY_CFG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/fleet/haproxy.cfg");
const LIMIT: Duration = Duration::from_secs(60);
/// wrk's connections: the most requests in flight at once.
const CONNECTIONS: u64 = 8;

/// Three hosts, an instance on each, and HAProxy in front.
struct Fleet {
    backend: &'static str,
    instances: Vec<Option<ChildServer>>,
    haproxy: Haproxy,
    front: std::net::SocketAddr,
    // Dropped last: the namespaces outlive the processes in them.
    hosts: Hosts,
}

impl Fleet {
    fn start(backend: &'static str, unready_ms: u64) -> Option<Fleet> {
        if !installed("haproxy") || !installed("wrk") {
            return None;
        }
        let hosts = Hosts::make(3)?;
        let instances = (0..3)
            .map(|i| Some(instance(&hosts, i, backend, unready_ms, false)))
            .collect();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let front = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let mut env = vec![("APP_BIND", front.to_string())];
        for (i, name) in ["APP1", "APP2", "APP3"].into_iter().enumerate() {
            env.push((name, format!("{}:8080", hosts.addr(i))));
        }
        let haproxy = Haproxy::start(std::path::Path::new(HAPROXY_CFG), &env)?;
        let fleet = Fleet {
            backend,
            instances,
            haproxy,
            front,
            hosts,
        };
        for i in 0..3 {
            fleet.wait_status(i, "UP");
        }
        Some(fleet)
    }

    /// Waits until HAProxy reports server `i` in `status`; its row.
    fn wait_status(&self, i: usize, status: &str) -> StatRow {
        let name = format!("app{}", i + 1);
        let deadline = Instant::now() + LIMIT;
        loop {
            let row = self.haproxy.server(&name);
            if row.status == status {
                return row;
            }
            assert!(
                Instant::now() < deadline,
                "{name} not {status}: {row:?}\n{}",
                self.haproxy.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn take(&mut self, i: usize) -> ChildServer {
        self.instances[i].take().expect("instance running")
    }
}

/// `http_echo` on host `i`: the service on 8080, the admin port on 9100.
fn instance(
    hosts: &Hosts,
    i: usize,
    backend: &str,
    unready_ms: u64,
    take_over: bool,
) -> ChildServer {
    let addr = hosts.addr(i).to_string();
    let mut cmd = hosts.command(i, HTTP_ECHO);
    cmd.args([
        "--host",
        &addr,
        "--port",
        "8080",
        "--admin",
        "9100",
        "--admin-host",
        &addr,
    ])
    .args(["--cores", &(i % 2).to_string(), "--backend", backend])
    .args([
        "--unready-ms",
        &unready_ms.to_string(),
        "--drain-ms",
        "10000",
    ])
    .env("RUST_LOG", "info")
    .env_remove("PERCORE_BACKEND")
    .env_remove("PERCORE_FAULT");
    if take_over {
        cmd.arg("--take-over");
    }
    ChildServer::spawn(cmd, LIMIT).unwrap_or_else(|f| panic!("instance {i} did not start: {f:?}"))
}

/// Stops an instance with SIGTERM; it must exit cleanly.
fn stop(server: ChildServer) {
    server.signal(libc::SIGTERM);
    let (status, log) = server.wait(LIMIT);
    assert!(status.success(), "{status}: {log}");
}

/// wrk through HAProxy until stopped.
struct Load(Child);

/// What wrk saw.
#[derive(Debug, Default)]
struct Seen {
    requests: u64,
    socket_errors: u64,
    non_2xx: u64,
}

impl Load {
    fn start(front: std::net::SocketAddr) -> Load {
        let child = Command::new("wrk")
            .args([
                "-t1",
                &format!("-c{CONNECTIONS}"),
                "-d60s",
                &format!("http://{front}/hello"),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("wrk");
        Load(child)
    }

    /// Lets it run `for_` more, stops it (SIGINT: it prints its totals).
    fn finish(self, for_: Duration) -> Seen {
        std::thread::sleep(for_);
        // SAFETY: kill(2) on the pid of the wrk child this test spawned.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGINT) };
        let out = self.0.wait_with_output().expect("wrk output");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let number = |s: &str| s.trim().trim_end_matches(',').parse::<u64>().unwrap_or(0);
        let mut seen = Seen::default();
        for line in text.lines() {
            let line = line.trim();
            if let Some(n) = line
                .split(" requests in ")
                .next()
                .filter(|_| line.contains(" requests in "))
            {
                seen.requests = number(n);
            } else if let Some(rest) = line.strip_prefix("Socket errors:") {
                seen.socket_errors = rest
                    .split(',')
                    .map(|f| number(f.split_whitespace().last().unwrap_or("0")))
                    .sum();
            } else if let Some(n) = line.strip_prefix("Non-2xx or 3xx responses:") {
                seen.non_2xx = number(n);
            }
        }
        assert!(seen.requests > 0, "wrk sent nothing: {text}");
        if let Some(errors) = text.lines().find(|l| l.contains("Socket errors")) {
            println!("wrk: {}", errors.trim());
        }
        println!("wrk: {seen:?}");
        seen
    }
}

backend_process_tests! {
    /// Every instance replaced in turn with `--take-over` under load: no
    /// socket error, no non-2xx answer.
    fn rolling_restart_loses_nothing(backend) {
        let Some(mut fleet) = Fleet::start(backend, 1000) else { return };
        let load = Load::start(fleet.front);
        std::thread::sleep(Duration::from_millis(500));
        for i in 0..3 {
            let new = instance(&fleet.hosts, i, fleet.backend, 1000, true);
            let old = fleet.take(i);
            stop(old);
            fleet.instances[i] = Some(new);
            fleet.wait_status(i, "UP");
        }
        let seen = load.finish(Duration::from_millis(500));
        assert_eq!((seen.socket_errors, seen.non_2xx), (0, 0), "{seen:?}\n{}", fleet.haproxy.log());
    }

    /// One instance stopped gracefully: `/readyz` answers 503 while it
    /// serves on, HAProxy takes it out on that (L7STS), and no request
    /// fails.
    fn graceful_stop_is_drained_first(backend) {
        // HAProxy needs two failed checks 250 ms apart to take it out:
        // ten seconds of unready service leave it forty times that, on a
        // machine as loaded as it may be.
        let Some(mut fleet) = Fleet::start(backend, 10_000) else { return };
        let load = Load::start(fleet.front);
        std::thread::sleep(Duration::from_millis(500));
        let leaving = fleet.take(1);
        leaving.signal(libc::SIGTERM);
        let row = fleet.wait_status(1, "DOWN");
        // HAProxy marks a check that is running as it reads the stats
        // with "* " before the last result.
        let last_check = row.check_status.trim_start_matches("* ");
        assert_eq!(last_check, "L7STS", "taken out for another reason than /readyz: {row:?}");
        let (status, log) = leaving.wait(LIMIT);
        assert!(status.success(), "{status}: {log}");
        let seen = load.finish(Duration::from_millis(500));
        assert_eq!((seen.socket_errors, seen.non_2xx), (0, 0), "{seen:?}\n{}", fleet.haproxy.log());
    }

    /// One instance killed: only requests in flight on it fail, HAProxy
    /// marks it down, and restarted it rejoins and gets traffic.
    fn killed_instance_is_marked_down_and_rejoins(backend) {
        let Some(mut fleet) = Fleet::start(backend, 1000) else { return };
        let load = Load::start(fleet.front);
        std::thread::sleep(Duration::from_millis(1000));
        let killed = fleet.take(2);
        killed.signal(libc::SIGKILL);
        let _ = killed.wait(LIMIT);
        let row = fleet.wait_status(2, "DOWN");
        let seen = load.finish(Duration::from_millis(500));
        let failed = seen.socket_errors + seen.non_2xx;
        let killed_row = fleet.haproxy.server("app3");
        println!("killed instance: {failed} failed requests ({seen:?}), HAProxy: {row:?} then {killed_row:?}");
        // Each failure is a request HAProxy had sent to the killed
        // instance: in flight at the kill, or put on one of its kept-alive
        // connections (in use or idle in HAProxy's pool) before HAProxy
        // saw that connection reset. HAProxy cannot know whether such a
        // request ran, so it does not retry it: it counts a response
        // error against the killed instance and closes the client's
        // connection (a read error for wrk; wrk also counts one for a
        // kept-alive connection HAProxy closes between two requests) or,
        // when the reset comes before any byte of the answer, answers 502
        // itself. So failures are bounded by the connections on either
        // side (wrk's in flight, and as many of HAProxy's, in use and
        // idle), twice over for the closes between requests: one more
        // would be a request that failed for another reason. No other
        // server failed, and no request hung.
        assert!(
            killed_row.errors_response > 0 || failed == 0,
            "failures with no error on the killed instance: {seen:?}\n{killed_row:?}"
        );
        assert!(
            failed <= 4 * CONNECTIONS,
            "more failures than requests the killed instance held: {seen:?}\n{killed_row:?}\n{}",
            fleet.haproxy.log()
        );
        for other in ["app1", "app2"] {
            let r = fleet.haproxy.server(other);
            assert_eq!(
                (r.errors_connect, r.errors_response, r.responses_5xx),
                (0, 0, 0),
                "{r:?}\n{}",
                fleet.haproxy.log()
            );
        }
        fleet.instances[2] = Some(instance(&fleet.hosts, 2, fleet.backend, 1000, false));
        fleet.wait_status(2, "UP");
        let before = fleet.haproxy.server("app3").responses_2xx;
        let load = Load::start(fleet.front);
        let seen = load.finish(Duration::from_millis(1500));
        assert_eq!((seen.socket_errors, seen.non_2xx), (0, 0), "{seen:?}\n{}", fleet.haproxy.log());
        let after = fleet.haproxy.server("app3").responses_2xx;
        assert!(
            after > before,
            "the restarted instance got no traffic: {before} -> {after}\n{}",
            fleet.haproxy.log()
        );
    }
}
