//! A WebSocket over HTTP/2 over TLS (ALPN `h2`, RFC 8441) on both
//! backends, with Python's `h2` as the client (another implementation
//! than the `h2` crate of `ws_h2.rs`): the SETTINGS offer extended
//! CONNECT, the echo route answers 200 with its subprotocol, a text and a
//! 200 KiB binary message come back, and the close handshake ends with
//! `END_STREAM`. Skips, saying why, when python3 or its `h2` package is
//! missing. (Feature `h2`.)
#![cfg(feature = "h2")]

use crate::support;

use std::net::SocketAddr;

use percore::tls::ServerTls;
use percore::Server;
use percore_handlers::http::HttpHandler;
use percore_handlers::ws::WsConfig;
use percore_test_kit::*;
use support::ws::*;

const SCRIPT: &str = r#"
import os, socket, ssl, struct, sys
import h2.config, h2.connection, h2.events, h2.settings

port, ca = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["h2"])
sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=60),
                       server_hostname="localhost")
assert sock.selected_alpn_protocol() == "h2", sock.selected_alpn_protocol()
conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
conn.initiate_connection()
sock.sendall(conn.data_to_send())

events = []
def pump(until):
    while True:
        for i, e in enumerate(events):
            if until(e):
                return events.pop(i)
        data = sock.recv(65536)
        assert data, "the server closed the connection"
        for e in conn.receive_data(data):
            if isinstance(e, h2.events.DataReceived):
                conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            events.append(e)
        sock.sendall(conn.data_to_send())

settings = pump(lambda e: isinstance(e, h2.events.RemoteSettingsChanged))
enabled = settings.changed_settings.get(h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL)
assert enabled is not None and enabled.new_value == 1, settings.changed_settings

sid = conn.get_next_available_stream_id()
conn.send_headers(sid, [(":method", "CONNECT"), (":protocol", "websocket"),
                        (":scheme", "https"), (":path", "/echo"),
                        (":authority", "localhost"),
                        ("sec-websocket-version", "13"),
                        ("sec-websocket-protocol", "chat")])
sock.sendall(conn.data_to_send())
resp = pump(lambda e: isinstance(e, h2.events.ResponseReceived))
headers = dict(resp.headers)
assert headers[b":status"] == b"200", headers
assert headers.get(b"sec-websocket-protocol") == b"chat", headers
assert b"sec-websocket-accept" not in headers, headers

def frame(opcode, payload):
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 0xfe, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0xff, n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))

def send(data):
    # As the server's windows allow.
    while data:
        window = conn.local_flow_control_window(sid)
        size = min(len(data), window, conn.max_outbound_frame_size)
        if size == 0:
            pump(lambda e: isinstance(e, h2.events.WindowUpdated))
            continue
        conn.send_data(sid, data[:size])
        sock.sendall(conn.data_to_send())
        data = data[size:]

got = bytearray()
def message():
    while True:
        if len(got) >= 2:
            n, at = got[1] & 0x7f, 2
            if n == 126:
                n, at = struct.unpack("!H", got[2:4])[0], 4
            elif n == 127:
                n, at = struct.unpack("!Q", got[2:10])[0], 10
            if len(got) >= at + n:
                opcode, payload = got[0] & 0x0f, bytes(got[at:at + n])
                del got[:at + n]
                return opcode, payload
        e = pump(lambda e: isinstance(e, (h2.events.DataReceived, h2.events.StreamEnded,
                                          h2.events.StreamReset)))
        assert isinstance(e, h2.events.DataReceived), e
        got.extend(e.data)

send(frame(1, "héllo".encode()))
assert message() == (1, "héllo".encode())
big = bytes(range(256)) * 800
send(frame(2, big))
assert message() == (2, big)
send(frame(8, struct.pack("!H", 4000) + b"bye"))
opcode, payload = message()
assert opcode == 8 and struct.unpack("!H", payload[:2])[0] == 4000, (opcode, payload)
pump(lambda e: isinstance(e, h2.events.StreamEnded))
conn.end_stream(sid)
sock.sendall(conn.data_to_send())
print("OK")
"#;

backend_tests! {
    parallel;
    /// Python's `h2` over TLS with ALPN `h2`: a WebSocket on a stream.
    fn websocket_over_h2_over_tls(backend) {
        if !python_module("h2") {
            return;
        }
        let Some(cert) = TestCert::new(&format!("ws-h2-{backend}")) else { return };
        let tls = ServerTls::new(&cert.cert, &cert.key)
            .alpn(&[b"h2", b"http/1.1"])
            .build()
            .expect("server config");
        let server = Server::builder()
            .address(SocketAddr::from(([127, 0, 0, 1], 0)))
            .cores([server_cpu()])
            .backend(backend)
            .tls(tls)
            .start(|_core| HttpHandler::new(WsEcho(WsConfig::default())))
            .expect("start");
        check_backend(&server, backend);
        let port = server.local_addr().port().to_string();
        let ca = cert.ca.to_str().expect("utf-8 path");
        let Some(out) = python3(SCRIPT, &[&port, ca]) else { return };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && stdout.contains("OK"), "{stdout}\n{stderr}");
        server.shutdown();
        server.join().expect("join");
    }
}
