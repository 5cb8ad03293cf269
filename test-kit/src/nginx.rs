//! [`Nginx`]: a real nginx in the foreground, with a temporary prefix,
//! started by a test and killed when dropped. Skips (printing why) when
//! nginx is not installed, unless the test script promised it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::upstream::eventually;

const NGINX: &str = "/usr/sbin/nginx";

/// A running nginx.
#[derive(Debug)]
pub struct Nginx {
    child: Child,
    /// Where it listens (127.0.0.1 and a free port).
    pub addr: std::net::SocketAddr,
    /// Its prefix directory (config, logs, temp files, `html/`).
    pub dir: PathBuf,
}

impl Nginx {
    /// Starts nginx listening on a free port of 127.0.0.1; `server` gives
    /// the inside of its `server { }` block (after `listen`), from its
    /// prefix directory. `None` (with a printed reason) when nginx is not
    /// installed; a failure when `PERCORE_TEST_TOOLS` names it.
    pub fn start(server: impl FnOnce(&Path) -> String) -> Option<Nginx> {
        if !Path::new(NGINX).exists() {
            let promised = std::env::var("PERCORE_TEST_TOOLS").unwrap_or_default();
            assert!(
                !promised.split(',').any(|t| t == "nginx"),
                "nginx not installed, though the test script installs it"
            );
            println!("skipped: nginx not installed");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let dir = std::env::temp_dir().join(format!("percore-nginx-{}-{port}", std::process::id()));
        std::fs::create_dir_all(dir.join("html")).expect("temp dir");
        let conf = format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
             error_log {d}/error.log;\nevents {{ worker_connections 256; }}\n\
             http {{\n access_log off;\n client_body_temp_path {d};\n proxy_temp_path {d};\n\
             fastcgi_temp_path {d};\n uwsgi_temp_path {d};\n scgi_temp_path {d};\n\
             server {{\n  listen 127.0.0.1:{port};\n{server}\n }}\n}}\n",
            d = dir.display(),
            server = server(&dir),
        );
        std::fs::write(dir.join("nginx.conf"), conf).expect("config");
        let child = Command::new(NGINX)
            .args([
                "-p",
                &dir.display().to_string(),
                "-c",
                &dir.join("nginx.conf").display().to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn nginx");
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let up = eventually(Duration::from_secs(60), || {
            std::net::TcpStream::connect(addr).is_ok()
        });
        let nginx = Nginx { child, addr, dir };
        assert!(up, "nginx did not listen; log: {}", nginx.log());
        Some(nginx)
    }

    /// Its error log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
