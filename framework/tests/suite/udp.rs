//! UDP sockets on both backends, through `percore::block_on`: datagrams of
//! every size from empty to the largest IPv4 carries come back byte for
//! byte, over IPv4 and IPv6; a datagram longer than the buffer is cut and
//! says so; a connected socket reports its peer's port unreachable once,
//! then works again; a segmented send arrives as its datagrams, with GSO
//! and without; GRO joins what it may and says where to cut; a flood from
//! one sender is dropped by the kernel, never queued without bound, and the
//! socket keeps receiving after it; batches receive and send many
//! datagrams per call, in order, with truncation per slot.

use std::net::{SocketAddr, UdpSocket as StdUdp};

use percore::net::{Batch, UdpSocket};
use percore::time::timeout;
use percore_test_kit::*;

/// The sizes a round trip covers: empty, one byte, a QUIC packet, a full
/// Ethernet payload, a jumbo frame and the largest IPv4 datagram.
const SIZES: [usize; 6] = [0, 1, 1200, 1472, 9000, 65_507];

/// Bytes of `len` that tell their positions apart.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A std socket on the other side, echoing `count` datagrams back.
fn std_echo(at: &str, count: usize) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let socket = StdUdp::bind(at).expect("bind the echo");
    socket.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    let addr = socket.local_addr().expect("addr");
    let thread = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65_536];
        for _ in 0..count {
            let (n, peer) = socket.recv_from(&mut buf).expect("echo receives");
            socket.send_to(&buf[..n], peer).expect("echo sends");
        }
    });
    (addr, thread)
}

/// Sends each size to a std echo and checks what comes back, first with
/// `send_to` and `recv_from`, then connected with `send` and `recv`.
fn round_trips(backend: percore::Backend, local: &'static str) {
    let (echo, thread) = std_echo(local, SIZES.len() * 2);
    percore::block_on(backend, async move {
        let socket = UdpSocket::bind(local.parse().unwrap()).expect("bind");
        let mut buf = Vec::with_capacity(65_536);
        for (i, &size) in SIZES.iter().enumerate() {
            let sent = pattern(size, i as u8);
            let (res, back) = socket.send_to(sent.clone(), echo).await;
            assert_eq!(res.expect("send_to"), size);
            drop(back);
            buf.clear();
            let (res, got) = timeout(IO_TIMEOUT, socket.recv_from(buf))
                .await
                .expect("echoed");
            let meta = res.expect("recv_from");
            assert_eq!(
                (meta.len, meta.datagram_len, meta.peer),
                (size, size, Some(echo))
            );
            assert!(!meta.truncated());
            assert!(
                got[..meta.len] == sent[..],
                "{size} bytes came back changed"
            );
            buf = got;
        }
        socket.connect(echo).expect("connect");
        assert_eq!(socket.peer_addr().expect("peer"), echo);
        for (i, &size) in SIZES.iter().enumerate() {
            let sent = pattern(size, 100 + i as u8);
            let (res, _) = socket.send(sent.clone()).await;
            assert_eq!(res.expect("send"), size);
            buf.clear();
            let (res, got) = timeout(IO_TIMEOUT, socket.recv(buf)).await.expect("echoed");
            let meta = res.expect("recv");
            assert_eq!(meta.len, size);
            assert!(
                got[..meta.len] == sent[..],
                "{size} bytes came back changed (connected)"
            );
            buf = got;
        }
    })
    .expect("block_on");
    thread.join().expect("echo thread");
}

/// The receive queue (bytes) and drop count `net/udp` gives the IPv4
/// socket bound on `port`, in this thread's network namespace: a test
/// thread may be in a private one (`/proc/net` is the first thread's).
///
/// The table is read a page at a time: sockets that other tests open or
/// close meanwhile can make a read skip a line, so a missing line is
/// read again before it counts as missing.
fn udp_queue(port: u16) -> (u64, u64) {
    let port = format!(":{port:04X}");
    for _ in 0..100 {
        let table = std::fs::read_to_string("/proc/thread-self/net/udp")
            .expect("/proc/thread-self/net/udp");
        for line in table.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() > 12 && fields[1].ends_with(&port) {
                let rx = fields[4].split(':').nth(1).expect("tx:rx");
                let rx = u64::from_str_radix(rx, 16).expect("hex rx_queue");
                return (rx, fields[12].parse().expect("drops"));
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("no socket on port {port} in /proc/net/udp, read 100 times");
}

/// Whether `::1` can be bound here.
fn ipv6_loopback() -> bool {
    StdUdp::bind("[::1]:0").is_ok()
}

backend_tests! {
    parallel;

    /// Datagrams of 0, 1, 1,200, 1,472, 9,000 and 65,507 bytes come back
    /// from an echo byte for byte over IPv4, unconnected and connected.
    fn udp_round_trips_ipv4(backend) {
        round_trips(backend, "127.0.0.1:0");
    }

    /// The same over IPv6 loopback, where the machine has one.
    fn udp_round_trips_ipv6(backend) {
        if !ipv6_loopback() {
            println!("skipped: ::1 cannot be bound here (no IPv6 loopback)");
            return;
        }
        round_trips(backend, "[::1]:0");
    }

    /// A datagram longer than the buffer fills it, and the result says how
    /// long the datagram was; the next datagram is received whole.
    fn udp_truncation_is_reported(backend) {
        let sender = StdUdp::bind("127.0.0.1:0").expect("bind sender");
        percore::block_on(backend, async move {
            let socket = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).expect("bind");
            let to = socket.local_addr();
            let long = pattern(3000, 7);
            sender.send_to(&long, to).expect("send long");
            sender.send_to(b"short", to).expect("send short");
            let (res, got) = socket.recv_from(Vec::with_capacity(1000)).await;
            let meta = res.expect("recv long");
            assert_eq!((meta.len, meta.datagram_len), (1000, 3000));
            assert!(meta.truncated());
            assert_eq!(&got[..], &long[..1000]);
            let (res, got) = socket.recv_from(Vec::with_capacity(1000)).await;
            let meta = res.expect("recv short");
            assert_eq!((meta.len, meta.truncated()), (5, false));
            assert_eq!(&got[..], b"short");
        })
        .expect("block_on");
    }

    /// A connected socket whose peer has no socket gets the ICMP port
    /// unreachable as `ConnectionRefused` once, on the receive waiting
    /// then; its next exchange, with a live peer, works.
    fn udp_port_unreachable_then_recovery(backend) {
        // A port with no socket: bound, its number kept, then closed.
        let gone = StdUdp::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
        let (echo, thread) = std_echo("127.0.0.1:0", 1);
        percore::block_on(backend, async move {
            let socket = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).expect("bind");
            socket.connect(gone).expect("connect");
            let (res, _) = socket.send(&b"anyone?"[..]).await;
            res.expect("the first send goes out");
            let (res, _) = timeout(IO_TIMEOUT, socket.recv(Vec::with_capacity(64)))
                .await
                .expect("the refusal comes");
            let err = res.expect_err("port unreachable");
            assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
            socket.connect(echo).expect("connect to the echo");
            let (res, _) = socket.send(&b"hello"[..]).await;
            res.expect("send after the error");
            let (res, got) = timeout(IO_TIMEOUT, socket.recv(Vec::with_capacity(64)))
                .await
                .expect("echoed");
            res.expect("recv after the error");
            assert_eq!(&got[..], b"hello");
        })
        .expect("block_on");
        thread.join().expect("echo thread");
    }

    /// A segmented send of 10 datagrams of 1,000 bytes (the last 500)
    /// arrives as those datagrams, in order, whether the kernel cut them
    /// (GSO, where it has it) or the socket sent each (forced after).
    fn udp_segmented_send_arrives_as_datagrams(backend) {
        let receiver = StdUdp::bind("127.0.0.1:0").expect("bind receiver");
        receiver.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        let to = receiver.local_addr().expect("addr");
        let payload = pattern(9_500, 3);
        let expected = payload.clone();
        let gso = percore::block_on(backend, async move {
            let socket = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).expect("bind");
            let gso = socket.gso_supported();
            let (res, payload) = socket.send_segments(payload, Some(to), 1000).await;
            assert_eq!(res.expect("segmented send"), 9_500);
            // The fallback, one send per datagram, forced: the same again.
            socket.disable_gso();
            let (res, _) = socket.send_segments(payload, Some(to), 1000).await;
            assert_eq!(res.expect("segmented send without GSO"), 9_500);
            let (res, _) = socket.send_segments(vec![1u8; 10], Some(to), 0).await;
            assert_eq!(res.expect_err("size 0").kind(), std::io::ErrorKind::InvalidInput);
            gso
        })
        .expect("block_on");
        println!("GSO {}", if gso { "offered by the kernel" } else { "absent: one send each" });
        let mut buf = vec![0u8; 2048];
        for train in ["with GSO", "one send each"] {
            for (i, chunk) in expected.chunks(1000).enumerate() {
                let n = receiver.recv(&mut buf).expect("a segment");
                assert_eq!(&buf[..n], chunk, "segment {i}, {train}");
            }
        }
    }

    /// With GRO on, a GSO train sent over loopback may arrive joined, with
    /// its segment size; cut at it, the bytes are the sent datagrams in
    /// order. Where the kernel offers both, at least one receive is joined.
    fn udp_gro_receives_split_back(backend) {
        let sent: Vec<Vec<u8>> = (0..8).map(|i| pattern(1200, i)).collect();
        let train: Vec<u8> = sent.concat();
        let (offload, joined, got) = percore::block_on(backend, async move {
            let socket = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).expect("bind");
            let sender = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).expect("bind sender");
            let gro = socket.set_gro(true).expect("set_gro");
            let (res, _) = sender.send_segments(train, Some(socket.local_addr()), 1200).await;
            assert_eq!(res.expect("send the train"), 9600);
            let mut got: Vec<Vec<u8>> = Vec::new();
            let mut joined = false;
            let mut buf = Vec::with_capacity(65_536);
            while got.len() < 8 {
                buf.clear();
                let (res, back) = timeout(IO_TIMEOUT, socket.recv_from(buf)).await.expect("recv");
                let meta = res.expect("recv");
                joined |= meta.segment_size.is_some_and(|s| meta.len > s);
                let size = meta.segment_size.unwrap_or(meta.len.max(1));
                got.extend(back[..meta.len].chunks(size).map(<[u8]>::to_vec));
                buf = back;
            }
            (gro && sender.gso_supported(), joined, got)
        })
        .expect("block_on");
        println!("GRO and GSO {}", if offload { "offered" } else { "absent" });
        assert_eq!(got, sent);
        assert_eq!(joined, offload, "a GSO train to a GRO socket arrives joined");
    }

    /// 100 datagrams (one longer than a slot) received in batches of 16
    /// come in order, whole but the long one, which says it was cut;
    /// then a batch of 40 sent at once arrives as its 40 datagrams.
    fn udp_batches_receive_and_send_in_order(backend) {
        let peer = StdUdp::bind("127.0.0.1:0").expect("bind peer");
        peer.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        let peer_addr = peer.local_addr().expect("addr");
        let sent: Vec<Vec<u8>> = (0..100).map(|i| pattern(if i == 50 { 3000 } else { 100 + i }, i as u8)).collect();
        let datagrams = sent.clone();
        let sender = peer.try_clone().expect("clone");
        let (got, cut) = percore::block_on(backend, async move {
            let socket = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).expect("bind");
            for d in &datagrams {
                sender.send_to(d, socket.local_addr()).expect("send");
            }
            let mut batch = Batch::new(16, 2048);
            let mut got: Vec<Vec<u8>> = Vec::new();
            let mut cut = Vec::new();
            while got.len() < datagrams.len() {
                let (res, back) = timeout(IO_TIMEOUT, socket.recv_batch(batch)).await.expect("a batch");
                let n = res.expect("recv_batch");
                assert!((1..=16).contains(&n) && n == back.len(), "{n} in a batch");
                for (bytes, meta) in back.iter() {
                    assert_eq!(meta.peer, Some(peer_addr));
                    if meta.truncated() {
                        cut.push((got.len(), meta.datagram_len));
                    }
                    got.push(bytes.to_vec());
                }
                batch = back;
            }
            // Back to the peer, 40 at once.
            let mut out = Batch::new(40, 64);
            for i in 0..40u8 {
                assert!(out.push(&[i; 20], peer_addr));
            }
            assert!(!out.push(&[0; 20], peer_addr), "a full batch takes no more");
            let (res, out) = socket.send_batch(out).await;
            assert_eq!((res.expect("send_batch"), out.sent()), (40, 40));
            (got, cut)
        })
        .expect("block_on");
        assert_eq!(cut, [(50, 3000)]);
        for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
            let want = if i == 50 { &s[..2048] } else { &s[..] };
            assert!(g[..] == *want, "datagram {i}");
        }
        let mut buf = [0u8; 64];
        for i in 0..40u8 {
            let n = peer.recv(&mut buf).expect("a batched datagram");
            assert_eq!(&buf[..n], &[i; 20]);
        }
    }

    /// A receive that waits (nothing queued when it starts: on io_uring
    /// a `RECVMSG` then, on epoll the readable edge) names its sender;
    /// a batch receive that waits brings the datagrams sent while it
    /// waited, in order, each with its sender.
    fn udp_batch_receive_waits_for_the_first(backend) {
        let sender = StdUdp::bind("127.0.0.1:0").expect("bind sender");
        let from = sender.local_addr().expect("addr");
        let got = percore::block_on(backend, async move {
            let socket = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).expect("bind");
            let to = socket.local_addr();
            // A single receive that waits too, and names its sender.
            let send_one = async {
                percore::time::sleep(std::time::Duration::from_millis(20)).await;
                sender.send_to(b"first", to).expect("send");
            };
            let (_, (res, first)) = percore::future::join(send_one, socket.recv_from(Vec::with_capacity(64))).await;
            assert_eq!(res.expect("recv_from").peer, Some(from));
            assert_eq!(&first[..], b"first");
            let send_later = async {
                percore::time::sleep(std::time::Duration::from_millis(20)).await;
                for i in 0..5u8 {
                    sender.send_to(&[i; 10], to).expect("send");
                }
            };
            let mut got = Vec::new();
            let mut batch = Batch::new(8, 64);
            let receive = async {
                while got.len() < 5 {
                    let (res, back) = socket.recv_batch(batch).await;
                    res.expect("recv_batch");
                    for (bytes, meta) in back.iter() {
                        assert_eq!(meta.peer, Some(from));
                        got.push(bytes.to_vec());
                    }
                    batch = back;
                }
            };
            timeout(IO_TIMEOUT, percore::future::join(send_later, receive)).await.expect("all five");
            got
        })
        .expect("block_on");
        let want: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 10]).collect();
        assert_eq!(got, want);
    }

    /// A flood of 20,000 datagrams from one source at a socket that does
    /// not read, its kernel buffer asked at 64 KiB: what waits stays
    /// within the buffer (memory bounded whatever the flood) and the
    /// kernel counts the rest dropped; the socket then receives what was
    /// queued and the datagram sent after.
    fn udp_flood_is_bounded_by_the_socket_buffer(backend) {
        let flooder = StdUdp::bind("127.0.0.1:0").expect("bind flooder");
        percore::block_on(backend, async move {
            let socket = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).expect("bind");
            socket.set_recv_buffer_size(64 * 1024).expect("SO_RCVBUF");
            let to = socket.local_addr();
            for _ in 0..20_000 {
                let _ = flooder.send_to(&[7u8; 100], to);
            }
            let (queued, drops) = udp_queue(to.port());
            // The kernel doubles the size asked; one datagram may pass it.
            assert!(queued <= 4 * 64 * 1024, "{queued} bytes wait in the socket");
            assert!(drops > 0, "the kernel dropped none of the flood");
            flooder.send_to(b"end", to).ok();
            let mut flood = 0u64;
            let mut buf = Vec::with_capacity(2048);
            loop {
                if udp_queue(to.port()).0 == 0 {
                    // Drained: the end mark may have been dropped too.
                    flooder.send_to(b"end", to).expect("send the end mark");
                }
                buf.clear();
                let (res, back) = timeout(IO_TIMEOUT, socket.recv_from(buf)).await.expect("a datagram");
                let meta = res.expect("recv_from");
                if &back[..meta.len] == b"end" {
                    break;
                }
                assert_eq!(meta.len, 100);
                flood += 1;
                buf = back;
            }
            assert!(flood > 0 && flood < 20_000, "{flood} of the flood received");
        })
        .expect("block_on");
    }
}
