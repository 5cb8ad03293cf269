//! Servers in child processes: this test binary re-run as a server, or an
//! example binary, with its stderr collected.
//!
//! A child process is needed wherever a fault must be set before the
//! process starts (`PERCORE_FAULT` is read once per process), or the
//! server must run under other limits (`prlimit`, seccomp).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use percore::{Backend, CoreContext, Handler};

use crate::builder;

/// A server running in a child process, its stderr collected.
#[derive(Debug)]
pub struct ChildServer {
    child: Child,
    /// The address from its `listening on` line.
    pub addr: SocketAddr,
    log: Arc<Mutex<String>>,
}

/// Removes ANSI colour sequences (`ESC [ ... m`) from a log line.
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The address after `listening on ` in a log line.
pub fn parse_listening(line: &str) -> Option<SocketAddr> {
    let rest = line.split("listening on ").nth(1)?;
    rest.split_whitespace()
        .next()?
        .trim_end_matches(',')
        .parse()
        .ok()
}

/// The address of the server's own start line (`serving addr=ADDR`),
/// which `ServerBuilder::serve` writes once the server also stops on
/// signals: for a program that prints no `listening on` line of its own.
pub fn parse_serving(line: &str) -> Option<SocketAddr> {
    line.split(" serving addr=")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Why a child did not come up: its exit status (if it exited) and log.
#[derive(Debug)]
pub struct StartFailure {
    /// Its exit status, if it exited.
    pub status: Option<ExitStatus>,
    /// Everything it logged.
    pub log: String,
    /// How long it was given.
    pub elapsed: Duration,
}

impl ChildServer {
    /// Spawns `cmd` (stderr piped) and waits up to `limit` for a log line
    /// with `listening on ADDR`.
    pub fn spawn(cmd: Command, limit: Duration) -> Result<ChildServer, StartFailure> {
        Self::spawn_until(cmd, limit, parse_listening)
    }

    /// [`spawn`](Self::spawn), waiting for the first log line from which
    /// `address` reads the address (e.g. [`parse_serving`]).
    pub fn spawn_until(
        mut cmd: Command,
        limit: Duration,
        address: fn(&str) -> Option<SocketAddr>,
    ) -> Result<ChildServer, StartFailure> {
        let started = Instant::now();
        cmd.stderr(Stdio::piped())
            .stdout(Stdio::null())
            .stdin(Stdio::piped())
            .env("NO_COLOR", "1");
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        let stderr = child.stderr.take().expect("piped stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel::<SocketAddr>();
        {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    let line = strip_ansi(&line);
                    if let Some(addr) = address(&line) {
                        let _ = tx.send(addr);
                    }
                    let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
                    log.push_str(&line);
                    log.push('\n');
                }
            });
        }
        match rx.recv_timeout(limit) {
            Ok(addr) => Ok(ChildServer { child, addr, log }),
            Err(_) => {
                // Exited (the reader saw end of stream) or hung: collect what
                // it said, and make sure it is gone.
                let status = wait_timeout(&mut child, Duration::from_secs(60));
                if status.is_none() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                // Let the reader thread take the last lines.
                std::thread::sleep(Duration::from_millis(20));
                let log = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
                Err(StartFailure {
                    status,
                    log,
                    elapsed: started.elapsed(),
                })
            }
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the child logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits up to `limit` for a log line containing `text`.
    pub fn wait_for_log(&self, text: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.log().contains(text) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    /// Closes the child's stdin (child-mode servers stop on that).
    pub fn close_stdin(&mut self) {
        drop(self.child.stdin.take());
    }

    /// Sends `signal` to the child.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the pid of a child we spawned and still own.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
    }

    /// Waits up to `limit` for the child to exit; returns its status and
    /// full log. Kills it (and fails) if it does not exit in time.
    pub fn wait(mut self, limit: Duration) -> (ExitStatus, String) {
        let status = wait_timeout(&mut self.child, limit);
        let Some(status) = status else {
            let _ = self.child.kill();
            let _ = self.child.wait();
            panic!("child did not exit within {limit:?}; log:\n{}", self.log());
        };
        // The reader thread ends at the child's end of stream.
        std::thread::sleep(Duration::from_millis(20));
        (status, self.log())
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `child.wait()` with a limit.
pub fn wait_timeout(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => return None,
        }
    }
}

/// Re-runs this test binary's tests that `args` select (a filter and
/// harness flags) in a child process with `PERCORE_FAULT=fault`, which is
/// read once per process; `None`, after saying why, when this process
/// already runs under a fault or io_uring is unavailable here.
pub fn rerun_under_fault(args: &[&str], fault: &str) -> Option<std::process::Output> {
    if std::env::var_os("PERCORE_FAULT").is_some() {
        println!("skipped: already running under PERCORE_FAULT");
        return None;
    }
    crate::require(percore::Backend::Uring)?;
    let out = Command::new(std::env::current_exe().expect("current_exe"))
        .args(args)
        .env("PERCORE_FAULT", fault)
        .env_remove("PERCORE_BACKEND")
        .output()
        .expect("run the tests in a child");
    Some(out)
}

/// The environment variable that makes a test binary run [`child_main`]
/// instead of tests.
pub const CHILD_ENV: &str = "PERCORE_TEST_CHILD";

/// This test binary, re-run as an echo server (see [`child_main`]) with
/// `backend` (`uring`, `epoll`, `auto`).
pub fn child_command(entry_test: &str, backend: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("current_exe"));
    cmd.args([entry_test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, backend)
        .env_remove("PERCORE_BACKEND");
    cmd
}

/// The body of a test binary's child-entry test: when [`CHILD_ENV`] is set,
/// runs a server of `make`'s handlers on `127.0.0.1:0` with that backend, logs to stderr
/// (`listening on ADDR`), and on stdin's end of stream stops, prints each
/// core's `stats …` line and exits 0. A start-up failure prints
/// `start failed: …` and exits 3. Without the variable it does nothing.
pub fn child_main<H, F>(make: F)
where
    H: Handler,
    F: Fn(&CoreContext) -> H + Send + Sync + 'static,
{
    let Ok(backend) = std::env::var(CHILD_ENV) else {
        return;
    };
    let backend: Backend = backend.parse().expect("child backend");
    let _ = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .try_init();
    let handle = match builder(backend)
        .drain_timeout(Duration::from_secs(1))
        .start(make)
    {
        Ok(handle) => handle,
        Err(e) => {
            eprintln!("start failed: {e}");
            std::process::exit(3);
        }
    };
    eprintln!(
        "child listening on {} backend={}",
        handle.local_addr(),
        handle.backend()
    );
    let mut sink = Vec::new();
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
    handle.shutdown();
    let reader = handle.stats_reader();
    let result = handle.join();
    for core in reader.snapshot() {
        eprintln!("stats {core}");
    }
    if let Err(e) = result {
        eprintln!("join failed: {e}");
        std::process::exit(4);
    }
    std::process::exit(0);
}

/// The value of `key=` in a `stats …` line of a child's log, summed over
/// cores.
pub fn stat_from_log(log: &str, key: &str) -> Option<u64> {
    let prefix = format!("{key}=");
    let mut total = None;
    for line in log.lines().filter(|l| l.starts_with("stats ")) {
        for field in line.split_whitespace() {
            if let Some(v) = field.strip_prefix(&prefix) {
                *total.get_or_insert(0) += v.parse::<u64>().ok()?;
            }
        }
    }
    total
}

/// `BIN --host 127.0.0.1 --cores CPU --backend BACKEND ARGS`: a shipped
/// server binary as the tests run it, on the server CPU, logging at info,
/// with nothing inherited that would change its backend or inject faults.
pub fn server_command(bin: &str, backend: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args([
        "--host",
        "127.0.0.1",
        "--cores",
        &crate::server_cpu().to_string(),
    ])
    .args(["--backend", backend])
    .args(args)
    .env("RUST_LOG", "info")
    .env_remove("PERCORE_BACKEND")
    .env_remove("PERCORE_FAULT");
    cmd
}
