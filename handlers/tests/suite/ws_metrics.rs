//! The WebSocket counters in a Prometheus scrape, on both backends: after
//! known traffic (an echo closed normally, a protocol error, a slow
//! reader dropped, one left open) `/metrics` shows each number exactly.

use crate::support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use percore::net::Endpoint;
use percore::Readiness;
use percore_handlers::http::HttpHandler;
use percore_handlers::metrics::{Admin, Metrics};
use percore_handlers::ws::WsConfig;
use percore_test_kit::http::one;
use percore_test_kit::*;
use support::ws::*;

/// Every sample of a scrape, by its name and labels as written.
fn scrape(admin: std::net::SocketAddr) -> HashMap<String, f64> {
    let resp = one(admin, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(resp.status, 200);
    String::from_utf8(resp.body)
        .expect("UTF-8")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (key, value) = l.rsplit_once(' ').expect("a sample line");
            (key.to_owned(), value.parse().expect("a number"))
        })
        .collect()
}

backend_tests! {
    parallel;
    /// Three messages echoed then a normal close, an unmasked frame
    /// (1002), a client that never reads dropped at its queue's bound,
    /// and one WebSocket still open: the scrape counts them all.
    fn a_scrape_counts_websocket_traffic(backend) {
        let mut config = WsConfig::default();
        config.max_send_queue = 512 << 10;
        let metrics = Metrics::new(Readiness::new());
        let (registry, admin) = (metrics.clone(), metrics.clone());
        let server = builder(backend)
            .add_listener(std::net::SocketAddr::from(([127, 0, 0, 1], 0)), move |_core| {
                HttpHandler::new(Admin::new(admin.clone()))
            })
            .start(move |core| {
                registry.register_ws(core, percore_handlers::ws::stats_reader());
                HttpHandler::new(WsEcho(config))
            })
            .expect("start");
        check_backend(&server, backend);
        let Endpoint::Tcp(admin) = server.listeners()[1].addr.clone() else {
            panic!("the admin listener is TCP")
        };
        let core = server.stats()[0].cpu.to_string();
        let addr = server.local_addr();
        // 1. An echo: 3 + 5 + 10 bytes each way, then a normal close.
        let mut echo = WsClient::new(connect(addr));
        echo.handshake("/echo", "");
        for (opcode, payload) in [(1, &b"abc"[..]), (1, b"hello"), (2, &[9u8; 10])] {
            echo.send_frame(true, opcode, payload);
            assert_eq!(echo.data_frame().expect("echo").payload, payload);
        }
        echo.send_frame(true, 8, &1000u16.to_be_bytes());
        assert_eq!(echo.frame().expect("close").close_code(), 1000);
        let _ = echo.until_closed();
        // 2. An unmasked frame: closed with 1002.
        let mut bad = WsClient::new(connect(addr));
        bad.handshake("/echo", "");
        bad.send_raw(&client_frame(true, 0, 1, false, b"x"));
        assert_eq!(bad.frame().expect("close").close_code(), 1002);
        let _ = bad.until_closed();
        // 3. A client that never reads, sent 256 KiB a millisecond.
        let mut slow = WsClient::new(connect(addr));
        slow.handshake("/flood", "");
        // 4. One left open.
        let mut open = WsClient::new(connect(addr));
        open.handshake("/echo", "");
        let sample = |m: &HashMap<String, f64>, name: &str| {
            m.get(&format!("{name}{{core=\"{core}\"}}")).copied().unwrap_or(-1.0)
        };
        let start = Instant::now();
        let m = loop {
            let m = scrape(admin);
            if sample(&m, "percore_ws_slow_dropped_total") == 1.0
                && sample(&m, "percore_ws_open") == 1.0
            {
                break m;
            }
            assert!(start.elapsed() < IO_TIMEOUT, "never settled: {m:?}");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(sample(&m, "percore_ws_opened_total"), 4.0);
        // All four over HTTP/1.1: none on an HTTP/2 stream.
        assert_eq!(sample(&m, "percore_ws_h2_opened_total"), 0.0);
        assert_eq!(sample(&m, "percore_ws_messages_received_total"), 3.0);
        assert_eq!(sample(&m, "percore_ws_received_bytes_total"), 18.0);
        // The flood's messages queued before the drop: how many depends
        // on the kernel's buffers, but each is 256 KiB.
        let flooded = sample(&m, "percore_ws_messages_sent_total") - 3.0;
        assert!(flooded >= 1.0, "{m:?}");
        assert_eq!(
            sample(&m, "percore_ws_sent_bytes_total"),
            18.0 + flooded * f64::from(256u32 << 10)
        );
        let closes = |code: &str| {
            m.get(&format!("percore_ws_closes_total{{core=\"{core}\",code=\"{code}\"}}"))
                .copied()
                .unwrap_or_else(|| panic!("no close sample for {code}: {m:?}"))
        };
        assert_eq!(closes("1000"), 1.0);
        assert_eq!(closes("1002"), 1.0);
        // The slow reader ended without a close frame exchanged.
        assert_eq!(closes("1006"), 1.0);
        let all: f64 = m
            .iter()
            .filter(|(k, _)| k.starts_with("percore_ws_closes_total{"))
            .map(|(_, v)| v)
            .sum();
        assert_eq!(all, 3.0, "{m:?}");
        drop((slow, open));
        server.shutdown();
        server.join().expect("join");
    }
}
