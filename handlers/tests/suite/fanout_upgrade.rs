//! Upgrades through the fan-out proxy (width 1) on both backends: a
//! WebSocket to a percore upstream works through it, a raw upgraded
//! stream is relayed byte for byte both ways with its half-closes, and
//! an upstream that does not switch, or cannot be reached, gets the
//! client a 502.

use crate::support;

use std::io::{Read, Write};
use std::net::Shutdown;

use percore_handlers::ws::WsConfig;
use percore_test_kit::http::one;
use percore_test_kit::upstream::refused_addr;
use percore_test_kit::*;
use support::fanout::proxy;
use support::ws::*;

backend_tests! {
    parallel;
    /// The handshake's answer (accept key, subprotocol) comes from the
    /// upstream; frames of every kind go through and back; the close
    /// handshake ends both connections.
    fn a_websocket_through_the_proxy(backend) {
        let upstream = ws_server(backend, WsConfig::default());
        let px = proxy(backend, &[upstream.local_addr()], |c| c.width = 1);
        let mut c = WsClient::new(connect(px.addr));
        let head = c.handshake("/echo", "Sec-WebSocket-Protocol: echo\r\n");
        assert!(head.contains("Sec-WebSocket-Protocol: echo\r\n"), "{head}");
        assert!(head.contains("Upgrade: websocket\r\n"), "{head}");
        c.send_frame(true, 1, "héllo".as_bytes());
        assert_eq!(c.data_frame().expect("text").payload, "héllo".as_bytes());
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        c.send_frame(true, 2, &big);
        let echoed = c.data_frame().expect("binary");
        assert_eq!((echoed.opcode, echoed.payload == big), (2, true));
        c.send_frame(true, 9, b"ping");
        assert_eq!(c.frame().expect("pong"), Frame { fin: true, opcode: 10, payload: b"ping".to_vec() });
        c.send_frame(true, 8, &1000u16.to_be_bytes());
        assert_eq!(c.frame().expect("close").close_code(), 1000);
        assert!(c.until_closed().is_empty(), "nothing after the close");
        drop(px);
        upstream.shutdown();
        upstream.join().expect("join");
    }

    /// A raw upgraded stream: the bytes sent behind the request, then
    /// 1 MiB of every byte value, come back exactly; the client's
    /// half-close reaches the upstream, whose end reaches the client.
    fn a_raw_upgrade_is_relayed_byte_for_byte(backend) {
        let upstream = ws_server(backend, WsConfig::default());
        let px = proxy(backend, &[upstream.local_addr()], |c| c.width = 1);
        let mut c = connect(px.addr);
        let mut req = b"GET /raw HTTP/1.1\r\nHost: t\r\nConnection: upgrade\r\nUpgrade: x-echo\r\n\r\n".to_vec();
        req.extend_from_slice(b"early;");
        c.write_all(&req).expect("send");
        let payload: Vec<u8> = (0..(1u32 << 20)).map(|i| (i * 7 % 256) as u8).collect();
        let mut writer = c.try_clone().expect("clone");
        let sent = payload.clone();
        let write = std::thread::spawn(move || {
            for chunk in sent.chunks(10_000) {
                writer.write_all(chunk).expect("write");
            }
            writer.shutdown(Shutdown::Write).expect("half-close");
        });
        let mut all = Vec::new();
        c.read_to_end(&mut all).expect("read to the end");
        write.join().expect("writer");
        let end = all.windows(4).position(|w| w == b"\r\n\r\n").expect("a head") + 4;
        let head = String::from_utf8_lossy(&all[..end]);
        assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
        assert!(head.contains("Upgrade: x-echo\r\n"), "{head}");
        let mut want = b"early;".to_vec();
        want.extend_from_slice(&payload);
        assert_eq!(all.len() - end, want.len());
        assert!(all[end..] == want[..], "the bytes differ");
        drop(px);
        upstream.shutdown();
        upstream.join().expect("join");
    }

    /// An upstream that answers 403 instead of switching, and one that
    /// refuses connections: 502, naming why; the client's connection is
    /// never upgraded. A wider proxy fans the request out as HTTP.
    fn upgrades_the_upstream_refuses(backend) {
        let upstream = ws_server(backend, WsConfig::default());
        let px = proxy(backend, &[upstream.local_addr()], |c| c.width = 1);
        let r = one(px.addr, &upgrade_request("/echo", "Origin: http://evil.example\r\n"));
        assert_eq!(r.status, 502);
        assert!(String::from_utf8_lossy(&r.body).contains("answered 403, not 101"), "{r:?}");
        let gone = proxy(backend, &[refused_addr()], |c| c.width = 1);
        let r = one(gone.addr, &upgrade_request("/echo", ""));
        assert_eq!(r.status, 502, "{r:?}");
        let wide = proxy(backend, &[upstream.local_addr()], |c| c.width = 2);
        let r = one(wide.addr, &upgrade_request("/raw", ""));
        assert_eq!(r.status, 200, "{r:?}");
        drop((px, gone, wide));
        upstream.shutdown();
        upstream.join().expect("join");
    }
}
