//! WebSockets over HTTP/2 by extended CONNECT (RFC 8441) on both
//! backends, with the `h2` crate as the client: the server's SETTINGS
//! offer it; the WebSocket echo's route (unchanged) answers 200 and
//! echoes text, binary, a 1 MiB message across the flow-control windows
//! and a fragmented one; two WebSockets and a request share a connection;
//! the handshake's refusals; `permessage-deflate` negotiated; a
//! client's reset; a slow reader dropped; and the server's stop closing
//! with 1001. The conformance table runs
//! over HTTP/2 in `ws_conformance.rs`, TLS with Python's `h2` in
//! `ws_h2_tls.rs`. (Feature `h2`.)
#![cfg(feature = "h2")]

use crate::support;

use std::io;
use std::time::{Duration, Instant};

use percore_handlers::http::{HttpHandler, Response, Routed, Router};
use percore_handlers::ws::{Handshake, WsConfig, WsStats, WsStatsReader};
use percore_test_kit::*;
use support::ws::*;
use support::ws_h2::*;

fn frame(opcode: u8, payload: &[u8]) -> Frame {
    Frame {
        fin: true,
        opcode,
        payload: payload.to_vec(),
    }
}

fn close_payload(code: u16, reason: &[u8]) -> Vec<u8> {
    let mut p = code.to_be_bytes().to_vec();
    p.extend_from_slice(reason);
    p
}

/// The core's counters once `done` holds of them (a minute at most).
fn stats_when(stats: &WsStatsReader, done: impl Fn(&WsStats) -> bool) -> WsStats {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let s = stats.snapshot();
        if done(&s) || Instant::now() > until {
            return s;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn big_config() -> WsConfig {
    let mut config = WsConfig::default();
    config.max_frame = 4 << 20;
    config.max_message = 4 << 20;
    config.max_send_queue = 8 << 20;
    config
}

fn header<'a>(headers: &'a ::http::HeaderMap, name: &str) -> Option<&'a [u8]> {
    headers.get(name).map(|v| v.as_bytes())
}

/// A WebSocket echo at `/ws` of a `Router`, and a `POST`-only `/form`.
async fn ws_route(_: &(), req: &mut Routed<'_, '_>, res: &mut Response<'_>) -> io::Result<()> {
    let Some(hs) = Handshake::new(req, res) else {
        return Ok(());
    };
    hs.accept(res, WsConfig::default(), |mut ws| async move {
        while let Some(msg) = ws.recv().await? {
            ws.send(msg)?;
        }
        Ok(())
    })?;
    Ok(())
}

async fn form(_: &(), _: &mut Routed<'_, '_>, res: &mut Response<'_>) -> io::Result<()> {
    res.send(200, None, b"posted")?;
    Ok(())
}

backend_tests! {
    parallel;
    /// The SETTINGS offer extended CONNECT; the echo route answers 200
    /// with its subprotocol and no accept key, and echoes text, binary,
    /// pings, 1 MiB across the windows and a fragmented message; the
    /// client's close (4000) is echoed, then `END_STREAM`.
    fn echo_over_an_h2_stream(backend) {
        let (server, stats) = ws_server_with_stats(backend, big_config());
        let h2 = H2Client::connect(server.local_addr());
        assert!(h2.connect_protocol(), "SETTINGS_ENABLE_CONNECT_PROTOCOL = 1");
        let opened = h2.open(
            "/echo",
            "websocket",
            &[("sec-websocket-version", "13"), ("sec-websocket-protocol", "x, chat")],
        );
        assert_eq!(opened.status, 200, "{:?}", opened.headers);
        assert_eq!(header(&opened.headers, "sec-websocket-protocol"), Some(&b"chat"[..]));
        assert!(header(&opened.headers, "sec-websocket-accept").is_none());
        assert!(header(&opened.headers, "upgrade").is_none());
        let mut ws = opened.ws.expect("the WebSocket");
        let c = &mut ws.client;
        c.send_frame(true, 1, "héllo".as_bytes());
        assert_eq!(c.data_frame().expect("text"), frame(1, "héllo".as_bytes()));
        c.send_frame(true, 2, &[0, 1, 2, 255]);
        assert_eq!(c.data_frame().expect("binary"), frame(2, &[0, 1, 2, 255]));
        c.send_frame(true, 9, b"are you there");
        assert_eq!(c.frame().expect("pong"), frame(10, b"are you there"));
        let big: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
        c.send_frame(true, 2, &big);
        assert_eq!(c.data_frame().expect("1 MiB"), frame(2, &big));
        c.send_frame(false, 1, b"frag");
        c.send_frame(false, 0, b"ment");
        c.send_frame(true, 0, b"ed");
        assert_eq!(c.data_frame().expect("fragments"), frame(1, b"fragmented"));
        c.send_frame(true, 8, &close_payload(4000, b"done"));
        assert_eq!(c.frame().expect("close").close_code(), 4000);
        assert!(c.until_closed().is_empty(), "nothing after the close");
        assert_eq!(ws.ended(), Some(Ended::End));
        let s = stats_when(&stats, |s| s.closed == 1);
        assert_eq!((s.opened, s.opened_h2, s.closed), (1, 1, 1), "{s}");
        assert_eq!(s.closes_other, 1, "4000 ended it: {s}");
        assert_eq!(s.messages_in, 4, "{s}");
        server.shutdown();
        server.join().expect("join");
    }

    /// Two WebSockets and an ordinary request on one connection at once,
    /// each stream's frames its own.
    fn two_websockets_and_a_request_share_a_connection(backend) {
        let (server, stats) = ws_server_with_stats(backend, WsConfig::default());
        let h2 = H2Client::connect(server.local_addr());
        let mut a = h2.websocket("/echo", &[]);
        let mut b = h2.websocket("/echo", &[]);
        for i in 0..20u8 {
            a.client.send_frame(true, 2, &[b'a', i]);
            b.client.send_frame(true, 2, &[b'b', i]);
        }
        assert_eq!(h2.get("/plain"), (200, b"plain".to_vec()));
        for i in 0..20u8 {
            assert_eq!(a.client.data_frame().expect("a"), frame(2, &[b'a', i]));
            assert_eq!(b.client.data_frame().expect("b"), frame(2, &[b'b', i]));
        }
        a.client.send_frame(true, 8, &close_payload(4001, b""));
        assert_eq!(a.client.frame().expect("a's close").close_code(), 4001);
        // b is still open after a's end.
        b.client.send_frame(true, 1, b"still");
        assert_eq!(b.client.data_frame().expect("b"), frame(1, b"still"));
        b.client.send_frame(true, 8, &close_payload(1000, b""));
        assert_eq!(b.client.frame().expect("b's close").close_code(), 1000);
        assert_eq!((a.ended(), b.ended()), (Some(Ended::End), Some(Ended::End)));
        let s = stats_when(&stats, |s| s.closed == 2);
        assert_eq!((s.opened_h2, s.closed, s.closes_with(1000)), (2, 2, 1), "{s}");
        server.shutdown();
        server.join().expect("join");
    }

    /// FAULTS M1 on HTTP/2: a missing or other version gets 426 naming
    /// 13; another `:protocol` on the WebSocket route gets 400; a route
    /// that answers 200 without accepting gets 501 in its place; another
    /// protocol a route does accept (`x-echo`) is a byte stream both
    /// ways. The connection serves on after each.
    fn refusals_and_other_protocols(backend) {
        let (server, stats) = ws_server_with_stats(backend, WsConfig::default());
        let h2 = H2Client::connect(server.local_addr());
        let opened = h2.open("/echo", "websocket", &[]);
        assert_eq!(opened.status, 426);
        assert_eq!(header(&opened.headers, "sec-websocket-version"), Some(&b"13"[..]));
        let opened = h2.open("/echo", "websocket", &[("sec-websocket-version", "8")]);
        assert_eq!(opened.status, 426);
        let opened = h2.open("/echo", "x-nope", &[("sec-websocket-version", "13")]);
        assert_eq!(opened.status, 400);
        assert!(opened.ws.is_none());
        let opened = h2.open("/plain", "websocket", &[("sec-websocket-version", "13")]);
        assert_eq!(opened.status, 501, "a 200 that accepts nothing");
        // A plain CONNECT to a service that answers 200: 501 too.
        assert_eq!(h2.plain_connect("example.com:443"), 501);
        let opened = h2.open("/raw", "x-echo", &[]);
        assert_eq!(opened.status, 200);
        let mut raw = opened.ws.expect("the stream");
        std::io::Write::write_all(&mut raw.client.stream, b"raw bytes").expect("send");
        raw.end();
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut raw.client.stream, &mut got).expect("echo");
        assert_eq!(got, b"raw bytes");
        assert_eq!(raw.ended(), Some(Ended::End));
        assert_eq!(h2.get("/plain"), (200, b"plain".to_vec()));
        assert_eq!(stats.snapshot().opened, 0, "no WebSocket was opened");
        server.shutdown();
        server.join().expect("join");
    }

    /// A `Router`'s `GET` route serves the extended CONNECT of its path;
    /// a path with only `POST` gets 405, an unknown one 404, a plain
    /// CONNECT (an authority, no path) 404.
    fn a_routers_get_route_serves_extended_connect(backend) {
        let server = builder(backend)
            .start(|_core| {
                let routes = Router::new(())
                    .get("/ws", ws_route)
                    .post("/form", form)
                    .build()
                    .expect("routes");
                HttpHandler::new(routes)
            })
            .expect("start");
        check_backend(&server, backend);
        let h2 = H2Client::connect(server.local_addr());
        let mut ws = h2.websocket("/ws", &[]);
        ws.client.send_frame(true, 1, b"routed");
        assert_eq!(ws.client.data_frame().expect("echo"), frame(1, b"routed"));
        ws.client.send_frame(true, 8, &close_payload(1000, b""));
        assert_eq!(ws.client.frame().expect("close").close_code(), 1000);
        assert_eq!(ws.ended(), Some(Ended::End));
        let version = [("sec-websocket-version", "13")];
        assert_eq!(h2.open("/form", "websocket", &version).status, 405);
        assert_eq!(h2.open("/nowhere", "websocket", &version).status, 404);
        assert_eq!(h2.plain_connect("example.com:443"), 404);
        server.shutdown();
        server.join().expect("join");
    }

    /// A client's RST_STREAM ends the WebSocket: its route sees the end
    /// (counted as 1006), and the connection serves another.
    fn a_client_reset_ends_the_websocket(backend) {
        let (server, stats) = ws_server_with_stats(backend, WsConfig::default());
        let h2 = H2Client::connect(server.local_addr());
        let mut ws = h2.websocket("/echo", &[]);
        ws.client.send_frame(true, 1, b"one");
        assert_eq!(ws.client.data_frame().expect("echo"), frame(1, b"one"));
        ws.reset();
        let s = stats_when(&stats, |s| s.closed == 1);
        assert_eq!((s.closed, s.closes_with(1006)), (1, 1), "{s}");
        let mut again = h2.websocket("/echo", &[]);
        again.client.send_frame(true, 1, b"two");
        assert_eq!(again.client.data_frame().expect("echo"), frame(1, b"two"));
        drop(ws);
        server.shutdown();
        server.join().expect("join");
    }

    /// FAULTS M3 on HTTP/2: a client that never reads fills its windows,
    /// then the send queue, and is dropped (its stream reset); the
    /// connection's other streams are served.
    fn a_slow_reader_is_dropped(backend) {
        let mut config = WsConfig::default();
        config.max_send_queue = 1 << 20;
        let (server, stats) = ws_server_with_stats(backend, config);
        let h2 = H2Client::connect(server.local_addr());
        let mut ws = h2.websocket("/flood", &[]);
        let s = stats_when(&stats, |s| s.slow_dropped == 1);
        assert_eq!(s.slow_dropped, 1, "{s}");
        // What had come before the reset, then the end; read, it gives
        // the connection's window back to the other streams.
        let _ = ws.client.until_closed();
        assert_eq!(ws.ended(), Some(Ended::Reset(Some(h2::Reason::CANCEL))));
        assert_eq!(h2.get("/plain"), (200, b"plain".to_vec()));
        server.shutdown();
        server.join().expect("join");
    }

    /// The server's stop closes an HTTP/2 WebSocket with 1001, as on
    /// HTTP/1.1: its GOAWAY does not cut the stream before the close
    /// handshake, which ends with `END_STREAM`.
    fn the_stop_closes_with_1001(backend) {
        let (server, stats) = ws_server_with_stats(backend, WsConfig::default());
        let h2 = H2Client::connect(server.local_addr());
        let mut ws = h2.websocket("/echo", &[]);
        ws.client.send_frame(true, 1, b"before");
        assert_eq!(ws.client.data_frame().expect("echo"), frame(1, b"before"));
        server.shutdown();
        let close = ws.client.data_frame().expect("the server's close");
        assert_eq!(close.close_code(), 1001);
        ws.client.send_frame(true, 8, &close.payload[..2]);
        assert!(ws.client.until_closed().is_empty());
        assert_eq!(ws.ended(), Some(Ended::End));
        let s = stats_when(&stats, |s| s.closed == 1);
        assert_eq!(s.closes_with(1001), 1, "{s}");
        server.join().expect("join");
    }
}

/// `permessage-deflate` is negotiated on HTTP/2 as on HTTP/1.1, and a
/// compressed message comes back compressed. (Feature `ws-deflate`.)
#[cfg(feature = "ws-deflate")]
mod deflate {
    use super::*;

    backend_tests! {
        parallel;
        fn deflate_is_negotiated_over_h2(backend) {
            let (server, stats) = ws_server_with_stats(backend, WsConfig::default());
            let h2 = H2Client::connect(server.local_addr());
            let opened = h2.open(
                "/echo",
                "websocket",
                &[
                    ("sec-websocket-version", "13"),
                    ("sec-websocket-extensions", "permessage-deflate; client_max_window_bits"),
                ],
            );
            assert_eq!(opened.status, 200);
            let answer = header(&opened.headers, "sec-websocket-extensions").expect("an answer");
            assert!(answer.starts_with(b"permessage-deflate"), "{:?}", String::from_utf8_lossy(answer));
            let mut ws = opened.ws.expect("the WebSocket");
            // 200 bytes: over the 64-byte threshold, so the echo is deflated.
            let text = "a fairly repetitive line of text. ".repeat(6);
            ws.client.send_frame(true, 1, text.as_bytes());
            let (rsv, echo) = ws.client.frame_with_rsv().expect("the echo");
            assert_eq!((rsv, echo.opcode), (0b100, 1), "RSV1: compressed");
            assert!(echo.payload.len() < text.len(), "{} bytes", echo.payload.len());
            ws.client.send_frame(true, 8, &close_payload(1000, b""));
            assert_eq!(ws.client.frame().expect("close").close_code(), 1000);
            assert_eq!(ws.ended(), Some(Ended::End));
            let s = stats_when(&stats, |s| s.closed == 1);
            assert_eq!((s.opened_h2, s.messages_in), (1, 1), "{s}");
            server.shutdown();
            server.join().expect("join");
        }
    }
}
