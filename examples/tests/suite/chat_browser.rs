//! The `chat` page in a real browser, on both backends: headless
//! Chromium, driven over the DevTools protocol by a short Python script,
//! opens the page, which connects, joins a room and sends a message; a
//! raw client in the room gets it and answers, and the page shows the
//! answer. Skips, saying why, when chromium or Python's `websockets` is
//! missing (test.sh installs both as root).

use std::io::Read;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use percore_test_kit::ws::WsClient;
use percore_test_kit::*;
use serde_json::Value;

const CHAT: &str = env!("CARGO_BIN_EXE_chat");
const LIMIT: Duration = Duration::from_secs(60);

/// Starts Chromium on `argv[1]` (headless, its own profile, DevTools on
/// a free port, the test's self-made certificates accepted), opens
/// `argv[2]`, and polls the page's log until it holds `argv[3]` (at most
/// 30 s); prints the status and the log.
pub(crate) const DRIVER: &str = r#"
import json, re, subprocess, sys, tempfile, time, urllib.request
from websockets.sync.client import connect

chromium, url, want = sys.argv[1:4]
profile = tempfile.mkdtemp(prefix="percore-chat-")
browser = subprocess.Popen(
    [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
     "--ignore-certificate-errors",
     "--disable-extensions", "--disable-background-networking",
     "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
     "--user-data-dir=" + profile, "about:blank"],
    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
try:
    port = None
    for line in browser.stderr:
        m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
        if m:
            port = m.group(1)
            break
    assert port, "no DevTools port"
    targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30))
    page = next(t for t in targets if t["type"] == "page")
    with connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30) as cdp:
        ids = iter(range(1, 1 << 30))
        def call(method, **params):
            n = next(ids)
            cdp.send(json.dumps({"id": n, "method": method, "params": params}))
            while True:
                reply = json.loads(cdp.recv(timeout=30))
                if reply.get("id") == n:
                    assert "error" not in reply, reply
                    return reply["result"]
        call("Page.navigate", url=url)
        script = "document.getElementById('status').textContent + '\\n' + document.getElementById('log').innerText"
        deadline = time.monotonic() + 30
        text = ""
        while time.monotonic() < deadline:
            text = call("Runtime.evaluate", expression=script).get("result", {}).get("value", "")
            if want in text:
                break
            time.sleep(0.05)
        print(text)
finally:
    browser.kill()
    browser.wait()
"#;

/// `chat` on every core; its address.
fn start(backend: &str) -> ChildServer {
    let mut cmd = Command::new(CHAT);
    cmd.args(["--port", "0", "--backend", backend])
        .env("RUST_LOG", "info")
        .env_remove("PERCORE_BACKEND")
        .env_remove("PERCORE_FAULT");
    ChildServer::spawn(cmd, LIMIT).unwrap_or_else(|f| panic!("did not start: {f:?}"))
}

/// The next chat message `peer` gets, `(from, text)`; join events skipped.
fn next_message(peer: &mut WsClient<std::net::TcpStream>) -> (String, String) {
    loop {
        let f = peer.data_frame().expect("a message");
        let v: Value = serde_json::from_slice(&f.payload).expect("JSON");
        if v["type"] == "message" {
            let field = |k: &str| v[k].as_str().expect("a string").to_owned();
            return (field("name"), field("text"));
        }
    }
}

backend_process_tests! {
    /// The page connects, joins `lobby` as `web`, sends its message (which
    /// the raw client gets), and shows the raw client's answer.
    fn the_page_chats_in_chromium(backend) {
        if !installed("chromium") || !python_module("websockets") {
            return;
        }
        let server = start(backend);
        let addr: SocketAddr = server.addr;
        let mut peer = WsClient::new(connect(addr));
        peer.handshake("/ws", "");
        for command in ["/nick peer", "/join lobby"] {
            peer.send_frame(true, 1, command.as_bytes());
        }
        let url = format!("http://{addr}/?room=lobby&name=web&say=hello%20from%20the%20page");
        let mut driver = Command::new("python3")
            .args(["-c", DRIVER, "chromium", &url, "peer: hello from peer"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run python3");
        // The page's message reaches the room; the answer goes back.
        let got = next_message(&mut peer);
        assert_eq!(got, ("web".to_owned(), "hello from the page".to_owned()));
        peer.send_frame(true, 1, b"hello from peer");
        let status = wait_timeout(&mut driver, LIMIT).expect("the driver ended");
        let (mut out, mut err) = (String::new(), String::new());
        driver.stdout.take().expect("stdout").read_to_string(&mut out).expect("stdout");
        driver.stderr.take().expect("stderr").read_to_string(&mut err).expect("stderr");
        assert!(status.success(), "{status}\n{out}\n{err}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.first(), Some(&"in lobby"), "{out}\n{err}");
        assert!(lines.contains(&"web: hello from the page"), "{out}");
        assert!(lines.contains(&"peer: hello from peer"), "{out}");
        drop(peer);
        server.signal(libc::SIGTERM);
        let (status, log) = server.wait(LIMIT);
        assert!(status.success(), "{status}: {log}");
    }
}
