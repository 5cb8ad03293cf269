//! `Stream::write_behind` on real loopback sockets, on both backends: on
//! io_uring a write behind goes out whole (through partial sends to a
//! slow reader), in order with the writes after it, and gives its buffer
//! back; one at a time; a failed one reports its error; a stream dropped
//! with one out is closed without harm. epoll, and TLS, refuse it and
//! hand the buffer back, so the caller writes another way.

use std::io::Read;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::os::fd::AsRawFd;
use std::time::Duration;

use percore::net::TcpStream;
use percore::time::timeout;
use percore::Backend;
use percore_test_kit::*;

/// A peer on its own thread that accepts one connection, waits `delay`,
/// then reads it to the end; with `small`, through a 4 KiB receive
/// buffer, so that a large write goes out in many partial sends.
fn reader(delay: Duration, small: bool) -> (SocketAddr, std::thread::JoinHandle<Vec<u8>>) {
    let listener = StdListener::bind("127.0.0.1:0").expect("bind");
    if small {
        // Inherited by the accepted socket.
        set_option(listener.as_raw_fd(), libc::SO_RCVBUF, &4096i32);
    }
    let addr = listener.local_addr().expect("addr");
    let thread = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        std::thread::sleep(delay);
        let mut got = Vec::new();
        s.read_to_end(&mut got).expect("read");
        got
    });
    (addr, thread)
}

/// Sets a `SOL_SOCKET` option of a socket.
fn set_option<T>(fd: i32, option: i32, value: &T) {
    // SAFETY: a valid socket fd; the kernel reads `size_of::<T>()` bytes
    // of `value`, a live reference.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "setsockopt: {}", std::io::Error::last_os_error());
}

/// `n` bytes that differ from one offset to the next.
fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

backend_tests! {
    /// Writes behind one after the other, then a plain write: on
    /// io_uring each goes out whole, and the core keeps the buffers of
    /// those that went out for the next (`write_buf`); 8 MiB through a 4 KiB window goes out in many sends the
    /// driver continues by itself, and the write after it is refused until
    /// it is over. A write behind started after one that went out needs no
    /// wait. On epoll each is refused with its buffer, which `write_all`
    /// then sends. The peer reads every byte, in order.
    fn writes_behind_go_out_whole_and_in_order(backend) {
        let (addr, peer) = reader(Duration::from_millis(50), true);
        let expected = percore::block_on(backend, async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            let mut expected = Vec::new();
            let (mut taken, mut refused) = (0, 0);
            for (seed, len) in [(1, 100), (2, 8 << 20), (3, 5000), (4, 70), (5, 1)] {
                let mut buf = pattern(seed, len);
                expected.extend_from_slice(&buf);
                loop {
                    match stream.write_behind(buf) {
                        Ok(()) => {
                            assert_eq!(backend, Backend::Uring, "epoll took a write behind");
                            assert!(stream.writing_behind());
                            taken += 1;
                            break;
                        }
                        Err(back) if backend == Backend::Uring => {
                            // The one before is under way: its end first.
                            refused += 1;
                            let spare = timeout(IO_TIMEOUT, stream.written_behind())
                                .await
                                .expect("in time")
                                .expect("sent")
                                .expect("one was out");
                            assert!(spare.is_empty(), "an emptied buffer");
                            assert!(!stream.writing_behind());
                            buf = back;
                        }
                        Err(back) => {
                            let (res, _) = stream.write_all(back).await;
                            res.expect("write_all");
                            break;
                        }
                    }
                }
                // Time for a small one to go out before the next, which then
                // starts without a wait (not that a slow one would fail).
                percore::time::sleep(Duration::from_millis(20)).await;
            }
            if backend == Backend::Uring {
                assert_eq!(taken, 5);
                // Each refusal waited for the one before it (the 8 MiB one,
                // surely; any other one that was slow).
                assert!(refused < taken, "refused {refused} times");
                let end = timeout(IO_TIMEOUT, stream.written_behind()).await.expect("in time");
                // The core kept the last one's buffer, on top of its spares.
                let kept = end.expect("sent").expect("one was out");
                assert!(kept.is_empty() && kept.capacity() >= 1, "its buffer, emptied");
            }
            let spare = stream.write_buf();
            assert!(spare.is_empty(), "an emptied buffer");
            if backend == Backend::Epoll {
                assert_eq!(spare.capacity(), 0, "a new one on epoll");
            }
            assert!(matches!(stream.written_behind().await, Ok(None)), "none out");
            let (res, _) = stream.write_all(b"end".to_vec()).await;
            res.expect("write_all");
            expected.extend_from_slice(b"end");
            expected
        })
        .expect("block_on");
        let got = peer.join().expect("peer");
        assert_eq!(got.len(), expected.len(), "byte count");
        assert!(got == expected, "bytes arrived out of order or changed");
    }

    /// While one write behind is out a second is refused, with its
    /// buffer, and so is an empty one; `take_written_behind` collects the
    /// first once it has ended, without waiting.
    fn one_write_behind_at_a_time(backend) {
        let (addr, peer) = reader(Duration::ZERO, false);
        percore::block_on(backend, async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            assert_eq!(stream.write_behind(Vec::new()), Err(Vec::new()));
            if stream.write_behind(b"first".to_vec()).is_err() {
                assert_eq!(backend, Backend::Epoll);
                assert!(stream.take_written_behind().is_none());
                return;
            }
            assert_eq!(stream.write_behind(b"second".to_vec()), Err(b"second".to_vec()));
            let back = loop {
                if let Some(done) = stream.take_written_behind() {
                    break done.expect("sent");
                }
                percore::time::sleep(Duration::from_millis(1)).await;
            };
            assert!(back.is_empty(), "an emptied buffer");
            assert!(stream.take_written_behind().is_none(), "collected once");
            stream.write_behind(b"-second".to_vec()).expect("the next one");
            timeout(IO_TIMEOUT, stream.written_behind())
                .await
                .expect("in time")
                .expect("sent");
        })
        .expect("block_on");
        let got = peer.join().expect("peer");
        assert!(got.is_empty() || got == b"first-second", "{got:?}");
    }

    /// A write behind to a peer that reset the connection fails, and its
    /// collector gets the error; a stream dropped with a large write
    /// behind out (the peer reads nothing) is closed, and the core stops.
    fn a_failed_or_dropped_write_behind(backend) {
        let listener = StdListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let resets = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            // Reset once the client is surely connected: after its byte.
            s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
            s.read_exact(&mut [0; 1]).expect("the client's byte");
            let reset = libc::linger { l_onoff: 1, l_linger: 0 };
            set_option(s.as_raw_fd(), libc::SO_LINGER, &reset);
            drop(s);
            let (_held, _) = listener.accept().expect("accept");
            std::thread::sleep(Duration::from_millis(200));
        });
        percore::block_on(backend, async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            let (res, _) = stream.write_all(b"x".to_vec()).await;
            res.expect("the first byte");
            // The reset arrives: the next send fails.
            let read = timeout(IO_TIMEOUT, stream.read()).await.expect("in time");
            assert!(read.is_err() || matches!(read, Ok(None)), "the reset is seen");
            if stream.write_behind(b"late".to_vec()).is_ok() {
                let end = timeout(IO_TIMEOUT, stream.written_behind()).await.expect("in time");
                let err = end.expect_err("a send after the reset");
                assert!(
                    matches!(
                        err.kind(),
                        std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                    ),
                    "{err}"
                );
            }
            let held = TcpStream::connect(addr).await.expect("connect");
            if held.write_behind(vec![7; 16 << 20]).is_ok() {
                assert!(held.writing_behind());
            }
            drop(held);
        })
        .expect("block_on");
        resets.join().expect("peer");
    }
}
