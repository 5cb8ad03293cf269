//! HTTP over a Unix socket, on both backends: `HttpHandler` serves a
//! socket file unchanged, and the fan-out proxy reaches an upstream at a
//! Unix path beside a TCP one.

use crate::support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::PathBuf;

use percore::net::{Endpoint, UnixAddr};
use percore::{Server, ServerHandle};
use percore_handlers::http::{HttpEcho, HttpHandler};
use percore_test_kit::http::*;
use percore_test_kit::upstream::entries;
use percore_test_kit::*;
use support::fanout::proxy;
use support::http::*;

/// `HttpEcho` on a fresh socket file only.
fn unix_echo(backend: Backend, name: &str) -> (ServerHandle, PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "percore-http-unix-{}-{backend}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("socket directory");
    let path = dir.join("http.sock");
    let handle = Server::builder()
        .listen(UnixAddr::path(&path))
        .cores([server_cpu()])
        .backend(backend)
        .start(|_core| HttpHandler::new(HttpEcho))
        .expect("start");
    check_backend(&handle, backend);
    (handle, path)
}

backend_tests! {
    parallel;
    /// GET and POST on one kept-alive connection to the socket file.
    fn http_over_a_socket_file(backend) {
        let (server, path) = unix_echo(backend, "direct");
        let mut sock = StdUnixStream::connect(&path).expect("connect");
        sock.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        sock.write_all(&get("/hello")).expect("GET");
        sock.write_all(&post("/echo", "text/plain", b"over unix"))
            .expect("POST");
        sock.write_all(b"GET /bye HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .expect("last GET");
        let mut all = Vec::new();
        sock.read_to_end(&mut all).expect("read");
        assert_eq!(statuses(&all), vec![200, 200, 200]);
        let text = String::from_utf8_lossy(&all);
        assert_eq!(text.matches(r#"{"message":"Hello!"}"#).count(), 2, "{text}");
        assert!(text.contains("\r\n\r\nover unix"), "{text}");
        server.shutdown();
        server.join().expect("join");
    }

    /// The proxy fans a GET out to an upstream on a socket file and one on
    /// TCP; both answer, named by their addresses.
    fn proxy_upstream_on_a_socket_file(backend) {
        let (unix, path) = unix_echo(backend, "proxy");
        let tcp = TestServer::echo(backend);
        let upstreams = [Endpoint::Unix(UnixAddr::path(&path)), Endpoint::Tcp(tcp.addr)];
        let px = proxy(backend, &upstreams, |_| {});
        let mut c = Client::connect(px.addr);
        for _ in 0..3 {
            let r = c.roundtrip(&get("/hello"));
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            let e = entries(&r.body);
            assert_eq!(e.len(), 2);
            assert_eq!((e[0].0.as_str(), e[0].1), (format!("unix:{}", path.display()).as_str(), 200));
            assert_eq!((e[1].0.clone(), e[1].1), (tcp.addr.to_string(), 200));
        }
        // The upstream connection on the socket was kept and reused.
        assert_eq!(sum(&unix.stats(), |c| c.accepted), 1);
        unix.shutdown();
        unix.join().expect("join");
    }
}
