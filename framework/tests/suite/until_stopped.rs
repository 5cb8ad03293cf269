//! `percore::until_stopped`, on both backends: a handler that waits for
//! its client's next bytes through it echoes what arrives, and lets the
//! server stop at once instead of holding the stop until the drain
//! deadline.

use std::io::Read;
use std::time::{Duration, Instant};

use percore::{until_stopped, Connection, Handler};
use percore_test_kit::*;

/// Echo that ends its connection when the server begins to stop.
struct StopAware;

impl Handler for StopAware {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        while let Some(read) = until_stopped(conn.read()).await {
            let Some(buf) = read? else { break };
            let (res, _) = conn.write_all(buf).await;
            res?;
        }
        conn.shutdown_write()
    }
}

backend_tests! {
    /// Two clients, one idle after an echo and one that never sent a
    /// byte: the stop ends both connections (end of stream) and the
    /// server returns before its drain deadline (a minute: only the
    /// stop, never the deadline, can end the connections that soon).
    fn an_idle_read_ends_at_the_stop(backend) {
        let server = builder(backend)
            .drain_timeout(Duration::from_secs(60))
            .start(|_core| StopAware)
            .expect("start");
        check_backend(&server, backend);
        let mut talked = connect(server.local_addr());
        roundtrip(&mut talked, pattern(1, 3000));
        let mut silent = connect(server.local_addr());
        wait_until(Duration::from_secs(60), "both connections", || server.stats(), |s| sum(s, |c| c.active) == 2);
        let stopping = Instant::now();
        server.shutdown();
        server.join().expect("join");
        let took = stopping.elapsed();
        assert!(took < Duration::from_secs(60), "the stop took {took:?}: the drain deadline ended it");
        for client in [&mut talked, &mut silent] {
            let mut rest = Vec::new();
            client.read_to_end(&mut rest).expect("a clean end of stream");
            assert!(rest.is_empty(), "{} bytes after the stop", rest.len());
        }
    }
}
