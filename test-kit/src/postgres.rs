//! [`Postgres`]: a real PostgreSQL server in a temporary data directory,
//! started by a test and stopped when dropped. Skips (printing why) when
//! PostgreSQL is not installed, unless the test script promised it.
//!
//! As root (CI), the server runs as the `postgres` user the package
//! creates: `initdb` refuses to run as root.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where Debian's packages put each major version's binaries.
const VERSIONS: &str = "/usr/lib/postgresql";

/// A running PostgreSQL, listening on a free port of 127.0.0.1 with
/// `trust` authentication for the user `postgres`.
#[derive(Debug)]
pub struct Postgres {
    bin: PathBuf,
    /// Its data directory (removed when dropped).
    pub dir: PathBuf,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl Postgres {
    /// Creates a cluster in a temporary directory and starts it. `None`
    /// (with a printed reason) when PostgreSQL is not installed; a failure
    /// when `PERCORE_TEST_TOOLS` names `postgresql`.
    pub fn start() -> Option<Postgres> {
        let Some(bin) = newest_bin() else {
            let promised = std::env::var("PERCORE_TEST_TOOLS").unwrap_or_default();
            assert!(
                !promised.split(',').any(|t| t == "postgresql"),
                "PostgreSQL not installed (no {VERSIONS}/*/bin/initdb), though the test script installs it"
            );
            println!("skipped: PostgreSQL not installed (no {VERSIONS}/*/bin/initdb)");
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let dir = std::env::temp_dir().join(format!("percore-pg-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("PostgreSQL's temp dir");
        if is_root() {
            let out = Command::new("chown")
                .args(["-R", "postgres:", &dir.display().to_string()])
                .output()
                .expect("run chown");
            check("chown the data dir to postgres", &out);
        }
        let pg = Postgres { bin, dir, port };
        let data = pg.dir.join("data").display().to_string();
        let out = pg.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        check("initdb", &out);
        let options = format!(
            "-p {port} -c listen_addresses=127.0.0.1 -k {} -c fsync=off -c max_connections=50",
            pg.dir.display()
        );
        let log = pg.dir.join("log").display().to_string();
        let out = pg.run(
            "pg_ctl",
            &[
                "-D", &data, "-o", &options, "-l", &log, "-t", "60", "-w", "start",
            ],
        );
        check(&format!("pg_ctl start (log: {})", pg.log()), &out);
        Some(pg)
    }

    /// A tokio-postgres (libpq-style) connection string for it.
    pub fn config(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres",
            self.port
        )
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// Runs one of its binaries, as `postgres` when this process is root.
    fn run(&self, tool: &str, args: &[&str]) -> Output {
        let path = self.bin.join(tool);
        let mut cmd = if is_root() {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(&path);
            cmd
        } else {
            Command::new(&path)
        };
        cmd.args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", path.display()))
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.dir.join("data").display().to_string();
        let out = self.run("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
        if !out.status.success() {
            eprintln!(
                "pg_ctl stop failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The `bin` directory of the newest installed major version.
fn newest_bin() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(VERSIONS)
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let major = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            Path::new(&bin.join("initdb"))
                .exists()
                .then_some((major, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn check(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
