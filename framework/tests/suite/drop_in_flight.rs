//! Dropping futures with I/O in flight (FAULTS D3), on both backends, with
//! a small receive ring so buffers are reused constantly:
//!
//! - a handler that drops thousands of in-flight reads still echoes every
//!   byte of every connection, in order (reads are cancel-safe, and no
//!   buffer is handed out twice);
//! - connections dropped while the kernel holds received data for them
//!   (ring buffers queued in their multishot receive) give those buffers
//!   back, and the bytes other connections read in the reused buffers are
//!   theirs;
//! - a write whose send was in flight, dropped after its core ended, never
//!   frees its buffer (no core is left to say the kernel is done with it).
//!
//! The handlers are test-local, written against the public API only.

use std::cell::Cell;
use std::future::Future;
use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Waker};
use std::time::Duration;

use percore::net::TcpStream;
use percore::{Backend, Connection, Handler};
use percore_test_kit::*;

/// In-flight reads dropped by [`FlakyEcho`], over the process.
static READS_DROPPED: AtomicU64 = AtomicU64::new(0);
/// Connections dropped by [`DropOrEcho`] with data pending.
static STREAMS_DROPPED: AtomicU64 = AtomicU64::new(0);

/// [`Counted`] buffers dropped, over the process.
static BUFS_FREED: AtomicU64 = AtomicU64::new(0);

/// A heap buffer that counts its drops.
struct Counted(Vec<u8>);

impl Drop for Counted {
    fn drop(&mut self) {
        BUFS_FREED.fetch_add(1, Relaxed);
    }
}

// SAFETY: `stable_ptr` and `bytes_init` describe the `Vec`'s heap bytes,
// which stay in place while the value moves.
unsafe impl percore::buf::IoBuf for Counted {
    fn stable_ptr(&self) -> *const u8 {
        self.0.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.0.len()
    }
}

/// Echo that races every read against a random deadline and drops it when
/// the deadline wins.
struct FlakyEcho {
    rng: Cell<u64>,
}

impl Handler for FlakyEcho {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        let seed = self.rng.get();
        self.rng.set(seed.wrapping_add(1));
        let mut rng = Rng::new(seed);
        loop {
            // Mostly very short deadlines: a read dropped after 0–7 polls
            // is often still waiting for the kernel.
            let deadline = if rng.between(0, 4) == 0 {
                Deadline::random(&mut rng)
            } else {
                Deadline::Polls(rng.between(0, 7))
            };
            match deadline.race(conn.read()).await {
                None => {
                    READS_DROPPED.fetch_add(1, Relaxed);
                }
                Some(Ok(Some(buf))) => {
                    let (res, _) = conn.write_all(buf).await;
                    res?;
                }
                Some(Ok(None)) => return conn.shutdown_write(),
                Some(Err(e)) => return Err(e),
            }
        }
    }
}

/// A connection whose first bytes are `DROP!` is dropped after its data
/// has queued up in the kernel, without reading it; any other is echoed.
struct DropOrEcho;

impl Handler for DropOrEcho {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        let Some(first) = conn.read().await? else {
            return Ok(());
        };
        if first.starts_with(b"DROP!") {
            // Let more of the client's data land in ring buffers queued for
            // this connection, then drop everything, the stream first.
            percore::time::sleep(Duration::from_millis(2)).await;
            STREAMS_DROPPED.fetch_add(1, Relaxed);
            drop(conn);
            drop(first);
            return Ok(());
        }
        let (res, _) = conn.write_all(first).await;
        res?;
        while let Some(buf) = conn.read().await? {
            let (res, _) = conn.write_all(buf).await;
            res?;
        }
        conn.shutdown_write()
    }
}

backend_tests! {
    /// Thousands of reads dropped mid-flight; every byte still echoed, in
    /// order, on 32 concurrent streams and 8 ping-pong connections.
    fn dropped_reads_lose_no_bytes(backend) {
        let before = READS_DROPPED.load(Relaxed);
        let server = builder(backend)
            .recv_buffers(16, 2048)
            .start(|core| FlakyEcho { rng: Cell::new(core.index as u64 + 1) })
            .expect("start");
        check_backend(&server, backend);
        let addr = server.local_addr();
        std::thread::scope(|scope| {
            // Ping-pong clients: the server's next read always has to wait
            // for the client, so many reads are dropped while in flight.
            for t in 0..8 {
                scope.spawn(move || {
                    let mut client = connect(addr);
                    let mut rng = Rng::new(t + 100);
                    for i in 0..300 {
                        let len = rng.between(1, 4096);
                        roundtrip(&mut client, pattern(t as usize * 1000 + i, len));
                    }
                });
            }
            // Streaming clients: reads dropped while data is arriving.
            Streams {
                conns: 32,
                bytes: 256 * 1024,
                max_write: 8 * 1024,
                threads: 4,
                half_close: true,
                limit: Duration::from_secs(60),
                first_id: 0,
            }
            .run(addr)
            .unwrap_or_else(|e| panic!("{e}"));
        });
        let dropped = READS_DROPPED.load(Relaxed) - before;
        let stats = wait_until(Duration::from_secs(60), "an idle server", || server.stats(), |s| {
            sum(s, |c| c.active) == 0 && sum(s, |c| c.ring_buffers_out) == 0 && sum(s, |c| c.in_flight) == idle_in_flight(backend)
        });
        println!("{backend}: {dropped} reads dropped in flight; {}", stats[0]);
        assert!(dropped >= 1000, "only {dropped} reads were dropped: the test proves little");
        server.shutdown();
        server.join().expect("join");
    }

    /// 300 connections dropped with received data queued in ring buffers,
    /// while 16 others stream through the same 32 buffers: every buffer
    /// comes back, no fd leaks, and the streams read only their own bytes.
    fn dropped_streams_return_their_buffers(backend) {
        let before = STREAMS_DROPPED.load(Relaxed);
        let server = builder(backend).recv_buffers(32, 2048).start(|_core| DropOrEcho).expect("start");
        check_backend(&server, backend);
        let addr = server.local_addr();
        ping(addr);
        wait_until(Duration::from_secs(60), "an idle server", || server.stats(), |s| {
            sum(s, |c| c.active) == 0 && sum(s, |c| c.in_flight) == idle_in_flight(backend)
        });
        let fds_before = fd_count();
        std::thread::scope(|scope| {
            let droppers = scope.spawn(|| {
                let mut payload = b"DROP!".to_vec();
                payload.extend_from_slice(pattern(5, 48 * 1024));
                for _ in 0..300 {
                    let mut client = connect(addr);
                    // The server may close before all of it is written.
                    match client.write_all(&payload) {
                        Ok(()) => {}
                        Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => continue,
                        Err(e) => panic!("write: {e}"),
                    }
                    // The server closes without echoing: end of stream or reset.
                    match read_to_end(&mut client) {
                        Ok(got) => assert!(got.is_empty(), "a dropped connection echoed {} bytes", got.len()),
                        Err((got, e)) => {
                            assert!(got.is_empty(), "a dropped connection echoed {} bytes", got.len());
                            assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
                        }
                    }
                }
            });
            Streams {
                conns: 16,
                bytes: 512 * 1024,
                max_write: 16 * 1024,
                threads: 2,
                half_close: true,
                limit: Duration::from_secs(60),
                first_id: 100,
            }
            .run(addr)
            .unwrap_or_else(|e| panic!("{e}"));
            droppers.join().expect("dropping clients");
        });
        let stats = wait_until(Duration::from_secs(60), "every buffer and operation back", || server.stats(), |s| {
            sum(s, |c| c.active) == 0 && sum(s, |c| c.ring_buffers_out) == 0 && sum(s, |c| c.in_flight) == idle_in_flight(backend)
        });
        let dropped = STREAMS_DROPPED.load(Relaxed) - before;
        println!("{backend}: {dropped} connections dropped with data pending; {}", stats[0]);
        assert!(dropped >= 250, "only {dropped} connections were dropped with data");
        let fds = settle_fds(fds_before, Duration::from_secs(60));
        assert_eq!(fds, fds_before, "fd leak: {:?}", fd_table());
        ping(addr);
        server.shutdown();
        server.join().expect("join");
    }

    /// A write polled once (on io_uring its send is then queued for the
    /// kernel), carried out of its `block_on` and dropped after that core
    /// ended: on io_uring its buffer is leaked, not freed, since no core
    /// is left to say the kernel is done with it; on epoll, where the
    /// kernel never holds it, it is freed.
    fn a_write_dropped_away_from_its_core_leaks_its_buffer(backend) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let before = BUFS_FREED.load(Relaxed);
        let (_stream, write) = percore::block_on(backend, async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            let stream: &'static TcpStream = Box::leak(Box::new(stream));
            // Far more than the socket takes: the peer reads nothing.
            let mut write = Box::pin(stream.write_all(Counted(vec![7; 64 << 20])));
            let mut cx = Context::from_waker(Waker::noop());
            assert!(write.as_mut().poll(&mut cx).is_pending(), "a 64 MiB write completed");
            (stream, write)
        })
        .expect("block_on");
        assert_eq!(BUFS_FREED.load(Relaxed) - before, 0, "freed while its future lives");
        drop(write);
        let freed = BUFS_FREED.load(Relaxed) - before;
        match backend {
            Backend::Epoll => assert_eq!(freed, 1, "the buffer of an epoll write is freed"),
            _ => assert_eq!(freed, 0, "a buffer the kernel may have held was freed away from its core"),
        }
        drop(listener);
    }
}
