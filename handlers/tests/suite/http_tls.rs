//! The HTTP layer over TLS, on both backends, with a blocking rustls
//! client: keep-alive and pipelining, a slow head (408), the head and
//! body limits (431, 413), and a body cut off without `close_notify`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use percore::tls::{self, rustls};
use percore::{Server, ServerHandle};
use percore_handlers::http::{Config, HttpEcho, HttpHandler};
use percore_test_kit::http::statuses;
use percore_test_kit::*;

/// `HttpEcho` over TLS on a one-core server, with `config`.
fn https_echo(backend: Backend, cert: &TestCert, config: Config) -> ServerHandle {
    let tls = tls::server_config(&cert.cert, &cert.key).expect("server config");
    let server = Server::builder()
        .address(SocketAddr::from(([127, 0, 0, 1], 0)))
        .cores([server_cpu()])
        .backend(backend)
        .tls(tls)
        .start(move |_core| HttpHandler::with_config(HttpEcho, config))
        .expect("start");
    check_backend(&server, backend);
    server
}

type TlsClient = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A blocking TLS client connection to `localhost` at `addr`.
fn tls_connect(addr: SocketAddr, ca: &std::path::Path) -> TlsClient {
    let config: Arc<rustls::ClientConfig> = tls::client_config(ca).expect("client config");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let conn = rustls::ClientConnection::new(config, name).expect("client");
    let sock = connect(addr);
    rustls::StreamOwned::new(conn, sock)
}

/// Everything until the server closes (a reset or a missing
/// `close_notify` counts as the end too).
fn read_all(client: &mut TlsClient) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match client.read(&mut buf) {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

const GET: &[u8] = b"GET /a HTTP/1.1\r\nHost: t\r\n\r\n";
const LAST: &[u8] = b"GET /b HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";

backend_tests! {
    parallel;
    /// Three pipelined requests and a last one that closes, in one write,
    /// on one kept-alive TLS connection: four answers, in order.
    fn pipelined_keep_alive(backend) {
        let Some(cert) = TestCert::new(&format!("http-pipe-{backend}")) else { return };
        let server = https_echo(backend, &cert, Config::default());
        let mut client = tls_connect(server.local_addr(), &cert.ca);
        let mut batch = Vec::new();
        for _ in 0..3 {
            batch.extend_from_slice(GET);
        }
        batch.extend_from_slice(LAST);
        client.write_all(&batch).expect("write");
        let all = read_all(&mut client);
        assert_eq!(statuses(&all), vec![200, 200, 200, 200], "{}", String::from_utf8_lossy(&all));
        server.shutdown();
        server.join().expect("join");
    }

    /// A head that stops coming is answered 408 at the head timeout.
    fn slow_head_times_out(backend) {
        let Some(cert) = TestCert::new(&format!("http-slow-{backend}")) else { return };
        let mut config = Config::default();
        config.head_timeout = Duration::from_millis(300);
        let server = https_echo(backend, &cert, config);
        let mut client = tls_connect(server.local_addr(), &cert.ca);
        client.write_all(b"GET / HTTP/1.1\r\nHost:").expect("write");
        let all = read_all(&mut client);
        assert_eq!(statuses(&all), vec![408], "{}", String::from_utf8_lossy(&all));
        server.shutdown();
        server.join().expect("join");
    }

    /// Too many header fields: 431; a declared body over the limit: 413.
    fn limits_hold(backend) {
        let Some(cert) = TestCert::new(&format!("http-limits-{backend}")) else { return };
        let mut config = Config::default();
        config.limits.max_headers = 4;
        config.limits.max_body = 1000;
        let server = https_echo(backend, &cert, config);
        let mut client = tls_connect(server.local_addr(), &cert.ca);
        let mut head = b"GET / HTTP/1.1\r\nHost: t\r\n".to_vec();
        for i in 0..8 {
            head.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        head.extend_from_slice(b"\r\n");
        client.write_all(&head).expect("write");
        assert_eq!(statuses(&read_all(&mut client)), vec![431]);
        let mut client = tls_connect(server.local_addr(), &cert.ca);
        client
            .write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n")
            .expect("write");
        assert_eq!(statuses(&read_all(&mut client)), vec![413]);
        server.shutdown();
        server.join().expect("join");
    }

    /// A body whose connection ends without `close_notify` is not taken
    /// for a whole one: no 200 comes back. (That the reader sees such an
    /// end as an error, not a clean one, is the framework's `tls` test.)
    fn a_body_cut_without_close_notify(backend) {
        let Some(cert) = TestCert::new(&format!("http-cut-{backend}")) else { return };
        let server = https_echo(backend, &cert, Config::default());
        let mut client = tls_connect(server.local_addr(), &cert.ca);
        client
            .write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789")
            .expect("write");
        client.flush().expect("flush");
        // The TCP connection ends under TLS, without close_notify.
        client.sock.shutdown(std::net::Shutdown::Write).expect("shutdown");
        let all = read_all(&mut client);
        assert!(!statuses(&all).contains(&200), "{}", String::from_utf8_lossy(&all));
        server.shutdown();
        server.join().expect("join");
    }
}
