//! How far a connection is read ahead of a handler that is not reading, on
//! both backends, with every byte checked in order:
//!
//! - small messages arriving while the handler waits: on io_uring the
//!   multishot receive queues them and is paused after
//!   `BufConfig::stream_cap` (16) completions, and the rest waits in the
//!   socket until the handler reads again;
//! - a bulk stream (whole receive buffers) whose handler waits: on io_uring
//!   the first full buffer ends the multishot, whose queued completions
//!   are read first, and the rest is read into pool buffers.
//!
//! The handlers are test-local, written against the public API only.

#[macro_use]
mod support;

use std::io::{Read, Write};
use std::time::Duration;

use percore::{Connection, Handler};
use support::*;

/// How long [`Lagging`] waits after its first read.
const LAG: Duration = Duration::from_millis(300);

/// Reads once, waits [`LAG`] without reading, then reads until it has
/// `total` bytes and sends them all back.
struct Lagging {
    total: usize,
}

impl Handler for Lagging {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        let mut got = Vec::with_capacity(self.total);
        let mut lagged = false;
        while got.len() < self.total {
            match conn.read().await? {
                Some(buf) => got.extend_from_slice(&buf),
                None => break,
            }
            if !lagged {
                lagged = true;
                percore::time::sleep(LAG).await;
            }
        }
        let (res, _) = conn.write_all(got).await;
        res
    }
}

backend_tests! {
    /// Forty small messages, 5 ms apart, to a handler that stops reading
    /// for 300 ms: each arrives as its own completion, so on io_uring the
    /// multishot is paused; every byte comes back in order.
    fn small_messages_to_a_lagging_handler_pause_the_receive(backend) {
        const MESSAGES: usize = 41;
        const LEN: usize = 100;
        let server = builder(backend)
            .start(|_| Lagging { total: MESSAGES * LEN })
            .expect("start");
        check_backend(&server, backend);
        let mut client = connect(server.local_addr());
        let sent = pattern(1, MESSAGES * LEN);
        for message in sent.chunks(LEN) {
            client.write_all(message).expect("write");
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut back = vec![0u8; sent.len()];
        client.read_exact(&mut back).expect("read the echo");
        assert!(back == sent, "the echo differs from what was sent");
        let stats = server.stats();
        println!("{backend}: {}", stats[0]);
        if backend == Backend::Uring {
            assert!(sum(&stats, |c| c.backpressure_pauses) >= 1, "the multishot was never paused");
        }
        server.shutdown();
        server.join().expect("join");
    }

    /// 8 MiB in one write to a handler that stops reading for 300 ms after
    /// its first read. On io_uring the multishot has queued several full
    /// buffers by then; the first ends it, the queued ones are read first,
    /// and the rest of the stream comes through single-shot reads into pool
    /// buffers. Every byte comes back in order.
    fn a_bulk_stream_to_a_lagging_handler_switches_to_pool_reads(backend) {
        const TOTAL: usize = 8 << 20;
        let server = builder(backend)
            .start(|_| Lagging { total: TOTAL })
            .expect("start");
        check_backend(&server, backend);
        let mut client = connect(server.local_addr());
        let mut reader = client.try_clone().expect("clone");
        let sent: Vec<u8> = (0..TOTAL).map(|i| (i % 251) as u8).collect();
        let writer = {
            let sent = sent.clone();
            std::thread::spawn(move || client.write_all(&sent).expect("write"))
        };
        let mut back = vec![0u8; TOTAL];
        reader.read_exact(&mut back).expect("read the echo");
        writer.join().expect("writer");
        assert!(back == sent, "the echo differs from what was sent");
        let stats = server.stats();
        println!("{backend}: {}", stats[0]);
        if backend == Backend::Uring {
            assert!(sum(&stats, |c| c.bulk_reads) >= 1, "the bulk stream was never switched to pool reads");
        }
        server.shutdown();
        server.join().expect("join");
    }
}
