//! The fan-out proxy in front of a real third-party server: nginx serving
//! a static file on 127.0.0.1, next to an in-process `http_echo`, on both
//! backends. Skips (printing why) when `/usr/sbin/nginx` is missing; CI
//! installs it with apt-get.

mod support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use percore_test_kit::http::*;
use percore_test_kit::upstream::{entries, eventually};
use percore_test_kit::*;
use support::fanout::proxy;
use support::http::*;

const NGINX: &str = "/usr/sbin/nginx";
const STATIC: &str = "static file from nginx\n";

/// nginx in the foreground with a temporary prefix; killed when dropped.
struct Nginx {
    child: Child,
    addr: std::net::SocketAddr,
    dir: std::path::PathBuf,
}

impl Nginx {
    fn start() -> Option<Nginx> {
        if !std::path::Path::new(NGINX).exists() {
            // The test script installs nginx: there, missing is a failure.
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
        std::fs::write(dir.join("html/index.txt"), STATIC).expect("static file");
        let conf = format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
             error_log {d}/error.log;\nevents {{ worker_connections 64; }}\n\
             http {{\n access_log off;\n client_body_temp_path {d};\n proxy_temp_path {d};\n\
             fastcgi_temp_path {d};\n uwsgi_temp_path {d};\n scgi_temp_path {d};\n\
             server {{\n  listen 127.0.0.1:{port};\n  root {d}/html;\n  default_type text/plain;\n }}\n}}\n",
            d = dir.display()
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

    fn log(&self) -> String {
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

backend_tests! {
    parallel;
    /// GET /index.txt fanned out to nginx and http_echo: nginx's file and
    /// the echo's 404-free answer, over reused keep-alive connections.
    fn nginx_and_echo(backend) {
        let Some(nginx) = Nginx::start() else { return };
        let echo = TestServer::echo(backend);
        let px = proxy(backend, &[nginx.addr, echo.addr], |_| {});
        let mut c = Client::connect(px.addr);
        for _ in 0..5 {
            let r = c.roundtrip(&get("/index.txt"));
            assert_eq!(r.status, 200, "{}; nginx log: {}", String::from_utf8_lossy(&r.body), nginx.log());
            let e = entries(&r.body);
            assert_eq!(e.len(), 2);
            assert_eq!((e[0].0.clone(), e[0].1, e[0].2.as_str()), (nginx.addr.to_string(), 200, STATIC));
            assert_eq!((e[1].1, e[1].2.as_bytes()), (200, HELLO));
        }
        // nginx's 404 is its answer, not a proxy failure.
        let r = c.roundtrip(&get("/missing"));
        assert_eq!(r.status, 200);
        assert_eq!(entries(&r.body)[0].1, 404);
        assert_eq!(echo.stats().accepted, 1, "echo connection reused");
    }
}
