//! [`Haproxy`]: a real HAProxy in the foreground, run from a config file
//! with its `"${VAR}"`s given in the environment, and its state read from
//! its stats socket. Killed when dropped. Skips (printing why) when
//! haproxy is not installed, unless the test script promised it.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::upstream::eventually;

/// A running HAProxy.
#[derive(Debug)]
pub struct Haproxy {
    child: Child,
    dir: PathBuf,
    /// Its stats socket.
    pub socket: PathBuf,
}

/// One row of `show stat`: a frontend, a backend or a server.
#[derive(Debug, Clone, Default)]
pub struct StatRow {
    /// The proxy (frontend or backend) name.
    pub proxy: String,
    /// The server's name, or `FRONTEND`/`BACKEND`.
    pub name: String,
    /// `UP`, `DOWN`, `UP 1/2` (going down), `DOWN 1/2` (coming up), `MAINT`...
    pub status: String,
    /// The last check's result: `L7OK`, `L7STS` (a bad status: not
    /// ready), `L4CON` (refused), `L4TOUT`...
    pub check_status: String,
    /// Sessions to it so far.
    pub sessions: u64,
    /// Its 2xx and 5xx responses.
    pub responses_2xx: u64,
    /// 5xx responses.
    pub responses_5xx: u64,
    /// Connection errors, response errors, retries and redispatches.
    pub errors_connect: u64,
    /// Response errors (a server that closed or reset mid-response).
    pub errors_response: u64,
    /// Retries.
    pub retries: u64,
    /// Redispatches to another server.
    pub redispatches: u64,
}

impl Haproxy {
    /// Starts `haproxy -db -f config`, with `env` for the config's
    /// variables and `HAPROXY_STATS_SOCKET` set to a socket of its own;
    /// waits until the socket answers. `None` (with a printed reason) when
    /// haproxy is not installed.
    pub fn start(config: &Path, env: &[(&str, String)]) -> Option<Haproxy> {
        if !crate::tools::installed("haproxy") {
            return None;
        }
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "percore-haproxy-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let socket = dir.join("stats.sock");
        let mut cmd = Command::new("haproxy");
        cmd.args(["-db", "-f"])
            .arg(config)
            .env("HAPROXY_STATS_SOCKET", &socket)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("log")).expect("log file"));
        for (key, value) in env {
            cmd.env(key, value);
        }
        let child = cmd.spawn().expect("spawn haproxy");
        let haproxy = Haproxy { child, dir, socket };
        let up = eventually(Duration::from_secs(60), || {
            haproxy.command("show info").is_some()
        });
        assert!(up, "haproxy did not start; log:\n{}", haproxy.log());
        Some(haproxy)
    }

    /// Its output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// A command's answer on the stats socket.
    pub fn command(&self, command: &str) -> Option<String> {
        let mut s = UnixStream::connect(&self.socket).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        s.write_all(format!("{command}\n").as_bytes()).ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        Some(out)
    }

    /// `show stat`, one row per frontend, backend and server.
    pub fn stats(&self) -> Vec<StatRow> {
        let Some(csv) = self.command("show stat") else {
            return Vec::new();
        };
        let mut lines = csv.lines();
        let Some(header) = lines.next() else {
            return Vec::new();
        };
        let names: Vec<&str> = header.trim_start_matches("# ").split(',').collect();
        let col = |name: &str| names.iter().position(|n| *n == name);
        let mut rows = Vec::new();
        for line in lines.filter(|l| !l.is_empty()) {
            let fields: Vec<&str> = line.split(',').collect();
            let text = |name: &str| {
                col(name)
                    .and_then(|i| fields.get(i))
                    .map(|s| s.to_string())
                    .unwrap_or_default()
            };
            let number = |name: &str| text(name).parse().unwrap_or(0);
            rows.push(StatRow {
                proxy: text("pxname"),
                name: text("svname"),
                status: text("status"),
                check_status: text("check_status"),
                sessions: number("stot"),
                responses_2xx: number("hrsp_2xx"),
                responses_5xx: number("hrsp_5xx"),
                errors_connect: number("econ"),
                errors_response: number("eresp"),
                retries: number("wretr"),
                redispatches: number("wredis"),
            });
        }
        rows
    }

    /// Server `name`'s row.
    pub fn server(&self, name: &str) -> StatRow {
        self.stats()
            .into_iter()
            .find(|r| r.name == name)
            .unwrap_or_default()
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
