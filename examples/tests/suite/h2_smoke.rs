//! The HTTP/2 smoke test, on both backends: `http_echo` built with HTTP/2
//! (`--features h2`), with TLS, answers curl over TLS (ALPN `h2`) and in
//! clear text (prior knowledge), `nghttp -v`, h2load with no failure, and
//! cuts a rapid-reset probe with GOAWAY `ENHANCE_YOUR_CALM`; then stops on
//! SIGTERM with status 0. (gRPC's own calls are in `grpc.rs`.)
#![cfg(feature = "h2")]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use percore_test_kit::*;

const HTTP_ECHO: &str = env!("CARGO_BIN_EXE_http_echo");

fn start(backend: &str, cert: &TestCert) -> ChildServer {
    let mut cmd = Command::new(HTTP_ECHO);
    cmd.args(["--port", "0", "--host", "127.0.0.1", "--backend", backend])
        .arg("--tls-cert")
        .arg(&cert.cert)
        .arg("--tls-key")
        .arg(&cert.key)
        .env("RUST_LOG", "info")
        .env_remove("PERCORE_BACKEND")
        .env_remove("PERCORE_FAULT");
    ChildServer::spawn(cmd, Duration::from_secs(60))
        .unwrap_or_else(|f| panic!("http_echo did not start: {f:?}"))
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A clear-text `http_echo`: curl with prior knowledge gets HTTP/2, and a
/// rapid-reset probe (5,000 streams opened and reset in one burst) is cut:
/// returns the code of the GOAWAY it got.
fn clear_text_checks(backend: &str) -> Option<u32> {
    let mut cmd = Command::new(HTTP_ECHO);
    cmd.args(["--port", "0", "--host", "127.0.0.1", "--backend", backend])
        .env("RUST_LOG", "info")
        .env_remove("PERCORE_BACKEND")
        .env_remove("PERCORE_FAULT");
    let server = ChildServer::spawn(cmd, Duration::from_secs(60))
        .unwrap_or_else(|f| panic!("http_echo did not start: {f:?}"));
    if let Some(out) = curl(&[
        "--http2-prior-knowledge",
        "-w",
        "\n%{http_version}",
        &format!("http://{}/", server.addr),
    ]) {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.ends_with("\n2"),
            "{backend}: curl in clear text: {text}"
        );
    }
    let mut s = TcpStream::connect(server.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut burst = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    burst.extend(frame(4, 0, 0, &[]));
    for i in 0..5_000u32 {
        let id = 2 * i + 1;
        // GET / with :scheme http and :authority t, from the static table.
        burst.extend(frame(1, 0x5, id, &[0x82, 0x86, 0x84, 0x01, 0x01, b't']));
        burst.extend(frame(3, 0, id, &8u32.to_be_bytes()));
    }
    let _ = s.write_all(&burst);
    let mut back = Vec::new();
    let _ = s.read_to_end(&mut back);
    let mut at = 0;
    let mut code = None;
    while at + 9 <= back.len() {
        let len = u32::from_be_bytes([0, back[at], back[at + 1], back[at + 2]]) as usize;
        if back[at + 3] == 7 && at + 17 <= back.len() {
            code = Some(u32::from_be_bytes(
                back[at + 13..at + 17].try_into().expect("4 bytes"),
            ));
        }
        at += 9 + len;
    }
    server.signal(libc::SIGTERM);
    let (status, log) = server.wait(Duration::from_secs(60));
    assert!(status.success(), "{status}: {log}");
    code
}

backend_process_tests! {
    fn http2_smoke(backend) {
        let Some(cert) = TestCert::new(&format!("h2-smoke-{backend}")) else { return };
        let server = start(backend, &cert);
        let port = server.addr.port();
        let resolve = format!("localhost:{port}:127.0.0.1");
        let ca = cert.ca.display().to_string();
        let tls_url = format!("https://localhost:{port}/");
        if let Some(out) = curl(&["--http2", "--resolve", &resolve, "--cacert", &ca, "-w", "\n%{http_version}", &tls_url]) {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success() && text.ends_with("\n2"), "{backend}: curl over TLS: {text}");
        }
        if installed("nghttp") {
            let out = Command::new("nghttp")
                .args(["-v", "--no-verify-peer", &format!("https://127.0.0.1:{port}/")])
                .output()
                .expect("run nghttp");
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{backend}: nghttp: {text}");
            assert!(text.contains("recv SETTINGS frame") && text.contains(":status: 200"), "{backend}: {text}");
        }
        if installed("h2load") {
            let out = Command::new("h2load").args(["-n", "2000", "-c", "10", "-m", "10", &format!("https://127.0.0.1:{port}/")]).output().expect("run h2load");
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("2000 succeeded, 0 failed, 0 errored"), "{backend}: h2load: {text}");
            assert!(text.contains("Application protocol: h2"), "{backend}: h2load: {text}");
        }
        server.signal(libc::SIGTERM);
        let (status, log) = server.wait(Duration::from_secs(60));
        assert!(status.success(), "{status}: {log}");
        assert_eq!(clear_text_checks(backend), Some(0xb), "{backend}: rapid reset not cut with ENHANCE_YOUR_CALM");
    }
}
