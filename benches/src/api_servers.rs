//! The servers of the `api` cells, run as child processes: the `json_api`
//! example (percore, on the backend the executor names) for `uring` and
//! `epoll`, and `axum_api` (axum on one tokio current-thread runtime per
//! core) for `tokio-ct`. Each gets a free loopback port and the server
//! CPUs, and is stopped with SIGTERM.
//!
//! Why processes and not servers in this one, as for the other cells:
//! the two are applications, each built from its own package as a user
//! would ship it, and the cell compares them as they are. The harness
//! reads each one's CPU time as its whole process's (main and signal
//! threads included, which sleep); its allocations are not counted (the
//! cells' allocs/op are the client's). What it does not: build the binaries.
//! They are looked up beside the bench binary (`target/release/`) or at
//! the paths in `JSON_API` and `AXUM_API`; a missing one makes its cells
//! skipped, with the command that builds it.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::scratch::ScratchDir;
use crate::server::{Executor, ServerControl, Unavailable};
use crate::target::Target;

/// How long a server may take to start listening.
const START_LIMIT: Duration = Duration::from_secs(10);

/// How long a server has to exit after SIGTERM before it is killed.
const TERM_LIMIT: Duration = Duration::from_secs(3);

/// One of the two server binaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binary {
    /// The percore example, `examples/src/bin/json_api.rs`.
    JsonApi,
    /// Its axum twin, `benches/src/bin/axum_api.rs`.
    AxumApi,
}

impl Binary {
    /// The binary serving the API for `executor`, if there is one.
    pub fn of(executor: Executor) -> Option<Binary> {
        match executor {
            Executor::Uring | Executor::Epoll => Some(Binary::JsonApi),
            Executor::TokioCt => Some(Binary::AxumApi),
            Executor::TokioMt => None,
        }
    }

    /// Its file name.
    pub fn name(self) -> &'static str {
        match self {
            Binary::JsonApi => "json_api",
            Binary::AxumApi => "axum_api",
        }
    }

    /// The environment variable that names another path for it.
    fn variable(self) -> &'static str {
        match self {
            Binary::JsonApi => "JSON_API",
            Binary::AxumApi => "AXUM_API",
        }
    }

    /// The command that builds it where the bench binary looks.
    fn build_command(self) -> &'static str {
        match self {
            Binary::JsonApi => "cargo build --release -p percore-examples --bin json_api",
            Binary::AxumApi => "cargo build --release -p percore-benches --bin axum_api",
        }
    }

    /// Where it is: the environment variable's path, or the profile
    /// directory of the running binary (`target/release/` for `cargo
    /// bench`, whose binary sits in its `deps/`).
    pub fn path(self) -> PathBuf {
        if let Some(p) = std::env::var_os(self.variable()) {
            return PathBuf::from(p);
        }
        let exe = std::env::current_exe().unwrap_or_default();
        let mut dir = exe.parent().unwrap_or(Path::new(".")).to_path_buf();
        if dir.file_name().is_some_and(|n| n == "deps") {
            dir.pop();
        }
        dir.join(self.name())
    }
}

/// One line for the report: which binary each executor runs in the `api`
/// cells.
pub fn describe() -> String {
    format!(
        "note: api workloads: uring and epoll run {} (--backend uring|epoll), tokio-ct runs {} \
         (axum); no tokio-mt server; server CPU is each server process's",
        Binary::JsonApi.path().display(),
        Binary::AxumApi.path().display()
    )
}

/// Starts the API server of `executor` on `cpus` (its `--cores`; none
/// given if empty) and returns once it accepts connections.
///
/// # Errors
///
/// [`Unavailable`] when the executor has no API server, its binary is
/// missing, or it exits or stays deaf before `START_LIMIT` (10 s); the reason
/// carries the end of its output.
pub fn start(executor: Executor, cpus: &[usize]) -> Result<Box<dyn ServerControl>, Unavailable> {
    let Some(binary) = Binary::of(executor) else {
        return Err(Unavailable(format!(
            "no {} API server: axum_api runs one current-thread runtime per core, as tokio-ct",
            executor.name()
        )));
    };
    let path = binary.path();
    if !path.is_file() {
        return Err(Unavailable(format!(
            "no {} binary at {} (build it with `{}`, or name it with {}=PATH)",
            binary.name(),
            path.display(),
            binary.build_command(),
            binary.variable()
        )));
    }
    let unavailable = |why: String| Unavailable(format!("{}: {why}", binary.name()));
    let port = free_port().map_err(|e| unavailable(format!("no free port: {e}")))?;
    let scratch = ScratchDir::new(&format!("api-{}", executor.name()))
        .map_err(|e| unavailable(format!("no directory for its output: {e}")))?;
    let log = scratch.path().join("stderr");
    let mut cmd = Command::new(&path);
    cmd.args(["--port", &port.to_string()]);
    if !cpus.is_empty() {
        let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
        cmd.args(["--cores", &list.join(",")]);
    }
    match executor {
        Executor::Uring => cmd.args(["--backend", "uring"]),
        Executor::Epoll => cmd.args(["--backend", "epoll"]),
        _ => &mut cmd,
    };
    // It would override --backend: never report one backend's numbers
    // under the other's name.
    cmd.env_remove("PERCORE_BACKEND");
    let stderr = std::fs::File::create(&log)
        .map_err(|e| unavailable(format!("cannot create {}: {e}", log.display())))?;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| unavailable(format!("cannot run {}: {e}", path.display())))?;
    let mut server = ApiServer {
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        child: ChildGuard(child),
        log,
        _scratch: scratch,
    };
    server.wait_listening().map_err(unavailable)?;
    Ok(Box::new(server))
}

/// A port nobody listens on now. Another process could take it before
/// the server binds it: the start then fails, it does not measure the
/// wrong server (the first answer of every connection is checked).
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Kills the child if it is still running when dropped, so that a failed
/// start or a panicking run leaves no server behind.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        // Both fail only if the child is already reaped: nothing left to do.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct ApiServer {
    addr: SocketAddr,
    child: ChildGuard,
    /// The child's stderr, shown when it fails.
    log: PathBuf,
    /// Holds `log`; removed with the server.
    _scratch: ScratchDir,
}

impl ApiServer {
    fn wait_listening(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_LIMIT;
        loop {
            if let Ok(Some(status)) = self.child.0.try_wait() {
                return Err(format!(
                    "exited ({status}) before listening{}",
                    self.output()
                ));
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(100)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "not listening on {} after {} s{}",
                    self.addr,
                    START_LIMIT.as_secs(),
                    self.output()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last lines of the child's stderr, for a message.
    fn output(&self) -> String {
        let mut text = String::new();
        // An unreadable log just leaves the message shorter.
        let _ = std::fs::File::open(&self.log).and_then(|mut f| f.read_to_string(&mut text));
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(5)..].join("\n  ");
        if tail.is_empty() {
            String::new()
        } else {
            format!("; its output:\n  {tail}")
        }
    }
}

impl ServerControl for ApiServer {
    fn target(&self) -> Target {
        Target::Tcp(self.addr)
    }

    fn process(&self) -> Option<u32> {
        Some(self.child.0.id())
    }

    fn stop(mut self: Box<Self>) -> io::Result<()> {
        let pid = self.child.0.id() as libc::pid_t;
        // SAFETY: kill has no memory-safety preconditions; the child is
        // not reaped yet (only this method and the guard wait for it), so
        // the pid is still its own.
        if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let deadline = Instant::now() + TERM_LIMIT;
        while Instant::now() < deadline {
            match self.child.0.try_wait()? {
                Some(status) if status.success() => return Ok(()),
                Some(status) => {
                    return Err(io::Error::other(format!(
                        "exited with {status} on SIGTERM{}",
                        self.output()
                    )))
                }
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        // The guard kills it when `self` drops.
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "still running {} s after SIGTERM; killed",
                TERM_LIMIT.as_secs()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_executor_but_tokio_mt_has_a_binary() {
        assert_eq!(Binary::of(Executor::Uring), Some(Binary::JsonApi));
        assert_eq!(Binary::of(Executor::Epoll), Some(Binary::JsonApi));
        assert_eq!(Binary::of(Executor::TokioCt), Some(Binary::AxumApi));
        assert_eq!(Binary::of(Executor::TokioMt), None);
        assert!(start(Executor::TokioMt, &[]).is_err());
    }

    /// The `api/users` client against `axum_api`, its CPU read from its
    /// process, and the stop by SIGTERM; skipped where the binary is not
    /// built (`cargo test` builds it for nothing but integration tests).
    #[test]
    fn axum_api_serves_the_cell() {
        let path = Binary::AxumApi.path();
        if !path.is_file() {
            println!("skipped: no {}", path.display());
            return;
        }
        let server = start(Executor::TokioCt, &[]).unwrap_or_else(|e| panic!("{e}"));
        let pid = server.process().expect("a process of its own");
        let cpu = || crate::sys::process_cpu_seconds(pid);
        let mut probe = crate::probe::Probe::new(&cpu);
        let addr = server.target().tcp().expect("TCP");
        let load = crate::client::api_concurrent(addr, 4, Duration::from_millis(50), &mut probe)
            .expect("the API's answers");
        assert!(load.ops > 0);
        assert!(probe.window().expect("window").server_cpu_s.is_some());
        server.stop().expect("stops on SIGTERM");
    }

    #[test]
    fn binaries_sit_beside_the_running_one() {
        if std::env::var_os("AXUM_API").is_some() {
            return;
        }
        let path = Binary::AxumApi.path();
        assert_eq!(path.file_name().unwrap(), "axum_api");
        assert_ne!(path.parent().unwrap().file_name().unwrap(), "deps");
    }
}
