//! Heap allocations per request on a kept-alive TLS connection in steady
//! state, on both backends, counted on the server's core thread as
//! `http_alloc.rs` counts them in the clear.
//!
//! rustls's buffered connection allocates for every record it encrypts
//! and decrypts (its own queues of records and of plaintext), so a TLS
//! request is not free as a plain one is. This test holds the count at
//! what it is, so that a change that adds one is seen.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;

use percore::tls::{self, rustls};
use percore::Server;
use percore_handlers::http::{Config, HttpEcho, HttpHandler};
use percore_test_kit::alloc::*;
use percore_test_kit::*;

/// The allocations a kept-alive TLS request makes on the core thread:
/// rustls's buffered connection copies the request's decrypted plaintext
/// into a queue of its own (1) and the answer's record into another (1),
/// and the write's TLS state is boxed to keep the plain write small (1).
/// The record buffer the send takes is reused from the last write.
const MOST_PER_REQUEST: u64 = 3;

type TlsClient = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// One request and its answer, whose length the echo's `Content-Length`
/// gives; the answer's body is returned.
fn exchange(client: &mut TlsClient, request: &[u8], buf: &mut Vec<u8>) -> Vec<u8> {
    client.write_all(request).expect("write");
    buf.clear();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .expect("a content-length");
            assert!(head.starts_with("http/1.1 200"), "{head}");
            if buf.len() >= end + 4 + len {
                assert_eq!(buf.len(), end + 4 + len, "nothing past the answer");
                return buf[end + 4..].to_vec();
            }
        }
        let n = client.read(&mut chunk).expect("read");
        assert!(n > 0, "the server closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
const POST: &[u8] =
    b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 32\r\n\r\n0123456789abcdef0123456789abcdef";

backend_tests! {
    /// 2,000 GETs and POSTs after a warm-up: at most
    /// [`MOST_PER_REQUEST`] allocations each on the core thread.
    fn allocations_per_tls_request(backend) {
        let Some(cert) = TestCert::new(&format!("tls-alloc-{backend}")) else { return };
        let tls_config = tls::server_config(&cert.cert, &cert.key).expect("server config");
        let mut config = Config::default();
        config.max_requests = u32::MAX;
        let server = Server::builder()
            .address(SocketAddr::from(([127, 0, 0, 1], 0)))
            .cores([server_cpu()])
            .backend(backend)
            .tls(tls_config)
            .start(move |_core| {
                TRACKED.with(|t| t.set(true));
                HttpHandler::with_config(HttpEcho, config)
            })
            .expect("start");
        check_backend(&server, backend);
        let client_config = tls::client_config(&cert.ca).expect("client config");
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        let conn = rustls::ClientConnection::new(client_config, name).expect("client");
        let mut client = rustls::StreamOwned::new(conn, connect(server.local_addr()));
        let mut buf = Vec::new();
        for _ in 0..200 {
            exchange(&mut client, GET, &mut buf);
            exchange(&mut client, POST, &mut buf);
        }

        ALLOCS.store(0, Ordering::Relaxed);
        COUNTING.store(true, Ordering::SeqCst);
        for _ in 0..1000 {
            exchange(&mut client, GET, &mut buf);
            assert_eq!(exchange(&mut client, POST, &mut buf), &POST[POST.len() - 32..]);
        }
        COUNTING.store(false, Ordering::SeqCst);

        let allocs = ALLOCS.load(Ordering::Relaxed);
        let sizes: Vec<usize> = SIZES.iter().map(|s| s.load(Ordering::Relaxed)).collect();
        println!("{backend}: {allocs} allocations over 2000 TLS requests (first sizes {sizes:?})");
        assert!(
            allocs <= 2000 * MOST_PER_REQUEST,
            "{allocs} allocations over 2000 TLS requests; first sizes {sizes:?}"
        );
        drop(client);
        server.shutdown();
        server.join().expect("join");
    }
}
