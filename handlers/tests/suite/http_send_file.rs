//! `Response::send_file` on both backends: a large cached range goes out
//! with `sendfile`, a short one with the head, a part from an offset, and
//! body bytes written before it come first; all arrive byte for byte.
//! Over TLS the bytes arrive the same (encrypted: never `sendfile`'s
//! plaintext). Without a declared length that covers it, the service's
//! error is a 500 and no file byte goes out.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use percore::fs::File;
use percore::tls::{self, rustls};
use percore::Server;
use percore_handlers::http::{Config, HttpHandler, Request, Response, Service};
use percore_test_kit::*;

use crate::support;
use support::http::TestServer;

const BIG: usize = 3 * 1024 * 1024 + 17;

/// Answers from one file: `/whole`, `/part` (1,000 bytes from 5,000),
/// `/small` (the first 100 bytes), `/after` ("head:" then the whole
/// file) and `/nolength` (no length declared).
#[derive(Clone)]
struct FileBodies(Arc<PathBuf>);

impl Service for FileBodies {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        let file = File::open(&*self.0).await?;
        let len = file.metadata().await?.len();
        match req.path() {
            "/whole" => {
                res.set_content_length(len)?;
                res.send_file(&file, 0, len).await
            }
            "/part" => {
                res.set_content_length(1_000)?;
                res.send_file(&file, 5_000, 1_000).await
            }
            "/small" => {
                res.set_content_length(100)?;
                res.send_file(&file, 0, 100).await
            }
            "/after" => {
                res.set_content_length(5 + len)?;
                res.write(b"head:");
                res.send_file(&file, 0, len).await
            }
            _ => res.send_file(&file, 0, 10).await,
        }
    }
}

struct Fixture {
    dir: PathBuf,
    data: Vec<u8>,
}

impl Fixture {
    fn new(name: &str) -> Fixture {
        let dir =
            std::env::temp_dir().join(format!("percore-sendfile-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the test's directory");
        let mut data = vec![0u8; BIG];
        Rng::new(0x5e4d).fill(&mut data);
        std::fs::write(dir.join("f"), &data).expect("write");
        // Read once: the page cache holds it, so `/whole` takes sendfile.
        std::fs::read(dir.join("f")).expect("read");
        Fixture { dir, data }
    }

    fn service(&self) -> FileBodies {
        FileBodies(Arc::new(self.dir.join("f")))
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The status and body of a `Connection: close` response.
fn split(all: &[u8]) -> (u16, Vec<u8>) {
    let end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    let status = String::from_utf8_lossy(&all[9..12])
        .parse()
        .expect("a status");
    (status, all[end..].to_vec())
}

fn get(addr: SocketAddr, path: &str) -> (u16, Vec<u8>) {
    let mut conn = connect(addr);
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    conn.write_all(req.as_bytes()).expect("write");
    let mut all = Vec::new();
    conn.read_to_end(&mut all).expect("read");
    split(&all)
}

backend_tests! {
    fn bodies_from_a_file(backend) {
        let fixture = Fixture::new(&format!("plain-{backend}"));
        let service = fixture.service();
        let server = TestServer::start(backend, Config::default(), move || service.clone());
        let data = &fixture.data;
        let (status, body) = get(server.addr, "/whole");
        assert_eq!(status, 200);
        assert!(body == *data, "{} bytes of {}", body.len(), data.len());
        assert_eq!(get(server.addr, "/part"), (200, data[5_000..6_000].to_vec()));
        assert_eq!(get(server.addr, "/small"), (200, data[..100].to_vec()));
        let (status, body) = get(server.addr, "/after");
        assert_eq!(status, 200);
        assert!(body[..5] == b"head:"[..] && body[5..] == data[..], "{} bytes", body.len());
        let (status, body) = get(server.addr, "/nolength");
        assert_eq!(status, 500);
        assert!(!body.windows(10).any(|w| w == &data[..10]), "no file byte without a length");
    }

    fn over_tls(backend) {
        let Some(cert) = TestCert::new(&format!("sendfile-{backend}")) else { return };
        let fixture = Fixture::new(&format!("tls-{backend}"));
        let service = fixture.service();
        let config = tls::server_config(&cert.cert, &cert.key).expect("server config");
        let server = Server::builder()
            .address(SocketAddr::from(([127, 0, 0, 1], 0)))
            .cores([server_cpu()])
            .backend(backend)
            .tls(config)
            .start(move |_core| HttpHandler::new(service.clone()))
            .expect("start");
        check_backend(&server, backend);
        let client: Arc<rustls::ClientConfig> = tls::client_config(&cert.ca).expect("client config");
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        let conn = rustls::ClientConnection::new(client, name).expect("client");
        let mut tls = rustls::StreamOwned::new(conn, connect(server.local_addr()));
        tls.write_all(b"GET /whole HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").expect("write");
        let mut all = Vec::new();
        let mut buf = [0u8; 64 * 1024];
        loop {
            match tls.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
        let (status, body) = split(&all);
        assert_eq!(status, 200);
        assert!(body == fixture.data, "{} bytes of {}", body.len(), fixture.data.len());
        server.shutdown();
        server.join().expect("join");
    }
}
