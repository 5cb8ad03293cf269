//! Gathered writes allocate nothing in steady state, on both backends:
//! after warm-up, 40,000 replies written with `write_all_vectored` (a
//! tuple of a static header and the received buffer, a three-tuple, an
//! array with an empty buffer, a reused `Vec` of 16 pieces) make zero heap
//! allocations on the server's core thread.
//!
//! The counting allocator counts only on the core thread (marked by the
//! handler factory) and only inside the measured window; on failure the
//! sizes of the first allocations are printed, and `PERCORE_ALLOC_TRAP=1`
//! aborts at the first one with its backtrace.

use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::sync::Barrier;

use bytes::Bytes;
use percore::{Connection, Handler};
use percore_test_kit::alloc::{ALLOCS, COUNTING, FIRST_IN_WINDOW, SIZES, TRACKED, TRAP, WINDOW};
use percore_test_kit::*;

const CLIENTS: usize = 4;
const WARM_UP: usize = 1_000;
/// Per client: 4 × 10,000 = 40,000 replies in the window.
const MEASURED: usize = 10_000;

const HEADER: &[u8] = b"reply: ";
const PIECE: &[u8] = b"0123456789abcdef";

/// Answers each one-byte request with a gathered write whose shape the
/// byte chooses; the reply holds the request byte itself (the received
/// buffer, sent as it came) except in the array shape.
struct Gathered;

impl Handler for Gathered {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        let mut pieces: Vec<&'static [u8]> = Vec::with_capacity(16);
        while let Some(buf) = conn.read().await? {
            let res = match buf[0] % 4 {
                0 => conn.write_all_vectored((HEADER, buf)).await.0,
                1 => {
                    let tail = Bytes::from_static(b"\r\n");
                    conn.write_all_vectored(("three: ", buf, tail)).await.0
                }
                2 => conn.write_all_vectored([HEADER, b"", PIECE]).await.0,
                _ => {
                    pieces.extend(std::iter::repeat_n(PIECE, 16));
                    let (res, back) = conn.write_all_vectored(pieces).await;
                    pieces = back;
                    pieces.clear();
                    res
                }
            };
            res?;
        }
        conn.shutdown_write()
    }
}

/// The reply to request byte `b`.
fn reply(b: u8) -> Vec<u8> {
    match b % 4 {
        0 => [HEADER, &[b]].concat(),
        1 => [&b"three: "[..], &[b], b"\r\n"].concat(),
        2 => [HEADER, PIECE].concat(),
        _ => PIECE.repeat(16),
    }
}

backend_tests! {
    /// Zero heap allocations per gathered write after warm-up.
    fn zero_allocations_per_gathered_write(backend) {
        TRAP.store(std::env::var_os("PERCORE_ALLOC_TRAP").is_some(), Ordering::Relaxed);
        // On from the start: accepting the clients must be counted, which
        // shows the counter works on the core thread.
        ALLOCS.store(0, Ordering::Relaxed);
        COUNTING.store(true, Ordering::SeqCst);
        let server = builder(backend)
            .start(|_core| {
                TRACKED.with(|t| t.set(true));
                Gathered
            })
            .expect("start");
        check_backend(&server, backend);
        let addr = server.local_addr();
        let barrier = Barrier::new(CLIENTS + 1);
        let mut expected_out = 0;
        std::thread::scope(|scope| {
            let clients: Vec<_> = (0..CLIENTS)
                .map(|id| {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        let mut stream = connect(addr);
                        let mut back = vec![0u8; 256];
                        let mut bytes = 0;
                        let mut exchange = |n: usize| {
                            for i in 0..n {
                                let b = (i + id) as u8;
                                let want = reply(b);
                                stream.write_all(&[b]).expect("write");
                                let got = &mut back[..want.len()];
                                stream.read_exact(got).expect("read");
                                assert_eq!(got, &want[..], "reply to {b}");
                                bytes += want.len();
                            }
                        };
                        exchange(WARM_UP);
                        barrier.wait(); // warm-up done everywhere
                        barrier.wait(); // window open
                        exchange(MEASURED);
                        barrier.wait(); // window closed
                        // Open until the count is read: a close is no write.
                        barrier.wait();
                        bytes
                    })
                })
                .collect();
            barrier.wait();
            let warm_up = ALLOCS.swap(0, Ordering::Relaxed);
            assert!(warm_up > 0, "the core thread's allocations were not counted");
            WINDOW.store(true, Ordering::Relaxed);
            barrier.wait();
            barrier.wait();
            COUNTING.store(false, Ordering::SeqCst);
            WINDOW.store(false, Ordering::Relaxed);
            barrier.wait();
            for client in clients {
                expected_out += client.join().expect("client");
            }
        });
        let allocs = ALLOCS.load(Ordering::Relaxed);
        let sizes: Vec<usize> = SIZES.iter().map(|s| s.load(Ordering::Relaxed)).collect();
        // On io_uring a reply may reach the client before its task takes
        // the completion that counts it.
        let stats = wait_until(std::time::Duration::from_secs(60), "every byte counted", || server.stats(), |s| {
            sum(s, |c| c.bytes_out) == expected_out as u64
        });
        server.shutdown();
        server.join().expect("join");
        let writes = CLIENTS * MEASURED;
        println!("{backend}: {allocs} allocations over {writes} gathered writes (first sizes {sizes:?})");
        println!("{}", stats[0]);
        let first = FIRST_IN_WINDOW.lock().unwrap_or_else(|e| e.into_inner()).take();
        assert_eq!(
            allocs,
            0,
            "allocations on the core thread over {writes} gathered writes; first sizes {sizes:?}; the first's backtrace:\n{}",
            first.unwrap_or_default()
        );
    }
}
