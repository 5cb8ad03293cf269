//! `http_echo --unix PATH` as an operator runs it behind nginx, on both
//! backends: curl straight to the socket (`--unix-socket`), curl and a
//! short wrk run through nginx (`proxy_pass http://unix:PATH:`) with every
//! answer a 200, and the socket file gone after the stop.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use percore_test_kit::*;

const HTTP_ECHO: &str = env!("CARGO_BIN_EXE_http_echo");
const HELLO: &str = r#"{"message":"Hello!"}"#;

/// Starts `http_echo` on a free TCP port and on a socket file.
fn start(backend: &str, name: &str) -> (ChildServer, PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "percore-unix-{}-{backend}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("socket directory");
    let path = dir.join("http.sock");
    let mut cmd = Command::new(HTTP_ECHO);
    cmd.args([
        "--port",
        "0",
        "--cores",
        "0",
        "--backend",
        backend,
        "--unix-mode",
        "666",
    ])
    .arg("--unix")
    .arg(&path)
    .env("RUST_LOG", "info")
    .env_remove("PERCORE_BACKEND")
    .env_remove("PERCORE_FAULT");
    let server = ChildServer::spawn(cmd, Duration::from_secs(60))
        .unwrap_or_else(|f| panic!("http_echo did not start: {f:?}"));
    let line = format!("and unix:{}", path.display());
    assert!(
        server.wait_for_log(&line, Duration::from_secs(60)),
        "{}",
        server.log()
    );
    (server, path)
}

/// Stops the server with SIGTERM; its socket file is gone after.
fn stop(server: ChildServer, path: &std::path::Path) {
    server.signal(libc::SIGTERM);
    let (status, log) = server.wait(Duration::from_secs(60));
    assert!(status.success(), "{status}: {log}");
    assert!(!path.exists(), "the socket file outlived the server: {log}");
}

backend_process_tests! {
    /// curl reaches the service on the socket file itself.
    fn curl_over_the_socket(backend) {
        let (server, path) = start(backend, "curl");
        let socket = path.display().to_string();
        if let Some(out) = curl(&["--unix-socket", &socket, "http://localhost/hello"]) {
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(String::from_utf8_lossy(&out.stdout), HELLO);
            let out = curl(&["--unix-socket", &socket, "--data-binary", "posted", "http://localhost/echo"])
                .expect("curl ran once");
            assert_eq!(String::from_utf8_lossy(&out.stdout), "posted");
        }
        stop(server, &path);
    }

    /// nginx in front of the socket: curl and wrk through it, every
    /// answer a 200.
    fn behind_nginx(backend) {
        let (server, path) = start(backend, "nginx");
        let upstream = path.display().to_string();
        let Some(nginx) = Nginx::start(|_| {
            format!(
                "  location / {{\n   proxy_pass http://unix:{upstream}:;\n   \
                 proxy_http_version 1.1;\n   proxy_set_header Connection \"\";\n  }}"
            )
        }) else {
            stop(server, &path);
            return;
        };
        let url = format!("http://{}/hello", nginx.addr);
        let out = curl(&["--include", &url]).expect("curl is there when nginx is");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}; nginx log: {}", nginx.log());
        assert!(text.ends_with(HELLO), "{text}");
        if let Some(out) = wrk(&["-t1", "-c8", "-d2s", &url]) {
            let report = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{report}");
            assert!(!report.contains("Non-2xx"), "{report}; nginx log: {}", nginx.log());
            assert!(!report.contains("Socket errors"), "{report}; nginx log: {}", nginx.log());
            let requests: u64 = report
                .lines()
                .find_map(|l| l.trim().split_once(" requests in "))
                .and_then(|(n, _)| n.trim().parse().ok())
                .unwrap_or_else(|| panic!("no request count in {report}"));
            assert!(requests > 0, "{report}");
        }
        drop(nginx);
        stop(server, &path);
    }
}
