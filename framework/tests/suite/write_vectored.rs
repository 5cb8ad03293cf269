//! `TcpStream::write_all_vectored` on real loopback sockets, on both
//! backends: every shape of collection (tuples of different buffer types,
//! arrays, vectors, empty buffers, an empty collection, more buffers than
//! one send may carry) arrives intact and in order, and comes back; a large
//! body behind a slow reader goes out in many partial sends that end
//! anywhere, inside buffers and between them; futures dropped mid-send
//! leave a stream whose bytes are a prefix of what was being written (the
//! kernel never sent freed memory), and the server idle and whole; a stream
//! used on a core other than its own is refused, and its buffers come back.

use std::cell::Cell;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener as StdListener};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use bytes::Bytes;
use percore::buf::FixedBuf;
use percore::net::TcpStream;
use percore::time::timeout;
use percore::{Connection, Handler};
use percore_test_kit::*;

/// A peer on its own thread that accepts one connection, waits `delay`,
/// then reads it to the end in reads of at most `chunk` bytes.
fn reader(delay: Duration, chunk: usize) -> (SocketAddr, std::thread::JoinHandle<Vec<u8>>) {
    let listener = StdListener::bind("127.0.0.1:0").expect("bind");
    // Inherited by the accepted socket: a small receive window, so that a
    // large write stalls and goes out in many parts.
    set_buffer(listener.as_raw_fd(), libc::SO_RCVBUF, 64 << 10);
    let addr = listener.local_addr().expect("addr");
    let thread = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        std::thread::sleep(delay);
        let mut got = Vec::new();
        let mut buf = vec![0u8; chunk];
        loop {
            match s.read(&mut buf) {
                Ok(0) => return got,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => panic!("read after {} bytes: {e}", got.len()),
            }
        }
    });
    (addr, thread)
}

/// Sets a socket's `SO_SNDBUF` or `SO_RCVBUF`.
fn set_buffer(fd: i32, option: i32, bytes: i32) {
    // SAFETY: a valid socket fd; the kernel reads one `int` from `bytes`.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            (&bytes as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "setsockopt: {}", std::io::Error::last_os_error());
}

/// `n` random bytes from `seed`.
fn random(seed: u64, n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    Rng::new(seed).fill(&mut out);
    out
}

/// `count` buffers of random lengths in `0..=max` (so some are empty).
fn pieces(seed: u64, count: usize, max: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|i| random(seed + i as u64, rng.between(0, max)))
        .collect()
}

/// Writes `bufs` with one gathered write; checks that they come back
/// unchanged and appends their bytes to `expected`.
async fn write<B>(stream: &TcpStream, bufs: B, expected: &mut Vec<u8>, flat: impl Fn(&B) -> Vec<u8>)
where
    B: percore::buf::IoBufs,
{
    let before = flat(&bufs);
    let (res, back) = timeout(IO_TIMEOUT, stream.write_all_vectored(bufs))
        .await
        .expect("the write finished in time");
    res.expect("write_all_vectored");
    assert!(flat(&back) == before, "the buffers came back changed");
    expected.extend_from_slice(&before);
}

backend_tests! {
    /// Every shape of collection, one after the other on one connection:
    /// the peer reads exactly their bytes, in order, and each collection
    /// comes back as it was.
    fn every_shape_arrives_in_order_and_comes_back(backend) {
        let (addr, peer) = reader(Duration::ZERO, 64 << 10);
        let expected = percore::block_on(backend, async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            let mut expected = Vec::new();
            let e = &mut expected;
            write(&stream, Vec::<Vec<u8>>::new(), e, |b| b.concat()).await;
            write(&stream, [&b""[..], b"", b""], e, |b| b.concat()).await;
            write(&stream, (String::from("two "), b"buffers".to_vec()), e, |(a, b)| {
                [a.as_bytes(), b].concat()
            })
            .await;
            let three = [Bytes::from(random(1, 300)), Bytes::new(), Bytes::from(random(2, 5000))];
            write(&stream, three, e, |b| b.concat()).await;
            let mut fixed = FixedBuf::take().expect("a fixed buffer");
            fixed.extend_from_slice(&random(3, 1000));
            let mixed = (b"HDR ".to_vec(), fixed, Bytes::from_static(b" mid "), "tail");
            write(&stream, mixed, e, |(a, b, c, d)| {
                [&a[..], b.as_slice(), &c[..], d.as_bytes()].concat()
            })
            .await;
            // Exactly as many as one send carries, one more, and many more
            // with empty ones among them.
            for (seed, count) in [(10, 1024), (11, 1025), (12, 3000)] {
                write(&stream, pieces(seed, count, 40), e, |b| b.concat()).await;
            }
            expected
        })
        .expect("block_on");
        let got = peer.join().expect("peer");
        assert_eq!(got.len(), expected.len(), "byte count");
        assert!(got == expected, "bytes arrived out of order or changed");
    }

    /// A small header, hundreds of buffers of up to 64 KiB and a 16 MiB
    /// body, through 64 KiB socket buffers to a peer that starts late and
    /// reads in odd-sized chunks: hundreds of partial sends, ending inside
    /// buffers and at their boundaries. Every byte arrives, in order.
    fn a_large_write_resumes_after_partial_sends(backend) {
        let (addr, peer) = reader(Duration::from_millis(100), 7919);
        let expected = percore::block_on(backend, async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            set_buffer(stream.as_raw_fd(), libc::SO_SNDBUF, 64 << 10);
            let mut expected = Vec::new();
            let header = b"LEN 16777216\r\n".to_vec();
            let body = Bytes::from(random(20, 16 << 20));
            write(&stream, (header, body), &mut expected, |(a, b)| [&a[..], b].concat()).await;
            write(&stream, pieces(21, 400, 64 << 10), &mut expected, |b| b.concat()).await;
            expected
        })
        .expect("block_on");
        let got = peer.join().expect("peer");
        assert_eq!(got.len(), expected.len(), "byte count");
        assert!(got == expected, "bytes arrived out of order or changed");
    }

    /// A gathered write sends the bytes a buffer's `stable_ptr` and
    /// `bytes_init` describe, as `write_all` does (the kernel may read them
    /// after the value moved into a dropped write's slot), not those of an
    /// overridden `as_bytes`.
    fn a_gathered_write_sends_what_stable_ptr_describes(backend) {
        let (addr, peer) = reader(Duration::ZERO, 4096);
        percore::block_on(backend, async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            let view = || OwnView { heap: b"heap bytes".to_vec(), inline: *b"INLINE!!" };
            let (res, _) = stream.write_all(view()).await;
            res.expect("write_all");
            let (res, _) = stream.write_all_vectored((view(), b"|".to_vec())).await;
            res.expect("write_all_vectored");
            let (res, _) = stream.write_all_vectored([view(), view()]).await;
            res.expect("write_all_vectored");
        })
        .expect("block_on");
        assert_eq!(
            String::from_utf8_lossy(&peer.join().expect("peer")),
            "heap bytesheap bytes|heap bytesheap bytes"
        );
    }

    /// A stream returned by one `block_on` and written in the next belongs
    /// to a core that is gone: the write is refused and the buffers come
    /// back.
    fn a_stream_of_a_finished_core_refuses_a_gathered_write(backend) {
        let (addr, peer) = reader(Duration::ZERO, 4096);
        let stream = percore::block_on(backend, async move {
            TcpStream::connect(addr).await.expect("connect")
        })
        .expect("block_on");
        percore::block_on(backend, async move {
            let (res, (a, b)) = stream.write_all_vectored((b"head".to_vec(), b"body".to_vec())).await;
            let err = res.expect_err("a write from another core");
            assert!(err.to_string().contains("outside the core"), "{err}");
            assert_eq!((&a[..], &b[..]), (&b"head"[..], &b"body"[..]));
        })
        .expect("block_on");
        assert_eq!(peer.join().expect("peer"), b"", "nothing was sent");
    }

    /// 201 connections, each with a write of a header and up to 1 MiB of
    /// body dropped at a random point (mostly while the kernel holds it),
    /// then a trailer written: each peer reads a prefix of the dropped
    /// write, then the trailer. Bodies are fresh allocations, so one freed
    /// too early would be reused by the next and caught. The server ends
    /// idle, with every operation finished and no fd left open.
    fn dropped_writes_leave_a_prefix_and_no_trace(backend) {
        let before = DROPPED.load(Relaxed);
        let server = builder(backend)
            .start(|core| DropMidWrite { rng: Cell::new(core.index as u64 + 1) })
            .expect("start");
        check_backend(&server, backend);
        let addr = server.local_addr();
        // Once before the count: the server's fds are all open after it,
        // and its connection's closed once the server is idle.
        drop_one_write(addr, 1);
        let idle = |s: &Vec<StatsSnapshot>| {
            sum(s, |c| c.active) == 0 && sum(s, |c| c.in_flight) == idle_in_flight(backend)
        };
        wait_until(Duration::from_secs(60), "an idle server", || server.stats(), idle);
        let fds_before = fd_count();
        std::thread::scope(|scope| {
            for t in 0..4u64 {
                scope.spawn(move || {
                    let mut rng = Rng::new(t + 50);
                    for _ in 0..50 {
                        drop_one_write(addr, rng.next_u64() >> 1);
                    }
                });
            }
        });
        let dropped = DROPPED.load(Relaxed) - before;
        let stats = wait_until(Duration::from_secs(60), "an idle server", || server.stats(), idle);
        println!("{backend}: {dropped} of 201 writes dropped mid-send; {}", stats[0]);
        assert!(dropped >= 50, "only {dropped} writes were dropped mid-send: the test proves little");
        let fds = settle_fds(fds_before, Duration::from_secs(60));
        assert_eq!(fds, fds_before, "fd leak: {:?}", fd_table());
        server.shutdown();
        server.join().expect("join");
    }
}

/// A buffer that keeps its bytes on the heap, as [`IoBuf`]'s contract
/// asks of `stable_ptr`, but overrides `as_bytes` with bytes of its own,
/// inline: outside the contract, so a send must not take them.
///
/// [`IoBuf`]: percore::buf::IoBuf
struct OwnView {
    heap: Vec<u8>,
    inline: [u8; 8],
}

// SAFETY: `stable_ptr` and `bytes_init` describe `heap`'s bytes, which stay
// in place while the value moves; `as_bytes` is not part of the contract.
unsafe impl percore::buf::IoBuf for OwnView {
    fn stable_ptr(&self) -> *const u8 {
        self.heap.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.heap.len()
    }
    fn as_bytes(&self) -> &[u8] {
        &self.inline
    }
}

/// One connection to [`DropMidWrite`], whose write of `seed`'s message is
/// dropped (or not): the bytes before the trailer are a prefix of it.
fn drop_one_write(addr: SocketAddr, seed: u64) {
    let mut client = connect(addr);
    client
        .write_all(&seed.to_le_bytes())
        .expect("send the seed");
    // A late reader, so that the write stalls.
    std::thread::sleep(Duration::from_micros(seed % 3000));
    let mut got = Vec::new();
    client.read_to_end(&mut got).expect("read to the end");
    let (head, body) = message(seed);
    let sent = got
        .len()
        .checked_sub(TRAILER.len())
        .expect("at least the trailer");
    assert_eq!(&got[sent..], TRAILER, "the trailer ends the stream");
    let whole = [&head[..], &body[..]].concat();
    assert!(sent <= whole.len(), "more bytes than the write had");
    assert!(
        got[..sent] == whole[..sent],
        "the bytes before the trailer are not a prefix of the write"
    );
}

/// Writes dropped mid-send by [`DropMidWrite`], over the process.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// What every dropped-write connection ends with.
const TRAILER: &[u8] = b"--trailer: the write before was dropped--";

/// The header and body a connection's seed stands for: a fresh copy of a
/// window of the random pool that starts where the seed says.
fn message(seed: u64) -> (Vec<u8>, Vec<u8>) {
    let len = (64 << 10) + (seed % (1 << 20)) as usize;
    let body = pattern((seed >> 20) as usize, len).to_vec();
    (format!("BODY {len}\r\n").into_bytes(), body)
}

/// Reads an 8-byte seed, starts writing the seed's message, drops the
/// write at a random point, then writes [`TRAILER`] and closes.
struct DropMidWrite {
    rng: Cell<u64>,
}

impl Handler for DropMidWrite {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        let mut seed = Vec::new();
        while seed.len() < 8 {
            match conn.read().await? {
                Some(buf) => seed.extend_from_slice(&buf),
                None => return Err(ErrorKind::UnexpectedEof.into()),
            }
        }
        let seed = u64::from_le_bytes(seed[..8].try_into().expect("8 bytes"));
        let (head, body) = message(seed);
        // A small send buffer: the write stalls until the peer reads.
        set_buffer(conn.as_raw_fd(), libc::SO_SNDBUF, 32 << 10);
        let mut rng = Rng::new(self.rng.get());
        self.rng.set(rng.next_u64());
        let deadline = if rng.between(0, 3) == 0 {
            Deadline::random(&mut rng)
        } else {
            Deadline::Polls(rng.between(0, 20))
        };
        match deadline.race(conn.write_all_vectored((head, body))).await {
            None => {
                DROPPED.fetch_add(1, Relaxed);
            }
            Some((res, _)) => res?,
        }
        let (res, _) = conn.write_all(TRAILER).await;
        res?;
        conn.shutdown_write()
    }
}
