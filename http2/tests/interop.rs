//! `percore_http2::server` against real HTTP/2 clients over real TCP
//! sockets: nghttp2's h2load and nghttp, curl, and Python's `h2` (another
//! HPACK and flow control implementation). The server is a blocking std
//! loop around the sans-IO connection, one thread per connection; the
//! crate has no runtime to run on, so there is no backend to choose.
//!
//! Each client skips, printing why, when it is not installed, unless the
//! test script promised it in `PERCORE_TEST_TOOLS`.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use percore_http2::frame::{ErrorCode, StreamId};
use percore_http2::server::{Config, Connection, Event};

const BODY: &[u8] = b"hello from percore-http2\n";

/// Serves one connection: every request is answered 200 with `BODY`,
/// once its body (counted in `x-body-bytes`) has arrived.
fn serve(mut socket: TcpStream) {
    let mut conn = Connection::new(Config::default());
    let mut input = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    let mut bodies: HashMap<StreamId, usize> = HashMap::new();
    loop {
        if !conn.output().is_empty() {
            if socket.write_all(conn.output()).is_err() {
                return;
            }
            conn.output().clear();
        }
        let n = match socket.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        input.extend_from_slice(&chunk[..n]);
        let mut complete = Vec::new();
        let mut consumed = Vec::new();
        let result = conn.receive(&input, |event| match event {
            Event::Headers {
                stream, end_stream, ..
            } => {
                bodies.entry(stream).or_insert(0);
                if end_stream {
                    complete.push(stream);
                }
            }
            Event::Data {
                stream,
                data,
                end_stream,
            } => {
                *bodies.entry(stream).or_insert(0) += data.len();
                consumed.push((stream, data.len() as u32));
                if end_stream {
                    complete.push(stream);
                }
            }
            _ => {}
        });
        let used = match result {
            Ok(used) => used,
            Err(error) => {
                let _ = socket.write_all(conn.output());
                panic!("the client broke a rule: {error}");
            }
        };
        input.drain(..used);
        for (stream, len) in consumed {
            conn.release(stream, len);
        }
        for stream in complete {
            let received = bodies.remove(&stream).unwrap_or(0).to_string();
            conn.send_headers(stream, false, |b| {
                b.status(200);
                b.field(b"content-type", b"text/plain", false);
                b.field(b"x-body-bytes", received.as_bytes(), false);
            })
            .expect("the stream is open");
            let sent = conn
                .send_data(stream, BODY, true)
                .expect("the stream is open");
            if sent < BODY.len() {
                // Not expected with a 25-byte body; refuse rather than hang.
                conn.reset(stream, ErrorCode::InternalError);
            }
        }
    }
}

/// A server on a loopback port, serving each connection on a thread.
fn start() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for socket in listener.incoming().flatten() {
            std::thread::spawn(move || serve(socket));
        }
    });
    port
}

/// Whether `tool` can run; prints why the test skips when it cannot,
/// and fails when the test script promised it.
fn available(tool: &str, probe: &mut Command) -> bool {
    if probe
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        return true;
    }
    let promised = std::env::var("PERCORE_TEST_TOOLS").unwrap_or_default();
    assert!(
        !promised.split(',').any(|t| t == tool),
        "{tool} not installed, though the test script installs it"
    );
    println!("skipped: {tool} not installed");
    false
}

/// Runs `cmd` to its end, killing it after a minute: a hang guard only.
fn run(cmd: &mut Command) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn client");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait for client").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the client hung: {cmd:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("client output")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn h2load_requests_all_succeed() {
    if !available("h2load", Command::new("h2load").arg("--version")) {
        return;
    }
    let port = start();
    let url = format!("http://127.0.0.1:{port}/");
    let out = run(Command::new("h2load").args(["-n", "2000", "-c", "4", "-m", "10", &url]));
    let report = text(&out);
    assert!(out.status.success(), "{report}");
    assert!(
        report.contains("requests: 2000 total, 2000 started, 2000 done, 2000 succeeded"),
        "{report}"
    );
    assert!(report.contains("status codes: 2000 2xx"), "{report}");
}

#[test]
fn h2load_uploads_are_flow_controlled() {
    if !available("h2load", Command::new("h2load").arg("--version")) {
        return;
    }
    let port = start();
    let dir = std::env::temp_dir().join(format!("percore-http2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let upload = dir.join("upload");
    // Larger than the stream and connection windows (65,535).
    std::fs::write(&upload, vec![b'u'; 200_000]).unwrap();
    let url = format!("http://127.0.0.1:{port}/upload");
    let out = run(Command::new("h2load")
        .args(["-n", "20", "-c", "2", "-m", "4", "-d"])
        .arg(&upload)
        .arg(&url));
    let _ = std::fs::remove_dir_all(&dir);
    let report = text(&out);
    assert!(
        report.contains("requests: 20 total, 20 started, 20 done, 20 succeeded"),
        "{report}"
    );
}

#[test]
fn nghttp_and_curl_see_the_answer() {
    let port = start();
    let url = format!("http://127.0.0.1:{port}/path?q=1");
    if available("nghttp", Command::new("nghttp").arg("--version")) {
        let out = run(Command::new("nghttp").args(["-v", &url]));
        let report = text(&out);
        assert!(out.status.success(), "{report}");
        assert!(report.contains(":status: 200"), "{report}");
        assert!(report.contains("x-body-bytes: 0"), "{report}");
        assert!(report.contains("hello from percore-http2"), "{report}");
    }
    if available("curl", Command::new("curl").arg("--version")) {
        let out = run(Command::new("curl").args([
            "--silent",
            "--show-error",
            "--http2-prior-knowledge",
            "--include",
            "--data-binary",
            "twelve bytes",
            &url,
        ]));
        let report = text(&out);
        assert!(out.status.success(), "{report}");
        assert!(report.starts_with("HTTP/2 200"), "{report}");
        assert!(report.contains("x-body-bytes: 12"), "{report}");
        assert!(report.ends_with("hello from percore-http2\n"), "{report}");
    }
}

/// Python's `h2`: a POST whose body needs the server's WINDOW_UPDATEs.
const PYTHON_CLIENT: &str = r#"
import socket, sys
import h2.config, h2.connection, h2.events
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
c.initiate_connection()
s.sendall(c.data_to_send())
sid = c.get_next_available_stream_id()
c.send_headers(sid, [(":method", "POST"), (":path", "/upload"), (":scheme", "http"),
                     (":authority", "localhost"), ("authorization", "secret")])
body = b"p" * 200000
sent, status, count, got, ended = 0, None, None, b"", False
while not ended:
    while sent < len(body):
        n = min(c.local_flow_control_window(sid), c.max_outbound_frame_size, len(body) - sent)
        if n <= 0:
            break
        c.send_data(sid, body[sent:sent + n], end_stream=sent + n == len(body))
        sent += n
    s.sendall(c.data_to_send())
    data = s.recv(65536)
    if not data:
        break
    for e in c.receive_data(data):
        if isinstance(e, h2.events.ResponseReceived):
            h = dict(e.headers)
            status, count = h[":status"], h["x-body-bytes"]
        elif isinstance(e, h2.events.DataReceived):
            got += e.data
            c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
        elif isinstance(e, h2.events.StreamEnded):
            ended = True
    s.sendall(c.data_to_send())
print(status, count, got.decode().strip())
"#;

#[test]
fn python_h2_uploads_past_the_windows() {
    if !available(
        "python3-h2",
        Command::new("python3").args(["-c", "import h2"]),
    ) {
        return;
    }
    let port = start();
    let out = run(Command::new("python3").args(["-c", PYTHON_CLIENT, &port.to_string()]));
    let report = text(&out);
    assert!(out.status.success(), "{report}");
    assert_eq!(
        report.trim(),
        "200 200000 hello from percore-http2",
        "{report}"
    );
}
