//! The `counter` binary as an operator runs it, on both backends: `incr`
//! and `sum` across cores, and `--stats` (a line per `sum` on stderr)
//! when nobody reads stderr any more.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use percore_test_kit::*;

const COUNTER: &str = env!("CARGO_BIN_EXE_counter");

/// The running `counter`, killed if a failed assertion leaves it running.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts `counter` on a free loopback port with stderr piped, and returns
/// it with its address and its log, read up to the `listening on` line.
fn start(backend: &str) -> (Running, SocketAddr, BufReader<std::process::ChildStderr>) {
    let mut child = Command::new(COUNTER)
        .args(["--port", "0", "--host", "127.0.0.1", "--backend", backend])
        .arg("--stats")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .env_remove("PERCORE_BACKEND")
        .env_remove("PERCORE_FAULT")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn counter");
    let mut log = BufReader::new(child.stderr.take().expect("piped stderr"));
    let child = Running(child);
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(
            log.read_line(&mut line).expect("read the log") > 0,
            "counter exited"
        );
        if let Some(addr) = parse_listening(&strip_ansi(&line)) {
            break addr;
        }
    };
    (child, addr, log)
}

/// Sends `commands` on a new connection, half-closes it, and returns all
/// that comes back.
fn ask(addr: SocketAddr, commands: &str) -> String {
    let mut conn = connect(addr);
    conn.write_all(commands.as_bytes()).expect("write");
    conn.shutdown(std::net::Shutdown::Write).expect("shutdown");
    let mut answer = String::new();
    conn.read_to_string(&mut answer).expect("read the answer");
    answer
}

/// SIGTERM, and a graceful exit (within a minute, the hang guard).
fn stop(mut child: Running, backend: &str) {
    // SAFETY: `kill` only sends a signal to the child's pid, which is ours
    // to signal until `wait_timeout` below reaps it.
    unsafe { libc::kill(child.0.id() as libc::pid_t, libc::SIGTERM) };
    let status = wait_timeout(&mut child.0, Duration::from_secs(60));
    let status = status.unwrap_or_else(|| panic!("{backend}: SIGTERM did not stop counter"));
    assert!(status.success(), "{backend}: counter exited with {status}");
}

backend_process_tests! {
    /// The per-core counts are summed, and with `--stats` each `sum` is
    /// logged: the client gets its answer also once the log's reader is gone
    /// (the line is dropped, as the log's are, instead of panicking in the
    /// handler and closing the connection unanswered).
    fn sum_is_answered_when_the_log_reader_is_gone(backend) {
        let (child, addr, mut log) = start(backend);
        assert_eq!(ask(addr, "incr\nincr\nsum\n"), "ok\nok\n2\n", "{backend}");
        let mut line = String::new();
        while !line.starts_with("counter: per-core") {
            line.clear();
            assert!(
                log.read_line(&mut line).expect("read the log") > 0,
                "{backend}: counter exited"
            );
        }
        assert!(line.contains("total 2"), "{backend}: {line}");

        drop(log);
        assert_eq!(ask(addr, "incr\nsum\n"), "ok\n3\n", "{backend}");
        assert_eq!(ask(addr, "sum\n"), "3\n", "{backend}");
        stop(child, backend);
    }
}
