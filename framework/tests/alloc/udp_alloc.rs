//! Datagrams allocate nothing in steady state, on both backends: after
//! warm-up, 5,000 round trips of `send_to` and `recv_from` with owned
//! buffers make zero heap allocations on the core's thread (the message
//! headers come from the socket's spares).

use std::net::UdpSocket as StdUdp;
use std::sync::atomic::Ordering;

use percore::net::UdpSocket;
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
}
