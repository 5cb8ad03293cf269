//! The `http_echo` binary as an operator runs it, on both backends:
//! `--keepalive-requests` sets the per-connection request cap (FAULTS B8;
//! 0 lifts it), `--max-body` and `--idle-timeout-ms` reach the HTTP layer,
//! and a bad value is refused before anything starts.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use percore_test_kit::*;

const HTTP_ECHO: &str = env!("CARGO_BIN_EXE_http_echo");

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";

fn http_echo_cmd(args: &[&str]) -> Command {
    let mut cmd = Command::new(HTTP_ECHO);
    cmd.args(["--port", "0", "--host", "127.0.0.1", "--cores", "0"])
        .args(args)
        .env("RUST_LOG", "info")
        .env_remove("PERCORE_BACKEND")
        .env_remove("PERCORE_FAULT");
    cmd
}

/// Reads one response to a `GET` (its body has a `Content-Length`) and
/// returns its head.
fn read_response(stream: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut byte).expect("read a response head");
        assert!(n == 1, "the connection closed mid-head: {got:?}");
        got.push(byte[0]);
    }
    let head = String::from_utf8(got).expect("an ASCII head");
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Content-Length in {head:?}"));
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).expect("read the body");
    assert_eq!(body, br#"{"message":"Hello!"}"#);
    head
}

/// Sends `n` requests one at a time on one connection; returns the heads.
fn requests(stream: &mut TcpStream, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            stream.write_all(GET).expect("send a request");
            read_response(stream)
        })
        .collect()
}

fn closed(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1];
    matches!(stream.read(&mut buf), Ok(0))
}

/// Starts `http_echo` on `backend` with `--keepalive-requests cap`, runs
/// `client` on a connection to it, then stops it with SIGTERM (exit 0).
fn with_cap(backend: &str, cap: &str, client: impl FnOnce(&mut TcpStream)) {
    with_args(backend, &["--keepalive-requests", cap], client);
}

/// Starts `http_echo` on `backend` with `args`, runs `client` on a
/// connection to it, then stops it with SIGTERM (exit 0).
fn with_args(backend: &str, args: &[&str], client: impl FnOnce(&mut TcpStream)) {
    let child = ChildServer::spawn(
        http_echo_cmd(&[&["--backend", backend], args].concat()),
        Duration::from_secs(60),
    )
    .unwrap_or_else(|f| panic!("{backend}: http_echo did not start: {f:?}"));
    let mut stream = TcpStream::connect(child.addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    client(&mut stream);
    child.signal(libc::SIGTERM);
    let (status, log) = child.wait(Duration::from_secs(60));
    assert!(status.success(), "{backend}: {status}\n{log}");
}

backend_process_tests! {
    fn keepalive_requests_sets_the_cap_and_zero_lifts_it(backend) {
        with_cap(backend, "3", |stream| {
            let heads = requests(stream, 3);
            assert!(
                heads[..2].iter().all(|h| !h.contains("Connection: close")),
                "{backend}: closed before the cap: {heads:?}"
            );
            assert!(
                heads[2].contains("Connection: close"),
                "{backend}: the third response does not close: {}",
                heads[2]
            );
            assert!(closed(stream), "{backend}: still open after the cap");
        });
        // Past the default cap of 1000 with the cap lifted.
        with_cap(backend, "0", |stream| {
            let heads = requests(stream, 1100);
            assert!(
                heads.iter().all(|h| !h.contains("Connection: close")),
                "{backend}: a response closed with the cap lifted"
            );
        });
    }

    /// The HTTP layer's limits and timeouts from the command line: a body
    /// over `--max-body` is answered 413, and a connection idle past
    /// `--idle-timeout-ms` is closed.
    fn http_flags_set_the_body_limit_and_the_idle_timeout(backend) {
        let args = ["--max-body", "8", "--idle-timeout-ms", "300"];
        with_args(backend, &args, |stream| {
            let post = |body: &str| {
                format!(
                    "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
            };
            // Timed from before the request, so that the server's idle
            // clock (started after its answer) cannot have started first:
            // a lower bound on a slow machine too.
            let started = std::time::Instant::now();
            stream.write_all(post("12345678").as_bytes()).expect("send");
            let mut got = vec![0u8; 4096];
            let n = stream.read(&mut got).expect("read");
            let answer = String::from_utf8_lossy(&got[..n]).into_owned();
            assert!(answer.starts_with("HTTP/1.1 200"), "{backend}: {answer}");
            assert!(answer.ends_with("12345678"), "{backend}: {answer}");
            assert!(closed(stream), "{backend}: the idle connection stayed open");
            let idle = started.elapsed();
            assert!(
                idle >= Duration::from_millis(250),
                "{backend}: closed after {idle:?}, before the 300 ms idle timeout"
            );
        });
        with_args(backend, &args, |stream| {
            stream
                .write_all(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 9\r\n\r\n123456789")
                .expect("send");
            let mut got = vec![0u8; 4096];
            let n = stream.read(&mut got).expect("read");
            let answer = String::from_utf8_lossy(&got[..n]).into_owned();
            assert!(answer.starts_with("HTTP/1.1 413"), "{backend}: {answer}");
        });
    }
}

#[test]
fn a_bad_keepalive_requests_value_is_refused() {
    let out = http_echo_cmd(&["--keepalive-requests", "many"])
        .output()
        .expect("run http_echo");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid value 'many' for '--keepalive-requests <N>': expected a number"),
        "{stderr}"
    );
}

/// `--max-connections 0` would pause accepting for good: refused, with the
/// value it got.
#[test]
fn a_zero_connection_limit_is_refused() {
    let out = http_echo_cmd(&["--max-connections", "0"])
        .output()
        .expect("run http_echo");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid value '0' for '--max-connections <N>': expected a number from 1"),
        "{stderr}"
    );
}
