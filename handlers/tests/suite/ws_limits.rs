//! The WebSocket limits of FAULTS M3 and M4 on both backends: a client
//! that never reads is dropped at its send queue's bound while others
//! are served, a silent client is pinged and dropped when it does not
//! answer, an idle one is closed; each counted.

use crate::support;

use std::time::{Duration, Instant};

use percore_handlers::ws::WsConfig;
use percore_test_kit::*;
use support::ws::*;

/// Waits (at most a minute, a hang guard) until `done` holds.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < IO_TIMEOUT, "never: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

backend_tests! {
    parallel;
    /// M3: a client that never reads while it is sent 256 KiB a
    /// millisecond is dropped once its queue (1 MiB) is full, and
    /// counted; the server's memory for it is bounded by the queue, and
    /// another client is still echoed.
    fn a_slow_reader_is_dropped(backend) {
        let mut config = WsConfig::default();
        config.max_send_queue = 1 << 20;
        let (server, stats) = ws_server_with_stats(backend, config);
        let mut slow = WsClient::new(connect(server.local_addr()));
        slow.handshake("/flood", "");
        eventually("the slow reader dropped", || stats.snapshot().slow_dropped == 1);
        // Its stream ends (after what the kernel had buffered).
        let _ = slow.until_closed();
        let mut other = WsClient::new(connect(server.local_addr()));
        other.handshake("/echo", "");
        other.send_frame(true, 1, b"still served");
        assert_eq!(other.data_frame().expect("echo").payload, b"still served");
        eventually("the slow reader's end counted", || stats.snapshot().closed == 1);
        let s = stats.snapshot();
        assert_eq!((s.opened, s.open()), (2, 1), "{s}");
        drop(other);
        server.shutdown();
        server.join().expect("join");
    }

    /// M4: a silent client is pinged; one that answers stays, one that
    /// does not is closed with 1001 after the pong timeout.
    fn a_client_that_misses_its_pong_is_closed(backend) {
        let mut config = WsConfig::default();
        config.ping_interval = Duration::from_millis(100);
        config.pong_timeout = Duration::from_millis(200);
        let (server, stats) = ws_server_with_stats(backend, config);
        // Answers two pings, then echoes: still open.
        let mut alive = WsClient::new(connect(server.local_addr()));
        alive.handshake("/echo", "");
        for _ in 0..2 {
            let ping = alive.frame().expect("ping");
            assert_eq!(ping.opcode, 9);
            alive.send_frame(true, 10, &ping.payload);
        }
        alive.send_frame(true, 1, b"here");
        assert_eq!(alive.data_frame().expect("echo").payload, b"here");
        // Never answers.
        let mut mute = WsClient::new(connect(server.local_addr()));
        mute.handshake("/echo", "");
        let frames = mute.until_closed();
        assert_eq!(frames.first().map(|f| f.opcode), Some(9), "{frames:?}");
        assert_eq!(frames.last().map(Frame::close_code), Some(1001), "{frames:?}");
        eventually("the close counted", || stats.snapshot().closes_with(1001) >= 1);
        drop(alive);
        server.shutdown();
        server.join().expect("join");
    }

    /// M4: a client that answers pings but sends no message within the
    /// idle timeout is closed with 1001.
    fn an_idle_client_is_closed(backend) {
        let mut config = WsConfig::default();
        config.idle_timeout = Some(Duration::from_millis(300));
        config.ping_interval = Duration::from_millis(100);
        let server = ws_server(backend, config);
        let mut c = WsClient::new(connect(server.local_addr()));
        c.handshake("/echo", "");
        let close = c.data_frame().expect("close");
        assert_eq!(close.close_code(), 1001);
        c.send_frame(true, 8, &1001u16.to_be_bytes());
        assert!(c.until_closed().is_empty());
        server.shutdown();
        server.join().expect("join");
    }

    /// At the server's stop an open WebSocket is closed with 1001.
    fn the_stop_closes_with_going_away(backend) {
        let server = ws_server(backend, WsConfig::default());
        let mut c = WsClient::new(connect(server.local_addr()));
        c.handshake("/echo", "");
        c.send_frame(true, 1, b"x");
        assert_eq!(c.data_frame().expect("echo").payload, b"x");
        server.shutdown();
        let close = c.data_frame().expect("close");
        assert_eq!(close.close_code(), 1001);
        c.send_frame(true, 8, &1001u16.to_be_bytes());
        assert!(c.until_closed().is_empty());
        server.join().expect("join");
    }
}
