//! Broadcast across cores on both backends: 1,000 subscribers spread
//! over the server's cores each receive every message of a publisher
//! once and in order, through the per-core registries and the
//! cross-core messaging.

use std::io;
use std::sync::mpsc;

use percore::Server;
use percore_handlers::http::{HttpHandler, Request, Response, Service};
use percore_handlers::ws::{hub, Handshake, WsConfig, WsStatsReader};
use percore_test_kit::*;

use crate::support::ws::WsClient;

/// Subscribes each WebSocket to `room`, says `joined`, and publishes
/// every message it receives to the room, on every core.
struct Room;

impl Service for Room {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        let Some(hs) = Handshake::new(req, res) else {
            return Ok(());
        };
        hs.accept(res, WsConfig::default(), |mut ws| async move {
            let _sub = hub::subscribe("room", ws.sender());
            ws.send_text("joined")?;
            while let Some(msg) = ws.recv().await? {
                hub::publish("room", &msg).await;
            }
            Ok(())
        })?;
        Ok(())
    }
}

const SUBSCRIBERS: usize = 1000;
const MESSAGES: usize = 20;

backend_tests! {
    parallel;
    /// Every subscriber gets every message once, in order, on every core.
    fn every_subscriber_gets_every_broadcast_in_order(backend) {
        let cpus = percore::runtime::cpus::available();
        let (tx, rx) = mpsc::channel::<WsStatsReader>();
        let server = Server::builder()
            .address(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
            .cores(cpus.iter().copied().take(2))
            .backend(backend)
            .drain_timeout(std::time::Duration::from_secs(5))
            .start(move |_core| {
                let _ = tx.send(percore_handlers::ws::stats_reader());
                HttpHandler::new(Room)
            })
            .expect("start");
        check_backend(&server, backend);
        let readers: Vec<WsStatsReader> = rx.iter().take(cpus.len().min(2)).collect();
        let mut clients: Vec<_> = (0..SUBSCRIBERS)
            .map(|_| {
                let mut c = WsClient::new(connect(server.local_addr()));
                c.handshake("/room", "");
                let joined = c.data_frame().expect("joined");
                assert_eq!(joined.payload, b"joined");
                c
            })
            .collect();
        if readers.len() > 1 {
            for r in &readers {
                assert!(r.snapshot().opened > 0, "a core without subscribers: {}", r.snapshot());
            }
        }
        for i in 0..MESSAGES {
            clients[0].send_frame(true, 1, format!("m{i}").as_bytes());
        }
        for (n, c) in clients.iter_mut().enumerate() {
            for i in 0..MESSAGES {
                let f = c.data_frame().unwrap_or_else(|e| panic!("subscriber {n}, message {i}: {e}"));
                assert_eq!(f.payload, format!("m{i}").as_bytes(), "subscriber {n}");
            }
        }
        let sent: u64 = readers.iter().map(|r| r.snapshot().messages_out).sum();
        // "joined" and the broadcasts, each once per subscriber.
        assert_eq!(sent, (SUBSCRIBERS * (MESSAGES + 1)) as u64);
        drop(clients);
        server.shutdown();
        server.join().expect("join");
    }
}
