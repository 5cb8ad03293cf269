//! axum's `WebSocketUpgrade` on percore, on both backends, through
//! `HyperHandler::with_upgrades`: a WebSocket echo answers text, binary,
//! pings and the close, and plain routes of the same app still answer
//! (kept alive) through the same pipe; over HTTP/2 (extended CONNECT,
//! RFC 8441, hyper's client) the same route echoes on a stream.

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use axum::routing::{any, get};
use axum::Router;
use percore_test_kit::http::Client;
use percore_test_kit::ws::{Frame, WsClient};
use percore_test_kit::{builder, check_backend, connect};
use percore_tokio::hyper::HyperHandler;

async fn upgrade(ws: WebSocketUpgrade) -> Response {
    ws.protocols(["echo"]).on_upgrade(echo)
}

/// Echoes data messages until the client closes.
async fn echo(mut socket: WebSocket) {
    while let Some(Ok(msg)) = socket.recv().await {
        let reply = match msg {
            Message::Text(_) | Message::Binary(_) => msg,
            // axum answers pings itself; a close ends the loop.
            _ => continue,
        };
        if socket.send(reply).await.is_err() {
            return;
        }
    }
}

fn app() -> Router {
    Router::new()
        // `any`: on HTTP/2 the upgrade is a CONNECT (RFC 8441).
        .route("/ws", any(upgrade))
        .route("/", get(|| async { "plain" }))
}

percore_test_kit::backend_tests! {
    /// The handshake, then text, 100 KB of binary, a ping and the close
    /// handshake; the app's other route on another connection, twice.
    fn axum_websocket_upgrade(backend) {
        let server = builder(backend)
            .start(|_core| HyperHandler::new(app()).with_upgrades())
            .expect("server starts");
        check_backend(&server, backend);
        let mut c = WsClient::new(connect(server.local_addr()));
        let head = c.handshake("/ws", "Sec-WebSocket-Protocol: echo\r\n");
        assert!(head.to_ascii_lowercase().contains("sec-websocket-protocol: echo\r\n"), "{head}");
        c.send_frame(true, 1, "héllo".as_bytes());
        assert_eq!(c.data_frame().expect("text").payload, "héllo".as_bytes());
        let big: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
        c.send_frame(true, 2, &big);
        let echoed = c.data_frame().expect("binary");
        assert_eq!((echoed.opcode, echoed.payload == big), (2, true));
        c.send_frame(true, 9, b"ping");
        assert_eq!(c.frame().expect("pong"), Frame { fin: true, opcode: 10, payload: b"ping".to_vec() });
        c.send_frame(true, 8, &1000u16.to_be_bytes());
        assert_eq!(c.frame().expect("close").close_code(), 1000);
        assert!(c.until_closed().is_empty(), "nothing after the close");
        let mut plain = Client::connect(server.local_addr());
        for _ in 0..2 {
            let r = plain.roundtrip(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
            assert_eq!((r.status, r.body.as_slice()), (200, &b"plain"[..]));
        }
        drop(plain);
        server.shutdown();
        server.join().expect("join");
    }
}

/// One echo over an HTTP/2 stream: the SETTINGS are in once a plain
/// request was answered; then an extended CONNECT to `/ws`, a text
/// message and the close, read back as raw frames.
async fn echo_over_h2(addr: std::net::SocketAddr) {
    use http_body_util::Empty;
    use hyper::body::Bytes;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use percore_test_kit::ws::client_frame;
    use tokio::io::AsyncWriteExt;

    let socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(socket))
            .await
            .expect("HTTP/2 handshake");
    tokio::spawn(conn);
    let plain = hyper::Request::get(format!("http://{addr}/"))
        .body(Empty::<Bytes>::new())
        .expect("request");
    assert_eq!(send.send_request(plain).await.expect("plain").status(), 200);
    let mut req = hyper::Request::connect(format!("http://{addr}/ws"))
        .header("sec-websocket-version", "13")
        .header("sec-websocket-protocol", "echo")
        .body(Empty::<Bytes>::new())
        .expect("request");
    req.extensions_mut()
        .insert(hyper::ext::Protocol::from_static("websocket"));
    let res = send.send_request(req).await.expect("the CONNECT's answer");
    assert_eq!(res.status(), 200, "{:?}", res.headers());
    assert_eq!(res.headers()["sec-websocket-protocol"], "echo");
    let mut io = TokioIo::new(hyper::upgrade::on(res).await.expect("the stream"));
    let mut got = Vec::new();
    io.write_all(&client_frame(true, 0, 1, true, "héllo over h2".as_bytes()))
        .await
        .expect("send");
    let echo = next_frame(&mut io, &mut got).await;
    assert_eq!(
        (echo.opcode, echo.payload),
        (1, "héllo over h2".as_bytes().to_vec())
    );
    io.write_all(&client_frame(true, 0, 8, true, &1000u16.to_be_bytes()))
        .await
        .expect("close");
    assert_eq!(next_frame(&mut io, &mut got).await.close_code(), 1000);
}

/// The next whole frame the server sent on `io`, `got` holding what was
/// read past it.
async fn next_frame(
    io: &mut hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>,
    got: &mut Vec<u8>,
) -> percore_test_kit::ws::Frame {
    use tokio::io::AsyncReadExt;
    loop {
        if let Some((frame, len)) = percore_test_kit::ws::parse_server_frame(got) {
            got.drain(..len);
            return frame;
        }
        let mut buf = [0u8; 4096];
        let n = io.read(&mut buf).await.expect("read");
        assert!(n > 0, "the stream ended early");
        got.extend_from_slice(&buf[..n]);
    }
}

mod over_h2 {
    use super::*;

    percore_test_kit::backend_tests! {
        parallel;
        /// axum's `WebSocketUpgrade` over an HTTP/2 stream: the hyper bridge
        /// offers extended CONNECT.
        fn axum_websocket_over_h2(backend) {
            let server = builder(backend)
                .start(|_core| HyperHandler::new(app()).with_upgrades())
                .expect("server starts");
            check_backend(&server, backend);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime");
            rt.block_on(echo_over_h2(server.local_addr()));
            server.shutdown();
            server.join().expect("join");
        }
    }
}
