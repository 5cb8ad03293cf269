//! Upgrades and WebSocket basics on both backends, over TCP, a Unix
//! socket and TLS: the stream handed over with the bytes read past the
//! head, upgrades a route declines served as HTTP, the handshake's
//! refusals (FAULTS M1), and an echo's round trips and close.

use crate::support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream as StdUnixStream;

use percore::net::UnixAddr;
use percore::tls;
use percore::Server;
use percore_handlers::http::HttpHandler;
use percore_handlers::ws::WsConfig;
use percore_test_kit::http::statuses;
use percore_test_kit::*;
use support::ws::*;

/// A status line and head read from a fresh connection after `request`.
fn answer(addr: std::net::SocketAddr, request: &[u8]) -> String {
    let mut c = connect(addr);
    c.write_all(request).expect("send");
    let mut all = Vec::new();
    let _ = c.read_to_end(&mut all);
    String::from_utf8_lossy(&all).into_owned()
}

/// Text, binary, ping and close on an echo, whatever the stream.
fn echo_round_trips<S: Read + Write>(c: &mut WsClient<S>) {
    c.send_frame(true, 1, "héllo".as_bytes());
    assert_eq!(c.data_frame().expect("text"), frame(1, "héllo".as_bytes()));
    c.send_frame(true, 2, &[0, 1, 2, 255]);
    assert_eq!(c.data_frame().expect("binary"), frame(2, &[0, 1, 2, 255]));
    c.send_frame(true, 9, b"are you there");
    assert_eq!(c.frame().expect("pong"), frame(10, b"are you there"));
    c.send_frame(true, 8, &[0x03, 0xe8, b'b', b'y', b'e']);
    let close = c.frame().expect("close");
    assert_eq!(close.close_code(), 1000);
    assert!(c.until_closed().is_empty(), "nothing after the close");
}

fn frame(opcode: u8, payload: &[u8]) -> Frame {
    Frame {
        fin: true,
        opcode,
        payload: payload.to_vec(),
    }
}

backend_tests! {
    parallel;
    /// A route takes the connection after its 101, and the bytes the
    /// client sent right behind its request (in the same write) reach
    /// the new protocol first: nothing is lost.
    fn upgrade_hands_over_the_stream_with_the_bytes_read(backend) {
        let server = ws_server(backend, WsConfig::default());
        let mut c = connect(server.local_addr());
        let mut req = b"GET /raw HTTP/1.1\r\nHost: t\r\nConnection: upgrade\r\nUpgrade: x-echo\r\n\r\n".to_vec();
        req.extend_from_slice(b"early bytes;");
        c.write_all(&req).expect("send");
        let mut client = WsClient::new(c);
        let head = client.read_head();
        assert!(head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"), "{head}");
        assert!(head.contains("Upgrade: x-echo\r\n") && head.contains("Connection: Upgrade\r\n"), "{head}");
        assert!(!head.contains("Content-Length") && !head.contains("Transfer-Encoding"), "{head}");
        client.send_raw(b"later bytes");
        // The echo may have come with the head.
        let mut got = client.take_buffered();
        let want = b"early bytes;later bytes";
        let mut buf = [0u8; 64];
        while got.len() < want.len() {
            let n = client.stream.read(&mut buf).expect("echo");
            assert!(n > 0, "closed early: {got:?}");
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(&got, want);
        drop(client);
        server.shutdown();
        server.join().expect("join");
    }

    /// An upgrade the route does not accept is served as a request, and
    /// the connection stays HTTP: the next request is answered too.
    fn an_upgrade_not_accepted_is_served_as_http(backend) {
        let server = ws_server(backend, WsConfig::default());
        let all = answer(
            server.local_addr(),
            b"GET /raw HTTP/1.1\r\nHost: t\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n\
              GET /raw HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(statuses(all.as_bytes()), vec![200, 200], "{all}");
        // A body makes a request unfit for an upgrade (its bytes would be
        // taken for the new protocol's): served as HTTP.
        let all = answer(
            server.local_addr(),
            b"POST /raw HTTP/1.1\r\nHost: t\r\nConnection: upgrade, close\r\nUpgrade: x-echo\r\nContent-Length: 3\r\n\r\nabc",
        );
        assert_eq!(statuses(all.as_bytes()), vec![200], "{all}");
        server.shutdown();
        server.join().expect("join");
    }

    /// FAULTS M1: a missing or malformed key, another version, a POST, a
    /// body, an origin the route refuses: never upgraded.
    fn handshake_refusals(backend) {
        let server = ws_server(backend, WsConfig::default());
        let addr = server.local_addr();
        let base = |method: &str, key: &str, version: &str, extra: &str| {
            format!(
                "{method} /echo HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                 {key}{version}{extra}\r\n"
            )
        };
        let key = format!("Sec-WebSocket-Key: {KEY}\r\n");
        let v13 = "Sec-WebSocket-Version: 13\r\n";
        let cases = [
            ("no key", base("GET", "", v13, ""), 400),
            ("short key", base("GET", "Sec-WebSocket-Key: AAAA\r\n", v13, ""), 400),
            ("two keys", base("GET", &format!("{key}{key}"), v13, ""), 400),
            ("version 8", base("GET", &key, "Sec-WebSocket-Version: 8\r\n", ""), 426),
            ("no version", base("GET", &key, "", ""), 426),
            ("POST", base("POST", &key, v13, ""), 400),
            ("a body", base("GET", &key, v13, "Content-Length: 2\r\n\r\nab"), 400),
            ("no Connection: upgrade", base("GET", &key, v13, "").replace("Connection: Upgrade", "Connection: keep-alive"), 400),
            ("origin refused", base("GET", &key, v13, "Origin: http://evil.example\r\n"), 403),
        ];
        for (name, req, status) in cases {
            let req = if req.contains("\r\n\r\nab") { req.trim_end().to_string() } else { req };
            let mut c = connect(addr);
            c.write_all(req.as_bytes()).expect("send");
            let mut client = WsClient::new(c);
            let head = client.read_head();
            assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{name}: {head}");
            if status == 426 {
                assert!(head.contains("Sec-WebSocket-Version: 13\r\n"), "{name}: {head}");
            }
            assert!(!head.contains("Sec-WebSocket-Accept"), "{name}: {head}");
        }
        server.shutdown();
        server.join().expect("join");
    }

    /// The echo's round trips over TCP, with a subprotocol chosen from
    /// the client's offer.
    fn websocket_echo_over_tcp(backend) {
        let server = ws_server(backend, WsConfig::default());
        let mut c = WsClient::new(connect(server.local_addr()));
        let head = c.handshake("/echo", "Sec-WebSocket-Protocol: superchat, echo, chat\r\n");
        assert!(head.contains("Sec-WebSocket-Protocol: echo\r\n"), "{head}");
        echo_round_trips(&mut c);
        // Without an offer, no subprotocol is named.
        let mut c = WsClient::new(connect(server.local_addr()));
        let head = c.handshake("/echo", "");
        assert!(!head.contains("Sec-WebSocket-Protocol"), "{head}");
        echo_round_trips(&mut c);
        server.shutdown();
        server.join().expect("join");
    }

    /// The same over a Unix socket.
    fn websocket_echo_over_a_unix_socket(backend) {
        let dir = std::env::temp_dir().join(format!("percore-ws-unix-{}-{backend}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("ws.sock");
        let server = Server::builder()
            .listen(UnixAddr::path(&path))
            .cores([server_cpu()])
            .backend(backend)
            .start(|_core| HttpHandler::new(WsEcho(WsConfig::default())))
            .expect("start");
        check_backend(&server, backend);
        let sock = StdUnixStream::connect(&path).expect("connect");
        sock.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        let mut c = WsClient::new(sock);
        c.handshake("/echo", "");
        echo_round_trips(&mut c);
        server.shutdown();
        server.join().expect("join");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The same over TLS.
    fn websocket_echo_over_tls(backend) {
        let Some(cert) = TestCert::new(&format!("ws-{backend}")) else { return };
        let config = tls::server_config(&cert.cert, &cert.key).expect("server config");
        let server = builder(backend)
            .tls(config)
            .start(|_core| HttpHandler::new(WsEcho(WsConfig::default())))
            .expect("start");
        check_backend(&server, backend);
        let client_config = tls::client_config(&cert.ca).expect("client config");
        let name = tls::rustls::pki_types::ServerName::try_from("localhost").expect("name");
        let conn = tls::rustls::ClientConnection::new(client_config, name).expect("client");
        let stream = tls::rustls::StreamOwned::new(conn, connect(server.local_addr()));
        let mut c = WsClient::new(stream);
        c.handshake("/echo", "");
        echo_round_trips(&mut c);
        server.shutdown();
        server.join().expect("join");
    }
}
