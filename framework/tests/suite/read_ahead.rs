//! How far a connection is read ahead of a handler that is not reading, on
//! both backends, with every byte checked in order:
//!
//! - small messages arriving while the handler waits: on io_uring the
//!   multishot receive queues them and is paused after
//!   `BufConfig::stream_cap` (16) completions, and the rest waits in the
//!   socket until the handler reads again;
//! - a bulk stream (whole receive buffers) whose handler waits: on io_uring
//!   the first full buffer ends the multishot, whose queued completions
//!   are read first, and the rest is read into pool buffers;
//! - many small messages: on io_uring each multishot receive ends by its
//!   byte limit (one ring buffer) and the next is armed at once, so a
//!   connection that goes quiet right after still sees its peer's close.
//!
//! The handlers are test-local, written against the public API only.

use std::future::Future;
use std::io::{Read, Write};
use std::net::Shutdown;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::task::Poll;
use std::time::Duration;

use percore::{Connection, Handler};
use percore_test_kit::*;

/// How long [`Lagging`] waits after its first read.
const LAG: Duration = Duration::from_millis(300);

/// Reads once, waits without reading ([`LAG`], or until `release` is set
/// when given: a minute at most, a hang guard), then reads until it has
/// `total` bytes and sends them all back.
struct Lagging {
    total: usize,
    release: Option<Arc<AtomicBool>>,
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
                match &self.release {
                    None => percore::time::sleep(LAG).await,
                    Some(release) => {
                        let give_up = std::time::Instant::now() + Duration::from_secs(60);
                        while !release.load(Ordering::SeqCst) && std::time::Instant::now() < give_up
                        {
                            percore::time::sleep(Duration::from_millis(2)).await;
                        }
                    }
                }
            }
        }
        let (res, _) = conn.write_all(got).await;
        res
    }
}

/// The multishot's byte limit: one ring buffer of the default size.
const LIMIT: usize = 64 * 1024;

/// Reads exactly [`LIMIT`] bytes, waits [`LAG`] without reading, then
/// reports what a single poll of the next read finds.
struct QuietAfterLimit {
    report: mpsc::Sender<String>,
}

impl Handler for QuietAfterLimit {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        let mut got = 0;
        while got < LIMIT {
            match conn.read().await? {
                Some(buf) => got += buf.len(),
                None => break,
            }
        }
        percore::time::sleep(LAG).await;
        let mut read = pin!(conn.read());
        let found = std::future::poll_fn(|cx| {
            Poll::Ready(match read.as_mut().poll(cx) {
                Poll::Ready(Ok(None)) => "the close".to_string(),
                Poll::Ready(Ok(Some(buf))) => format!("{} bytes", buf.len()),
                Poll::Ready(Err(e)) => format!("an error: {e}"),
                Poll::Pending => "nothing yet".to_string(),
            })
        })
        .await;
        let _ = self.report.send(format!("{got} bytes, then {found}"));
        Ok(())
    }
}

/// Whether this kernel limits multishot receives (Linux 6.17+).
fn kernel_limits_multishot() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor) >= (6, 17)
}

backend_tests! {
    /// Forty small messages, 5 ms apart, to a handler that stops reading
    /// until all were sent: each arrives as its own completion, so on
    /// io_uring the multishot is paused; every byte comes back in order.
    fn small_messages_to_a_lagging_handler_pause_the_receive(backend) {
        const MESSAGES: usize = 41;
        const LEN: usize = 100;
        let release = Arc::new(AtomicBool::new(false));
        let held = release.clone();
        let server = builder(backend)
            .start(move |_| Lagging { total: MESSAGES * LEN, release: Some(held.clone()) })
            .expect("start");
        check_backend(&server, backend);
        let mut client = connect(server.local_addr());
        let sent = pattern(1, MESSAGES * LEN);
        for message in sent.chunks(LEN) {
            client.write_all(message).expect("write");
            std::thread::sleep(Duration::from_millis(5));
        }
        release.store(true, Ordering::SeqCst);
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
            .start(|_| Lagging { total: TOTAL, release: None })
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

    /// 512 KiB in 1 KiB round trips: no completion fills a buffer and the
    /// reader never lags, so on io_uring only the byte limit ends a
    /// multishot, once per 64 KiB received. Every byte comes back.
    fn small_messages_re_arm_the_receive_at_its_byte_limit(backend) {
        const MESSAGES: usize = 512;
        let server = builder(backend).start(|_| PlainEcho).expect("start");
        check_backend(&server, backend);
        let mut client = connect(server.local_addr());
        for i in 0..MESSAGES {
            roundtrip(&mut client, pattern(i, 1024));
        }
        let stats = server.stats();
        println!("{backend}: {}", stats[0]);
        if backend == Backend::Uring && kernel_limits_multishot() {
            let ended = sum(&stats, |c| c.multishot_ended);
            let expected = (MESSAGES * 1024 / LIMIT) as u64;
            assert!(
                ended >= expected - 1,
                "{ended} multishot receives ended in {} KiB; the byte limit ends one per 64 KiB",
                MESSAGES
            );
        }
        drop(client);
        server.shutdown();
        server.join().expect("join");
    }

    /// A client sends exactly one limit's worth, then closes its side while
    /// the handler is not reading. The receive that follows the limited
    /// multishot was armed when its last bytes were read, so one poll of
    /// the next read finds the close already there.
    fn a_connection_quiet_after_the_byte_limit_sees_the_close(backend) {
        let (report, reports) = mpsc::channel();
        let server = builder(backend)
            .start(move |_| QuietAfterLimit {
                report: report.clone(),
            })
            .expect("start");
        check_backend(&server, backend);
        let mut client = connect(server.local_addr());
        client.write_all(pattern(2, LIMIT)).expect("write");
        std::thread::sleep(LAG / 3);
        client.shutdown(Shutdown::Write).expect("shutdown");
        let found = reports.recv_timeout(IO_TIMEOUT).expect("a report");
        assert_eq!(found, format!("{LIMIT} bytes, then the close"));
        server.shutdown();
        server.join().expect("join");
    }
}
