//! The cookbook's recipes (docs/cookbook.md) as a reader runs them, in a
//! child process on both backends, each checked by its answers.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use percore_test_kit::*;

/// A hang detector, not a speed limit.
const HANG: Duration = Duration::from_secs(60);

fn start(bin: &str, backend: &str, args: &[&str]) -> ChildServer {
    let mut cmd = server_command(bin, backend, &["--port", "0"]);
    cmd.args(args);
    ChildServer::spawn(cmd, HANG).unwrap_or_else(|f| panic!("{bin} did not start: {f:?}"))
}

fn stop(child: ChildServer) -> String {
    child.signal(libc::SIGTERM);
    let (status, log) = child.wait(HANG);
    assert!(status.success(), "exited with {status}:\n{log}");
    log
}

/// One request on a connection of its own: the status and the body.
fn call(addr: SocketAddr, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(HANG)).expect("timeout");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
    match body {
        Some(body) => req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )),
        None => req.push_str("\r\n"),
    }
    s.write_all(req.as_bytes()).expect("send");
    let mut bytes = Vec::new();
    s.read_to_end(&mut bytes).expect("read the response");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_owned())
}

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    call(addr, "GET", path, None)
}

backend_process_tests! {
    /// Shared state counts every core's requests; per-core state counts
    /// each core's own, 1, 2, 3...; the map owned by core 0 answers the
    /// same from either core.
    fn state_shared_per_core_and_owned(backend) {
        let server = start(env!("CARGO_BIN_EXE_cookbook_state"), backend, &["--cores", "0,1"]);
        let a = server.addr;
        for n in 1..=20 {
            assert_eq!(get(a, "/shared"), (200, format!("hello: request {n} of all cores\n")));
        }
        let mut seen = std::collections::HashMap::<String, u64>::new();
        for _ in 0..20 {
            let (status, body) = get(a, "/local");
            assert_eq!(status, 200);
            let (n, core) = body.trim().strip_prefix("request ").unwrap().split_once(" of core ").unwrap();
            let last = seen.entry(core.to_owned()).or_default();
            *last += 1;
            assert_eq!(n.parse::<u64>().unwrap(), *last, "{body}");
        }
        for i in 0..10 {
            let path = format!("/owned/k{i}");
            assert_eq!(call(a, "PUT", &path, Some(&format!("v{i}"))).0, 204);
        }
        for i in 0..10 {
            assert_eq!(get(a, &format!("/owned/k{i}")), (200, format!("v{i}")));
        }
        assert_eq!(get(a, "/owned/none").0, 404);
        stop(server);
    }

    /// Create, list, read, replace and delete, and every error a JSON body.
    fn crud_with_json_errors(backend) {
        let server = start(env!("CARGO_BIN_EXE_cookbook_crud"), backend, &[]);
        let a = server.addr;
        assert_eq!(call(a, "POST", "/items", Some(r#"{"name":"pen"}"#)), (201, r#"{"id":1,"name":"pen"}"#.into()));
        assert_eq!(call(a, "POST", "/items", Some(r#"{"name":"cup"}"#)), (201, r#"{"id":2,"name":"cup"}"#.into()));
        assert_eq!(get(a, "/items"), (200, r#"[{"id":1,"name":"pen"},{"id":2,"name":"cup"}]"#.into()));
        assert_eq!(call(a, "PUT", "/items/1", Some(r#"{"name":"ink"}"#)), (200, r#"{"id":1,"name":"ink"}"#.into()));
        assert_eq!(get(a, "/items/1"), (200, r#"{"id":1,"name":"ink"}"#.into()));
        assert_eq!(call(a, "DELETE", "/items/1", None), (204, String::new()));
        assert_eq!(get(a, "/items/1"), (404, r#"{"error":"no item 1","status":404}"#.into()));
        assert_eq!(call(a, "PUT", "/items/9", Some(r#"{"name":"x"}"#)), (404, r#"{"error":"no item 9","status":404}"#.into()));
        assert_eq!(call(a, "POST", "/items", Some(r#"{"name":""}"#)), (422, r#"{"error":"name must be 1 to 100 bytes","status":422}"#.into()));
        let (status, body) = call(a, "POST", "/items", Some("{"));
        assert_eq!(status, 400);
        let error: serde_json::Value = serde_json::from_str(&body).expect("a JSON error body");
        assert!(error["error"].as_str().unwrap().contains("invalid JSON"), "{body}");
        let (status, body) = get(a, "/items/x");
        assert_eq!(status, 400);
        assert!(body.starts_with(r#"{"error":"#), "{body}");
        assert_eq!(call(a, "PATCH", "/items/2", None).0, 405);
        assert_eq!(get(a, "/nowhere"), (404, r#"{"error":"Not Found","status":404}"#.into()));
        stop(server);
    }

    /// The certificate's files replaced on disk: new handshakes get the
    /// new certificate, without a restart; files that do not load keep
    /// the one in use.
    fn https_certificate_reloads_from_disk(backend) {
        let Some(certs) = TestCert::new("cookbook-reload") else { return };
        let Some(_) = curl(&["--version"]) else { return };
        let (cert, key) = (certs.dir.join("served.pem"), certs.dir.join("served.key"));
        std::fs::copy(&certs.cert, &cert).unwrap();
        std::fs::copy(&certs.key, &key).unwrap();
        let args = ["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()];
        let server = start(env!("CARGO_BIN_EXE_cookbook_https_reload"), backend, &args);
        let port = server.addr.port();
        let ca = certs.ca.to_str().unwrap().to_owned();
        // curl's exit status and body for `https://NAME:PORT/`.
        let fetch = |name: &str| {
            let resolve = format!("{name}:{port}:127.0.0.1");
            let url = format!("https://{name}:{port}/");
            let out = curl(&["--cacert", &ca, "--resolve", &resolve, &url]).expect("curl");
            (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
        };
        assert_eq!(fetch("localhost"), (Some(0), "hello over TLS\n".into()));
        assert_ne!(fetch("reloaded.test").0, Some(0), "the new name before the reload");

        let (new_cert, new_key) = certs.other("reloaded.test");
        replace(&new_key, &key);
        replace(&new_cert, &cert);
        let started = Instant::now();
        while fetch("reloaded.test").0 != Some(0) {
            assert!(started.elapsed() < HANG, "not reloaded:\n{}", server.log());
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(fetch("reloaded.test"), (Some(0), "hello over TLS\n".into()));
        assert_ne!(fetch("localhost").0, Some(0), "the old name after the reload");

        // A refusal may already be logged: a key replaced before its
        // certificate does not match the old one.
        let refusals = || server.log().matches("certificate not reloaded").count();
        let before = refusals();
        std::fs::write(&cert, "not a certificate\n").unwrap();
        let started = Instant::now();
        while refusals() == before {
            assert!(started.elapsed() < HANG, "no refusal logged:\n{}", server.log());
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(fetch("reloaded.test"), (Some(0), "hello over TLS\n".into()));
        stop(server);
    }

    /// Each request logs one JSON line with its fields; `/metrics` has the
    /// framework's, the HTTP layer's and the program's own counters.
    fn observability_json_logs_and_metrics(backend) {
        let server = start(env!("CARGO_BIN_EXE_cookbook_observability"), backend, &["--admin", "0"]);
        // The listening line reaches the log just after the address does.
        assert!(server.wait_for_log("(admin on ", HANG), "{}", server.log());
        let log = server.log();
        let admin: SocketAddr = log
            .split("(admin on ")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("no admin address in {log}"));
        assert_eq!(get(server.addr, "/hello/ann"), (200, "hello, ann\n".into()));
        assert_eq!(get(server.addr, "/hello/bo"), (200, "hello, bo\n".into()));
        assert!(server.wait_for_log("\"bo\"", HANG), "{}", server.log());
        let greeted: Vec<serde_json::Value> = server
            .log()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
            .filter(|line: &serde_json::Value| line["fields"]["message"] == "greeted")
            .collect();
        assert_eq!(greeted.len(), 2, "{greeted:?}");
        assert_eq!(greeted[0]["fields"]["name"], "ann");
        assert_eq!(greeted[0]["level"], "INFO");
        assert!(greeted[0]["fields"]["core"].is_u64(), "{greeted:?}");

        let (status, metrics) = get(admin, "/metrics");
        assert_eq!(status, 200);
        assert!(metrics.contains("\napp_greetings_total 2\n"), "{metrics}");
        assert!(metrics.contains("\npercore_ready 1\n"), "{metrics}");
        assert!(metrics.contains("# TYPE percore_http_"), "{metrics}");
        assert_eq!(get(admin, "/healthz"), (200, "ok\n".into()));
        assert_eq!(get(admin, "/nowhere").0, 404);
        stop(server);
    }
}

/// Replaces `to` by a copy of `from` in one rename, as a deployment
/// tool does.
fn replace(from: &Path, to: &Path) {
    let tmp = to.with_extension("tmp");
    std::fs::copy(from, &tmp).unwrap();
    std::fs::rename(&tmp, to).unwrap();
}

/// The PostgreSQL recipe (feature `postgres`), with a database of its own.
#[cfg(feature = "postgres")]
mod postgres {
    use super::*;

    backend_process_tests! {
        /// Notes written and read through each core's client; a stopped
        /// database is a 503, not a dropped connection.
        fn postgres_client_per_core(backend) {
            let Some(pg) = Postgres::start() else { return };
            let config = pg.config();
            let server = start(
                env!("CARGO_BIN_EXE_cookbook_postgres"),
                backend,
                &["--cores", "0,1", "--database", &config],
            );
            let a = server.addr;
            for i in 1..=10 {
                assert_eq!(call(a, "POST", "/notes", Some(&format!("note {i}"))), (201, format!("{i}\n")));
            }
            for i in 1..=10 {
                assert_eq!(get(a, &format!("/notes/{i}")), (200, format!("note {i}")));
            }
            assert_eq!(get(a, "/notes/99").0, 404);
            drop(pg);
            let (status, body) = get(a, "/notes/1");
            assert_eq!(status, 503, "{body}");
            assert!(body.contains("database unavailable"), "{body}");
            stop(server);
        }
    }
}
