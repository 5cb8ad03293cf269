//! `http_echo --tls-cert --tls-key` as an operator runs it, on both
//! backends: curl over HTTPS (GET, POST, keep-alive), a wrong CA refused
//! by curl, a short wrk run over https with every answer a 200, and
//! `fanout --upstream-ca` in front of it.

use std::process::Command;
use std::time::Duration;

use percore_test_kit::*;

const HTTP_ECHO: &str = env!("CARGO_BIN_EXE_http_echo");
const FANOUT: &str = env!("CARGO_BIN_EXE_fanout");
const HELLO: &str = r#"{"message":"Hello!"}"#;

fn start(backend: &str, cert: &TestCert) -> ChildServer {
    start_bin(HTTP_ECHO, backend, cert)
}

/// Starts the example binary at `path` with TLS.
fn start_bin(path: &str, backend: &str, cert: &TestCert) -> ChildServer {
    let mut cmd = Command::new(path);
    cmd.args(["--port", "0", "--cores", "0", "--backend", backend])
        .arg("--tls-cert")
        .arg(&cert.cert)
        .arg("--tls-key")
        .arg(&cert.key)
        .env("RUST_LOG", "info")
        .env_remove("PERCORE_BACKEND")
        .env_remove("PERCORE_FAULT");
    let server = ChildServer::spawn(cmd, Duration::from_secs(60))
        .unwrap_or_else(|f| panic!("{path} did not start: {f:?}"));
    assert!(
        server.wait_for_log("with TLS", Duration::from_secs(60)),
        "{}",
        server.log()
    );
    server
}

/// `GET /hello` on a new connection that closes after the answer.
fn get_hello(addr: std::net::SocketAddr) -> Vec<u8> {
    use std::io::Write;
    let mut conn = connect(addr);
    conn.write_all(b"GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .expect("write");
    read_to_end(&mut conn).unwrap_or_else(|(_, e)| panic!("read: {e}"))
}

fn stop(server: ChildServer) {
    server.signal(libc::SIGTERM);
    let (status, log) = server.wait(Duration::from_secs(60));
    assert!(status.success(), "{status}: {log}");
}

/// curl over HTTPS to `path` on the server: the HTTP version ALPN chose
/// (`2` or `1.1`) and the body; `None` if curl is missing.
fn version_and_body(
    server: &ChildServer,
    cert: &TestCert,
    path: &str,
    http2: bool,
) -> Option<(String, String)> {
    let url = format!("https://localhost:{}{path}", server.addr.port());
    let resolve = format!("localhost:{}:127.0.0.1", server.addr.port());
    let ca = cert.ca.display().to_string();
    let version = if http2 { "--http2" } else { "--http1.1" };
    let out = curl(&[
        version,
        "--resolve",
        &resolve,
        "--cacert",
        &ca,
        "--write-out",
        "\n%{http_version}",
        &url,
    ])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let (body, version) = text.rsplit_once('\n').expect("the version line");
    Some((version.to_string(), body.to_string()))
}

backend_process_tests! {
    /// HTTPS with ALPN: curl that offers `h2` gets HTTP/2 from a server
    /// whose handler speaks it (axum on percore, and `http_echo` when
    /// built with HTTP/2), and one that offers only `http/1.1` gets 1.1.
    fn alpn_chooses_http2_over_https(backend) {
        let Some(cert) = TestCert::new(&format!("https-alpn-{backend}")) else { return };
        #[cfg(feature = "axum")]
        {
            let axum = start_bin(env!("CARGO_BIN_EXE_axum_app"), backend, &cert);
            if let Some((version, body)) = version_and_body(&axum, &cert, "/users/7", true) {
                assert_eq!(version, "2", "{backend}: axum_app over TLS");
                assert_eq!(body, r#"{"id":7,"name":"user7"}"#);
                let (version, _) = version_and_body(&axum, &cert, "/users/7", false).expect("curl ran once");
                assert_eq!(version, "1.1", "{backend}: axum_app with http/1.1 only");
            }
            stop(axum);
        }
        let server = start(backend, &cert);
        if let Some((version, body)) = version_and_body(&server, &cert, "/hello", true) {
            let spoken = if cfg!(feature = "h2") { "2" } else { "1.1" };
            assert_eq!(version, spoken, "{backend}: http_echo over TLS");
            assert_eq!(body, HELLO);
        }
        stop(server);
    }

    /// curl with the test CA: GET and POST over one kept-alive
    /// connection; with another CA it refuses the server.
    fn curl_over_https(backend) {
        let Some(cert) = TestCert::new(&format!("https-curl-{backend}")) else { return };
        let server = start(backend, &cert);
        let url = format!("https://localhost:{}", server.addr.port());
        let resolve = format!("localhost:{}:127.0.0.1", server.addr.port());
        let ca = cert.ca.display().to_string();
        let Some(out) = curl(&["--resolve", &resolve, "--cacert", &ca, &format!("{url}/hello"), "--next", "--resolve", &resolve, "--cacert", &ca, "--data-binary", "over https", &format!("{url}/echo")]) else {
            stop(server);
            return;
        };
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{HELLO}over https"));
        let other = TestCert::new(&format!("https-other-{backend}")).expect("openssl ran once");
        let out = curl(&["--resolve", &resolve, "--cacert", &other.ca.display().to_string(), &format!("{url}/hello")]).expect("curl ran once");
        assert!(!out.status.success(), "curl trusted a server its CA did not sign");
        stop(server);
    }

    /// `--tls-client-ca`: curl with a client certificate of that CA is
    /// served; without one it is refused.
    fn client_certificates_over_https(backend) {
        let Some(cert) = TestCert::new(&format!("https-mtls-{backend}")) else { return };
        let mut cmd = Command::new(HTTP_ECHO);
        cmd.args(["--port", "0", "--cores", "0", "--backend", backend])
            .arg("--tls-cert").arg(&cert.cert)
            .arg("--tls-key").arg(&cert.key)
            .arg("--tls-client-ca").arg(&cert.ca)
            .env("RUST_LOG", "info")
            .env_remove("PERCORE_BACKEND")
            .env_remove("PERCORE_FAULT");
        let server = ChildServer::spawn(cmd, Duration::from_secs(60))
            .unwrap_or_else(|f| panic!("http_echo did not start: {f:?}"));
        let (client_cert, client_key) = cert.other("client.test");
        let url = format!("https://localhost:{}/hello", server.addr.port());
        let resolve = format!("localhost:{}:127.0.0.1", server.addr.port());
        let ca = cert.ca.display().to_string();
        if let Some(out) = curl(&["--resolve", &resolve, "--cacert", &ca, "--cert", &client_cert.display().to_string(), "--key", &client_key.display().to_string(), &url]) {
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(String::from_utf8_lossy(&out.stdout), HELLO);
            let out = curl(&["--resolve", &resolve, "--cacert", &ca, &url]).expect("curl ran once");
            assert!(!out.status.success(), "served without a client certificate");
        }
        stop(server);
    }

    /// wrk over https: every answer a 200, no socket error.
    fn wrk_over_https(backend) {
        let Some(cert) = TestCert::new(&format!("https-wrk-{backend}")) else { return };
        let server = start(backend, &cert);
        let url = format!("https://127.0.0.1:{}/", server.addr.port());
        if let Some(out) = wrk(&["-t1", "-c8", "-d2s", &url]) {
            let report = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{report}");
            assert!(!report.contains("Non-2xx"), "{report}");
            assert!(!report.contains("Socket errors"), "{report}");
            let requests: u64 = report
                .lines()
                .find_map(|l| l.trim().split_once(" requests in "))
                .and_then(|(n, _)| n.trim().parse().ok())
                .unwrap_or_else(|| panic!("no request count in {report}"));
            assert!(requests > 0, "{report}");
        }
        stop(server);
    }

    /// `fanout --upstream-ca` in front of the HTTPS echo: a plain request
    /// to the proxy is answered through TLS; with `--upstream-server-name`
    /// a name the certificate lacks, 502.
    fn fanout_to_an_https_upstream(backend) {
        let Some(cert) = TestCert::new(&format!("https-fanout-{backend}")) else { return };
        let upstream = start(backend, &cert);
        let up = upstream.addr.to_string();
        let proxy = |extra: &[&str]| {
            let mut cmd = Command::new(FANOUT);
            cmd.args(["--port", "0", "--cores", "0", "--backend", backend, "--upstream", &up])
                .arg("--upstream-ca")
                .arg(&cert.ca)
                .args(extra)
                .env("RUST_LOG", "info")
                .env_remove("PERCORE_BACKEND")
                .env_remove("PERCORE_FAULT");
            ChildServer::spawn(cmd, Duration::from_secs(60))
                .unwrap_or_else(|f| panic!("fanout did not start: {f:?}"))
        };
        let px = proxy(&[]);
        assert!(px.log().contains("over TLS"), "{}", px.log());
        let answer = get_hello(px.addr);
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.contains(r#"{\"message\":\"Hello!\"}"#), "{text}");
        stop(px);

        let px = proxy(&["--upstream-server-name", "api.example"]);
        let answer = get_hello(px.addr);
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 502"), "{text}");
        assert!(
            px.wait_for_log("the certificate is not for this server name", Duration::from_secs(60)),
            "{}",
            px.log()
        );
        stop(px);
        stop(upstream);
    }
}
