//! The `chat` page in headless Chromium over HTTPS with HTTP/2, on both
//! backends: the page comes over an HTTP/2 connection (ALPN `h2`), whose
//! SETTINGS allow extended CONNECT, so Chromium opens the WebSocket as a
//! stream of it (RFC 8441); the page joins a room, sends a message and
//! shows it back, and the server counts the WebSocket as an HTTP/2 one.
//! Skips, saying why, when chromium or Python's `websockets` is missing.
//! (Feature `h2`.)
#![cfg(feature = "h2")]

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use percore_test_kit::*;

use crate::chat_browser::DRIVER;

const CHAT: &str = env!("CARGO_BIN_EXE_chat");
const LIMIT: Duration = Duration::from_secs(60);

backend_process_tests! {
    /// The page's WebSocket is a stream of its HTTP/2 connection.
    fn the_page_chats_over_h2_in_chromium(backend) {
        if !installed("chromium") || !python_module("websockets") {
            return;
        }
        let Some(cert) = TestCert::new(&format!("chat-h2-{backend}")) else { return };
        let mut cmd = Command::new(CHAT);
        cmd.args(["--port", "0", "--backend", backend, "--stats"])
            .arg("--tls-cert")
            .arg(&cert.cert)
            .arg("--tls-key")
            .arg(&cert.key)
            .env("RUST_LOG", "info")
            .env_remove("PERCORE_BACKEND")
            .env_remove("PERCORE_FAULT");
        let server = ChildServer::spawn(cmd, LIMIT).unwrap_or_else(|f| panic!("did not start: {f:?}"));
        let port = server.addr.port();
        let url = format!("https://localhost:{port}/?room=lobby&name=web&say=hello%20over%20h2");
        let mut driver = Command::new("python3")
            .args(["-c", DRIVER, "chromium", &url, "web: hello over h2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run python3");
        let status = wait_timeout(&mut driver, LIMIT).expect("the driver ended");
        let (mut out, mut err) = (String::new(), String::new());
        driver.stdout.take().expect("stdout").read_to_string(&mut out).expect("stdout");
        driver.stderr.take().expect("stderr").read_to_string(&mut err).expect("stderr");
        assert!(status.success(), "{status}\n{out}\n{err}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.first(), Some(&"in lobby"), "{out}\n{err}");
        assert!(lines.contains(&"web: hello over h2"), "{out}");
        // The stats line of the core that served it counts the WebSocket
        // as opened on an HTTP/2 stream.
        assert!(server.wait_for_log(" h2_opened=1 ", LIMIT), "{}", server.log());
        server.signal(libc::SIGTERM);
        let (status, log) = server.wait(LIMIT);
        assert!(status.success(), "{status}: {log}");
    }
}
