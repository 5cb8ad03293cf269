//! [`Prometheus`]: a real Prometheus server with a temporary data
//! directory, started by a test from a config text, queried over its HTTP
//! API, and killed when dropped. Skips (printing why) when prometheus is
//! not installed, unless the test script promised it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::http::Client;
use crate::upstream::eventually;

/// A running Prometheus.
#[derive(Debug)]
pub struct Prometheus {
    child: Child,
    dir: PathBuf,
    /// Where its HTTP API listens.
    pub addr: SocketAddr,
}

impl Prometheus {
    /// Starts prometheus with `config` (a `prometheus.yml`'s text) on a
    /// free port of 127.0.0.1; waits until it is ready. `None` (with a
    /// printed reason) when it is not installed.
    pub fn start(config: &str) -> Option<Prometheus> {
        if !crate::tools::installed("prometheus") {
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let dir =
            std::env::temp_dir().join(format!("percore-prometheus-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::fs::write(dir.join("prometheus.yml"), config).expect("config");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("log")).expect("log file"))
            .spawn()
            .expect("spawn prometheus");
        let prometheus = Prometheus { child, dir, addr };
        let ready = eventually(Duration::from_secs(60), || {
            prometheus
                .get("/-/ready")
                .is_some_and(|(status, _)| status == 200)
        });
        assert!(
            ready,
            "prometheus did not get ready; log:\n{}",
            prometheus.log()
        );
        Some(prometheus)
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    fn get(&self, target: &str) -> Option<(u16, String)> {
        std::net::TcpStream::connect(self.addr).ok()?;
        let mut client = Client::connect(self.addr);
        let request =
            format!("GET {target} HTTP/1.1\r\nHost: prometheus\r\nConnection: close\r\n\r\n");
        let resp = client.roundtrip(request.as_bytes());
        Some((
            resp.status,
            String::from_utf8_lossy(&resp.body).into_owned(),
        ))
    }

    /// The value of an instant query that gives one number (`sum(...)`),
    /// `None` while it has no result.
    pub fn query(&self, query: &str) -> Option<f64> {
        let (status, body) = self.get(&format!("/api/v1/query?query={}", encode(query)))?;
        assert_eq!(status, 200, "query {query}: {body}");
        // {"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1.7e9,"42"]}]}}
        let value = body.split("\"value\":[").nth(1)?;
        let number = value.split('"').nth(1)?;
        number.parse().ok()
    }
}

/// Percent-encodes a query for the URL.
fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
