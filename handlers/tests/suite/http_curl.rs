//! A real client against `HttpEcho`, on both backends: curl for GET, POST
//! and two URLs over one kept-alive connection. Skips (with a printed
//! reason) where curl is not installed; CI installs it.

use crate::support;

use percore_test_kit::*;
use support::http::*;

backend_tests! {
    parallel;
    /// GET answers the JSON body with its type.
    fn curl_get(backend) {
        let server = TestServer::echo(backend);
        let url = format!("http://{}/hello", server.addr);
        let Some(out) = curl(&["--include", &url]) else { return };
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("\r\nContent-Type: application/json\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\n{\"message\":\"Hello!\"}"), "{text}");
    }

    /// POST echoes the body; a larger one goes through `Expect:
    /// 100-continue`, which curl sends for bodies over 1 MiB.
    fn curl_post(backend) {
        let server = TestServer::echo(backend);
        let url = format!("http://{}/echo", server.addr);
        let Some(out) = curl(&["-H", "Content-Type: text/plain", "--data-binary", "hello from curl", &url]) else {
            return;
        };
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.stdout, b"hello from curl");

        let big = "x".repeat(1 << 20);
        let path = std::env::temp_dir().join(format!("percore-curl-{}-{backend}", std::process::id()));
        std::fs::write(&path, &big).expect("write the body file");
        let data = format!("@{}", path.display());
        let out = curl(&["-v", "-H", "Expect: 100-continue", "--data-binary", &data, &url]).expect("curl ran before");
        let _ = std::fs::remove_file(&path);
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{log}");
        assert!(log.contains("HTTP/1.1 100 Continue"), "{log}");
        assert!(out.stdout == big.as_bytes(), "{} bytes back", out.stdout.len());
    }

    /// Two URLs in one invocation reuse one connection.
    fn curl_keep_alive(backend) {
        let server = TestServer::echo(backend);
        let a = format!("http://{}/a", server.addr);
        let b = format!("http://{}/b", server.addr);
        let Some(out) = curl(&["-v", &a, &b]) else { return };
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{log}");
        assert_eq!(out.stdout, [HELLO, HELLO].concat());
        assert!(log.to_ascii_lowercase().contains("existing connection"), "{log}");
        let stats = server.stats();
        assert_eq!((stats.accepted, stats.requests), (1, 2));
    }
}
