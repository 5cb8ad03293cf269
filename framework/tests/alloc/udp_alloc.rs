//! Datagrams allocate nothing in steady state, on both backends: after
//! warm-up, 5,000 round trips of `send_to` and `recv_from` with owned
//! buffers, and 300 rounds of 16 datagrams sent with `send_batch` and
//! received with `recv_batch`, make zero heap allocations on the core's
//! thread (the message headers come from the socket's spares, a batch
//! keeps its own).

use std::net::UdpSocket as StdUdp;
use std::sync::atomic::Ordering;

use percore::net::{Batch, UdpSocket};
use percore_test_kit::alloc::{ALLOCS, COUNTING, TRACKED, TRAP};
use percore_test_kit::*;

const WARM_UP: usize = 500;
const MEASURED: usize = 5_000;

/// The buffers of the exchanges, made once.
struct Bufs {
    out: Vec<u8>,
    buf: Vec<u8>,
}

/// Sends a datagram to `to` and receives its echo, `n` times.
async fn exchange(socket: &UdpSocket, to: std::net::SocketAddr, n: usize, bufs: &mut Bufs) {
    let mut out = std::mem::take(&mut bufs.out);
    let mut buf = std::mem::take(&mut bufs.buf);
    for _ in 0..n {
        let (res, back) = socket.send_to(out, to).await;
        assert_eq!(res.expect("send_to"), 100);
        out = back;
        buf.clear();
        let (res, back) = socket.recv_from(buf).await;
        assert_eq!(res.expect("recv_from").len, 100);
        buf = back;
    }
    *bufs = Bufs { out, buf };
}

backend_tests! {
    /// Zero heap allocations per datagram after warm-up.
    fn zero_allocations_per_datagram(backend) {
        TRAP.store(std::env::var_os("PERCORE_ALLOC_TRAP").is_some(), Ordering::Relaxed);
        let echo = StdUdp::bind("127.0.0.1:0").expect("bind the echo");
        echo.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        let to = echo.local_addr().expect("addr");
        let echoing = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            for _ in 0..WARM_UP + MEASURED {
                let (n, peer) = echo.recv_from(&mut buf).expect("echo receives");
                echo.send_to(&buf[..n], peer).expect("echo sends");
            }
        });
        let (warm_up, measured) = percore::block_on(backend, async move {
            TRACKED.with(|t| t.set(true));
            let socket = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).expect("bind");
            let mut bufs = Bufs { out: vec![7u8; 100], buf: Vec::with_capacity(2048) };
            ALLOCS.store(0, Ordering::Relaxed);
            COUNTING.store(true, Ordering::SeqCst);
            exchange(&socket, to, WARM_UP, &mut bufs).await;
            let warm_up = ALLOCS.swap(0, Ordering::Relaxed);
            exchange(&socket, to, MEASURED, &mut bufs).await;
            COUNTING.store(false, Ordering::SeqCst);
            TRACKED.with(|t| t.set(false));
            (warm_up, ALLOCS.load(Ordering::Relaxed))
        })
        .expect("block_on");
        echoing.join().expect("echo thread");
        assert!(warm_up > 0, "the core thread's allocations were not counted");
        assert_eq!(measured, 0, "{measured} allocations in {MEASURED} round trips");
    }

    /// Zero heap allocations per batch after warm-up.
    fn zero_allocations_per_batch(backend) {
        const ROUNDS: usize = 300;
        const PER: usize = 16;
        let echo = StdUdp::bind("127.0.0.1:0").expect("bind the echo");
        echo.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        let to = echo.local_addr().expect("addr");
        let echoing = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            for _ in 0..2 * ROUNDS * PER {
                let (n, peer) = echo.recv_from(&mut buf).expect("echo receives");
                echo.send_to(&buf[..n], peer).expect("echo sends");
            }
        });
        let measured = percore::block_on(backend, async move {
            TRACKED.with(|t| t.set(true));
            let socket = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).expect("bind");
            let mut out = Some(Batch::new(PER, 256));
            let mut inb = Some(Batch::new(PER, 256));
            // Counted from the second half on (the counter's working on
            // this thread is shown by `zero_allocations_per_datagram`).
            for round in 0..2 * ROUNDS {
                if round == ROUNDS {
                    ALLOCS.store(0, Ordering::Relaxed);
                    COUNTING.store(true, Ordering::SeqCst);
                }
                let mut batch = out.take().expect("the send batch");
                batch.clear();
                for i in 0..PER {
                    assert!(batch.push(&[i as u8; 100], to));
                }
                let (res, batch) = socket.send_batch(batch).await;
                assert_eq!(res.expect("send_batch"), PER);
                out = Some(batch);
                let mut got = 0;
                while got < PER {
                    let batch = inb.take().expect("the receive batch");
                    let (res, batch) = socket.recv_batch(batch).await;
                    got += res.expect("recv_batch");
                    inb = Some(batch);
                }
            }
            COUNTING.store(false, Ordering::SeqCst);
            TRACKED.with(|t| t.set(false));
            ALLOCS.load(Ordering::Relaxed)
        })
        .expect("block_on");
        echoing.join().expect("echo thread");
        assert_eq!(measured, 0, "{measured} allocations in {ROUNDS} batch rounds");
    }
}
