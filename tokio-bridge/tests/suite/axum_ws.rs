//! axum's `WebSocketUpgrade` on percore, on both backends, through
//! `HyperHandler::with_upgrades`: a WebSocket echo answers text, binary,
//! pings and the close, and plain routes of the same app still answer
//! (kept alive) through the same pipe.

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use axum::routing::get;
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
        .route("/ws", get(upgrade))
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
