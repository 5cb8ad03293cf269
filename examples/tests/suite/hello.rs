//! The README's quick start (`hello`) as a newcomer runs it, on both
//! backends (chosen by `PERCORE_BACKEND`: the program has no option for
//! it): with no logging code of its own it prints its start line, a
//! failing route's cause and its stop; SIGTERM exits 0, also when sent
//! on seeing the start line; a port in use is a one-sentence error and
//! exit status 1. And the binary is the README's code.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use percore_test_kit::*;

const HELLO: &str = env!("CARGO_BIN_EXE_hello");

/// `hello` as a user starts it: no arguments, the environment alone.
fn hello_cmd(backend: &str, port: u16) -> Command {
    let mut cmd = Command::new(HELLO);
    cmd.env("PORT", port.to_string())
        .env("PERCORE_BACKEND", backend)
        .env_remove("RUST_LOG")
        .env_remove("MOTD")
        .env_remove("PERCORE_FAULT");
    cmd
}

/// The status and body of `GET path`, on a connection of its own.
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("send");
    let mut bytes = Vec::new();
    s.read_to_end(&mut bytes).expect("read the response");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

backend_process_tests! {
    /// Start, a greeting, a refused name, a route's failure and SIGTERM,
    /// each seen on stderr as a newcomer sees it.
    fn the_quick_start_says_what_it_does(backend) {
        let child = ChildServer::spawn_until(hello_cmd(backend, 0), Duration::from_secs(60), parse_serving)
            .unwrap_or_else(|f| panic!("{backend}: hello did not start: {f:?}"));
        let addr = child.addr;
        assert!(child.wait_for_log(" serving ", Duration::from_secs(60)));
        let start = child.log();
        let start = start.lines().find(|l| l.contains(" serving ")).expect("a start line");
        assert!(start.contains(&format!("addr={addr}")), "{start}");
        assert!(start.contains(&format!("backend={backend}")), "{start}");
        assert!(start.contains("cores=["), "{start}");

        assert_eq!(get(addr, "/hello/ann"), (200, "hello, ann\n".to_string()));
        let long = "a".repeat(65);
        let (status, body) = get(addr, &format!("/hello/{long}"));
        assert_eq!((status, body.as_str()), (400, "Bad Request: name too long\n"));
        let (status, body) = get(addr, "/motd");
        assert_eq!((status, body.as_str()), (500, "Internal Server Error\n"));
        assert!(
            child.wait_for_log("environment variable not found", Duration::from_secs(60)),
            "{backend}: the failure's cause is not on stderr:\n{}",
            child.log()
        );
        let log = child.log();
        let failed = log.lines().find(|l| l.contains("service failed")).expect("a failure line");
        assert!(failed.contains("WARN") && failed.contains("/motd"), "{failed}");

        child.signal(libc::SIGTERM);
        let (status, log) = child.wait(Duration::from_secs(60));
        assert!(status.success(), "{backend}: exited with {status}:\n{log}");
        assert!(log.contains("stopped"), "{backend}: no stop line:\n{log}");
    }

    /// SIGTERM sent as soon as the start line shows (as a supervisor
    /// may): the server already stops on it gracefully, not killed.
    fn sigterm_at_the_start_line_stops_gracefully(backend) {
        let child = ChildServer::spawn_until(hello_cmd(backend, 0), Duration::from_secs(60), parse_serving)
            .unwrap_or_else(|f| panic!("{backend}: hello did not start: {f:?}"));
        child.signal(libc::SIGTERM);
        let (status, log) = child.wait(Duration::from_secs(60));
        assert!(status.success(), "{backend}: exited with {status}:\n{log}");
        assert!(log.contains("stopped"), "{backend}: no stop line:\n{log}");
    }

    /// A port already taken: one sentence naming the address, not an
    /// `io::Error`'s `Debug`, and exit status 1.
    fn a_port_in_use_is_one_sentence(backend) {
        let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = taken.local_addr().expect("address").port();
        let mut cmd = hello_cmd(backend, port);
        let out = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .env("NO_COLOR", "1")
            .output()
            .expect("run hello");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{backend}: {stderr}");
        assert!(
            stderr.contains(&format!("Error: cannot listen on 127.0.0.1:{port}")),
            "{backend}: {stderr}"
        );
        assert!(!stderr.contains("Custom {"), "{backend}: {stderr}");
        drop(taken);
    }
}

/// The binary is the README's quick start, but for the lines that read
/// the port: a README that drifts from code that compiles fails here.
#[test]
fn the_binary_is_the_readmes_quick_start() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).expect("README.md");
    let start = readme
        .find("```rust\nuse percore_handlers")
        .expect("the quick start's code")
        + 8;
    let end = start + readme[start..].find("```").expect("its end");
    let quick_start = &readme[start..end];

    let binary =
        std::fs::read_to_string(format!("{root}/examples/src/bin/hello.rs")).expect("hello.rs");
    let binary: String = binary
        .lines()
        .filter(|l| !l.starts_with("//!"))
        .skip_while(|l| l.is_empty())
        .filter(|l| !l.contains("PORT") && !l.contains("let port"))
        .map(|l| l.replace(r#"format!("127.0.0.1:{port}")"#, r#""127.0.0.1:8080""#) + "\n")
        .collect();
    assert_eq!(binary, quick_start);
}
