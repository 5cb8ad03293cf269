//! The runtime as a client uses it, through `percore::block_on` on the
//! test thread, on both backends: timers never fire early and `timeout`
//! gives up on time; a read dropped by a timeout loses nothing; `connect`
//! reports refusals, and one dropped mid-flight leaves no socket behind;
//! `shutdown_write` gives the peer its end of stream; data and a hang-up
//! that arrive together are both read; `write_all` resumes after partial
//! sends and completes an empty write at once; a bulk stream read in
//! bursts arrives in order, and a close after it is seen; `block_on`
//! returns even when its future finishes without any I/O; a linger
//! shorter than a second, or the longest there is, is not a reset.

use std::future::Future;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener as StdListener};
use std::time::{Duration, Instant};

use percore::net::TcpStream;
use percore::time::{sleep, timeout};
use percore_test_kit::*;

/// A std echo server on its own thread, serving `conns` connections.
fn std_echo(conns: usize) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let listener = StdListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let thread = std::thread::spawn(move || {
        for _ in 0..conns {
            let (mut s, _) = listener.accept().expect("accept");
            s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
            let mut buf = [0u8; 4096];
            loop {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if s.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                }
            }
        }
    });
    (addr, thread)
}

/// The socket's `SO_LINGER` as the kernel holds it.
fn linger_of(stream: &TcpStream) -> libc::linger {
    use std::os::fd::AsRawFd;
    let mut value = libc::linger {
        l_onoff: 0,
        l_linger: 0,
    };
    let mut len = std::mem::size_of::<libc::linger>() as libc::socklen_t;
    // SAFETY: a valid socket fd, and `value` and `len` describe a writable
    // `linger` of the size given.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&mut value as *mut libc::linger).cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "SO_LINGER: {}", std::io::Error::last_os_error());
    value
}

/// Reads from a percore stream until `want` bytes came.
async fn read_exactly(stream: &TcpStream, want: usize) -> std::io::Result<Vec<u8>> {
    let mut got = Vec::new();
    while got.len() < want {
        match timeout(IO_TIMEOUT, stream.read()).await? {
            Ok(Some(buf)) => got.extend_from_slice(&buf),
            Ok(None) => return Err(ErrorKind::UnexpectedEof.into()),
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

backend_tests! {
    /// `block_on` returns a value computed without any I/O or timer, and
    /// runs the current core on the requested backend.
    fn block_on_returns(backend) {
        let got = percore::block_on(backend, async { (percore::current_backend(), 40 + 2) }).expect("block_on");
        assert_eq!(got, (backend, 42));
    }

    /// A core's ring is freed when `block_on` returns, not when the thread
    /// exits: on io_uring its registered write pool (1 MiB, pinned) is
    /// unpinned again, so cores made one after another on one thread do
    /// not add up.
    fn block_on_frees_its_ring(backend) {
        let pinned_kib = || {
            let status = std::fs::read_to_string("/proc/self/status").expect("status");
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmPin:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .expect("VmPin")
        };
        let before = pinned_kib();
        for _ in 0..12 {
            percore::block_on(backend, async {}).expect("block_on");
        }
        // The kernel frees a closed ring in the background.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut after = pinned_kib();
        while after > before + 2048 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            after = pinned_kib();
        }
        assert!(after <= before + 2048, "{before} kB pinned before, {after} kB after 12 cores");
    }

    /// A write whose future was polled once and then leaked, its stream
    /// dropped at once: the socket stays open until the queued send has
    /// gone to the kernel, so the send reaches its own socket (and no
    /// other that could take the number meanwhile). The peer gets its
    /// bytes, then the end of the stream.
    fn a_leaked_write_reaches_its_own_socket(backend) {
        let listener = StdListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let peer = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
            let mut got = Vec::new();
            s.read_to_end(&mut got).expect("read to the end");
            got
        });
        let started = Instant::now();
        percore::block_on(backend, async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            let mut write = stream.write_all(&b"leaked"[..]);
            // Polled once: the send is queued (on io_uring, not submitted
            // before this task yields). Then leaked, and the stream dropped.
            std::future::poll_fn(|cx| {
                let _ = std::pin::Pin::new(&mut write).poll(cx);
                std::task::Poll::Ready(())
            })
            .await;
            std::mem::forget(write);
            drop(stream);
            sleep(Duration::from_millis(20)).await;
        })
        .expect("block_on");
        // Its completion came: the core's stop does not wait for another,
        // which would never come (a minute is the hang guard).
        assert!(started.elapsed() < Duration::from_secs(60), "the stop took {:?}", started.elapsed());
        let got = peer.join().expect("peer");
        assert_eq!(got, b"leaked", "the leaked send never reached its socket");
    }

    /// A stream returned by one `block_on` and used in the next, on the
    /// same thread, belongs to a core that is gone: its reads fail, and it
    /// takes nothing of the new core's connections (it used to read their
    /// bytes, its stale operation key naming theirs).
    fn a_stream_from_a_finished_core_reads_nothing_of_another(backend) {
        let listener = StdListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let peer = std::thread::spawn(move || {
            let (mut a, _) = listener.accept().expect("accept");
            let (mut b, _) = listener.accept().expect("accept");
            wait.recv().expect("go");
            b.write_all(b"for b only").expect("write");
            let mut rest = Vec::new();
            let _ = b.read_to_end(&mut rest);
            let _ = a.read_to_end(&mut rest);
        });
        let a = percore::block_on(backend, async move {
            let a = TcpStream::connect(addr).await.expect("connect");
            // A receive armed, then the read dropped.
            let _ = timeout(Duration::from_millis(1), a.read()).await;
            a
        })
        .expect("block_on");
        percore::block_on(backend, async move {
            let b = TcpStream::connect(addr).await.expect("connect");
            let _ = timeout(Duration::from_millis(1), b.read()).await;
            go.send(()).expect("go");
            sleep(Duration::from_millis(20)).await;
            let stray = timeout(Duration::from_millis(100), a.read()).await;
            assert!(matches!(stray, Ok(Err(_))), "{:?}", stray.map(|r| r.map(|b| b.map(|b| b.to_vec()))));
            drop(a);
            let mine = timeout(IO_TIMEOUT, b.read()).await.expect("in time").expect("read").expect("bytes");
            assert_eq!(&mine[..], b"for b only");
        })
        .expect("block_on");
        peer.join().expect("peer");
    }

    /// A sleep armed by one `block_on` and dropped in the next, on the same
    /// thread, leaves the new core's timers alone (its key there named a
    /// timer of another task, which then never fired).
    fn a_sleep_from_a_finished_core_leaves_the_new_cores_timers_alone(backend) {
        // The armed sleep is the output itself, not to be awaited there.
        #[allow(clippy::async_yields_async)]
        let armed = percore::block_on(backend, async {
            let mut armed = Box::pin(sleep(Duration::from_secs(10)));
            std::future::poll_fn(|cx| {
                assert!(armed.as_mut().poll(cx).is_pending());
                std::task::Poll::Ready(())
            })
            .await;
            armed
        })
        .expect("block_on");
        let woke = percore::block_on(backend, async move {
            let sleeper = percore::spawn_local(async {
                sleep(Duration::from_millis(20)).await;
            });
            // Let the sleeper arm its timer (the first of this core).
            let mut yielded = false;
            std::future::poll_fn(|cx| {
                if std::mem::replace(&mut yielded, true) {
                    std::task::Poll::Ready(())
                } else {
                    cx.waker().wake_by_ref();
                    std::task::Poll::Pending
                }
            })
            .await;
            drop(armed);
            timeout(Duration::from_secs(60), sleeper).await
        })
        .expect("block_on");
        assert!(matches!(woke, Ok(Ok(()))), "the other task's timer was disarmed: {woke:?}");
    }

    /// Sleeps never end early; timeouts fire, not before their deadline.
    /// (How late they fire depends on the machine's load: not judged.)
    fn timers_are_never_early(backend) {
        percore::block_on(backend, async {
            for ms in [0u64, 1, 2, 5, 13, 40] {
                let d = Duration::from_millis(ms);
                let started = Instant::now();
                sleep(d).await;
                let took = started.elapsed();
                assert!(took >= d, "sleep({d:?}) returned after {took:?}");
            }
            let started = Instant::now();
            let never = std::future::pending::<()>();
            assert!(timeout(Duration::from_millis(20), never).await.is_err());
            assert!(started.elapsed() >= Duration::from_millis(20));
            // A thousand timers armed at once all fire, none early.
            let base = Instant::now();
            let mut handles = Vec::new();
            for i in (0..1000u64).rev() {
                handles.push(percore::spawn_local(async move {
                    let d = Duration::from_millis(i % 50);
                    sleep(d).await;
                    (d, base.elapsed())
                }));
            }
            for h in handles {
                let (d, at) = h.await.expect("timer task");
                assert!(at >= d, "a {d:?} timer fired after {at:?}");
            }
        })
        .expect("block_on");
    }

    /// A sleep that fired and was reset to a later deadline wakes its task
    /// again at the new one, polled by the same task with the same waker
    /// (how a connection's one timer follows its moving deadlines).
    fn a_fired_sleep_reset_later_wakes_again(backend) {
        percore::block_on(backend, async {
            let started = Instant::now();
            let mut sleep = std::pin::pin!(percore::time::sleep(Duration::from_millis(20)));
            let second = started + Duration::from_millis(120);
            let mut fired_once = false;
            let woke = timeout(Duration::from_secs(60), std::future::poll_fn(|cx| {
                if sleep.as_mut().poll(cx).is_pending() {
                    return std::task::Poll::Pending;
                }
                if fired_once {
                    return std::task::Poll::Ready(());
                }
                fired_once = true;
                sleep.as_mut().reset(second);
                // Pending now; only the timer can wake this task again.
                assert!(sleep.as_mut().poll(cx).is_pending());
                std::task::Poll::Pending
            }))
            .await;
            assert!(woke.is_ok(), "the reset sleep never woke its task");
            let took = started.elapsed();
            assert!(took >= Duration::from_millis(120), "woke after {took:?}");
            // Not by the 60 s guard's own wake-up, which polls it too.
            assert!(took < Duration::from_secs(60), "woke only after {took:?}");
        })
        .expect("block_on");
    }

    /// With the task's I/O budget spent, a read polled once says `Pending`
    /// without looking; inside `percore::unconstrained` it sees the bytes
    /// that are there (and the budget is back to spent afterwards).
    fn unconstrained_polls_past_a_spent_budget(backend) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let (wrote, written) = std::sync::mpsc::channel::<()>();
        let peer = std::thread::spawn(move || {
            let mut conns: Vec<_> = (0..2).map(|_| listener.accept().expect("accept").0).collect();
            conns[0].write_all(b"a").expect("write");
            wait.recv().expect("go");
            conns[0].write_all(b"b").expect("write");
            wrote.send(()).expect("wrote");
            // Held open until the test is done with both.
            let _ = wait.recv();
        });
        percore::block_on(backend, async move {
            let busy = TcpStream::connect(addr).await.expect("connect");
            let idle = TcpStream::connect(addr).await.expect("connect");
            assert_eq!(&read_exactly(&busy, 1).await.expect("read")[..], b"a");
            go.send(()).expect("go");
            // The "b" is in the socket (loopback: written is delivered);
            // a loop turn takes its completion in.
            written.recv_timeout(IO_TIMEOUT).expect("the peer wrote");
            sleep(Duration::from_millis(20)).await;
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            for _ in 0..200 {
                let _ = std::pin::pin!(idle.read()).as_mut().poll(&mut cx);
            }
            let mut read = std::pin::pin!(busy.read());
            assert!(read.as_mut().poll(&mut cx).is_pending(), "the budget was not spent");
            let got = percore::unconstrained(|| read.as_mut().poll(&mut cx));
            match got {
                std::task::Poll::Ready(Ok(Some(buf))) => assert_eq!(&buf[..], b"b"),
                other => panic!("unconstrained read: {other:?}"),
            }
            let mut again = std::pin::pin!(busy.read());
            assert!(again.as_mut().poll(&mut cx).is_pending(), "the budget came back unspent");
            drop(go);
        })
        .expect("block_on");
        peer.join().expect("peer");
    }

    /// A read dropped by a timeout loses nothing: the bytes that arrive
    /// afterwards are read whole and in order by the next read.
    fn timed_out_read_loses_nothing(backend) {
        let (addr, server) = std_echo(1);
        percore::block_on(backend, async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            for round in 0..50u8 {
                // Nothing to read yet: the read times out (and is dropped).
                assert!(timeout(Duration::from_millis(1), stream.read()).await.is_err());
                let msg = vec![round; 1000 + round as usize];
                let (res, _) = stream.write_all(msg.clone()).await;
                res.expect("write");
                let got = read_exactly(&stream, msg.len()).await.expect("read");
                assert_eq!(got, msg, "round {round}");
            }
        })
        .expect("block_on");
        server.join().expect("echo thread");
    }

    /// `connect` reports a refused port; `shutdown_write` gives the peer
    /// its end of stream after every byte sent.
    fn connect_refused_and_half_close(backend) {
        let closed = {
            let l = StdListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr")
        };
        let (addr, server) = std_echo(1);
        percore::block_on(backend, async move {
            let err = TcpStream::connect(closed).await.expect_err("connect to a closed port");
            assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");
            let stream = TcpStream::connect(addr).await.expect("connect");
            let msg = pattern(3, 100_000).to_vec();
            let (res, _) = stream.write_all(msg.clone()).await;
            res.expect("write");
            stream.shutdown_write().expect("shutdown_write");
            let got = read_exactly(&stream, msg.len()).await.expect("read");
            assert!(got == msg);
            assert!(matches!(timeout(IO_TIMEOUT, stream.read()).await, Ok(Ok(None))), "no end of stream");
        })
        .expect("block_on");
        server.join().expect("echo thread");
    }

    /// A linger of less than a second is a linger of one (the kernel counts
    /// seconds), not zero, which would make the close a reset: the peer
    /// reads what was sent, then the end of stream.
    fn a_short_linger_is_not_a_reset(backend) {
        let listener = StdListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let linger = percore::block_on(backend, async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            stream.set_linger(Some(Duration::from_millis(500))).expect("set_linger");
            let (res, _) = stream.write_all(&b"bye"[..]).await;
            res.expect("write");
            let linger = linger_of(&stream);
            stream.close();
            linger
        })
        .expect("block_on");
        assert_eq!((linger.l_onoff, linger.l_linger), (1, 1));
        let (mut peer, _) = listener.accept().expect("accept");
        peer.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        assert_eq!(read_to_end(&mut peer).expect("the bytes, then the end"), b"bye");
    }

    /// The longest linger there is stays a linger: rounding it up to whole
    /// seconds must not wrap it around to zero, a reset.
    fn the_longest_linger_is_not_a_reset(backend) {
        let listener = StdListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let linger = percore::block_on(backend, async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            stream.set_linger(Some(Duration::MAX)).expect("set_linger");
            linger_of(&stream)
        })
        .expect("block_on");
        // The kernel caps the time, and reads it back in its own units.
        assert_eq!(linger.l_onoff, 1);
        assert_ne!(linger.l_linger, 0, "a reset");
    }

    /// Data and the peer's end of stream that arrive together, before the
    /// first read, are both seen: a short read (which on epoll waits for the
    /// next edge without an `EAGAIN`) must not lose the hang-up already
    /// reported with the data. Then the same with a pause between them.
    fn data_with_hang_up_then_end_of_stream(backend) {
        let listener = StdListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let peer = std::thread::spawn(move || {
            for pause in [Duration::ZERO, Duration::from_millis(30)] {
                let (mut s, _) = listener.accept().expect("accept");
                s.write_all(b"last words").expect("write");
                std::thread::sleep(pause);
                s.shutdown(std::net::Shutdown::Write).expect("shutdown");
                // Hold the socket until the client is done with it.
                let mut rest = Vec::new();
                let _ = s.read_to_end(&mut rest);
            }
        });
        percore::block_on(backend, async move {
            for round in 0..2 {
                let stream = TcpStream::connect(addr).await.expect("connect");
                // Let both the bytes and the FIN land before reading.
                sleep(Duration::from_millis(50)).await;
                let got = read_exactly(&stream, 10).await.expect("read");
                assert_eq!(&got, b"last words", "round {round}");
                let end = timeout(IO_TIMEOUT, stream.read()).await;
                assert!(matches!(end, Ok(Ok(None))), "round {round}: no end of stream: {end:?}");
            }
        })
        .expect("block_on");
        peer.join().expect("peer thread");
    }

    /// A bulk stream in bursts of a megabyte with pauses between them, read
    /// by a reader that now and then falls behind, arrives complete and in
    /// order. On io_uring each burst fills whole buffers, which ends the
    /// multishot receive (its queued completions are read first) for
    /// single-shot reads into pool buffers, and each pause drains the
    /// socket, which arms the multishot again. After the stream, a read
    /// sees the peer's close.
    fn bulk_bursts_arrive_in_order_then_the_close(backend) {
        const BURST: usize = 1 << 20;
        const BURSTS: usize = 6;
        let listener = StdListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let peer = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
            for burst in 0..BURSTS {
                s.write_all(pattern(burst, BURST)).expect("write");
                std::thread::sleep(Duration::from_millis(20));
            }
            // Close only once the client has read everything.
            let mut done = [0u8; 1];
            s.read_exact(&mut done).expect("the client's signal");
        });
        percore::block_on(backend, async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            let mut got = Vec::with_capacity(BURST * BURSTS);
            let mut reads = 0u32;
            while got.len() < BURST * BURSTS {
                match timeout(IO_TIMEOUT, stream.read()).await {
                    Ok(Ok(Some(buf))) => got.extend_from_slice(&buf),
                    other => panic!("after {} bytes: {other:?}", got.len()),
                }
                reads += 1;
                if reads % 8 == 0 {
                    // Fall behind, so completions queue up meanwhile.
                    sleep(Duration::from_millis(2)).await;
                }
            }
            for burst in 0..BURSTS {
                let at = burst * BURST;
                assert!(got[at..at + BURST] == *pattern(burst, BURST), "burst {burst} differs");
            }
            let (res, _) = stream.write_all(b"d".to_vec()).await;
            res.expect("signal");
            let end = timeout(IO_TIMEOUT, stream.read()).await;
            assert!(matches!(end, Ok(Ok(None))), "the close was not seen: {end:?}");
        })
        .expect("block_on");
        peer.join().expect("peer thread");
    }

    /// One `write_all` far larger than the socket buffers, to a peer that
    /// starts reading only after the writer must have stalled: the kernel
    /// takes it in many partial sends, and every byte arrives, in order. An
    /// empty buffer completes at once and comes back.
    fn write_all_resumes_after_partial_sends(backend) {
        const LEN: usize = 24 << 20;
        let listener = StdListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let reader = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
            // Let the writer fill both socket buffers first.
            std::thread::sleep(Duration::from_millis(200));
            let mut got = Vec::with_capacity(LEN);
            s.read_to_end(&mut got).expect("read");
            got
        });
        let mut sent = vec![0u8; LEN];
        Rng::new(7).fill(&mut sent);
        let expected = sent.clone();
        percore::block_on(backend, async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            let (res, empty) = stream.write_all(Vec::new()).await;
            res.expect("empty write");
            assert!(empty.is_empty());
            let (res, back) = timeout(IO_TIMEOUT, stream.write_all(sent))
                .await
                .expect("write_all finished in time");
            res.expect("write_all");
            assert_eq!(back.len(), LEN, "the buffer comes back whole");
        })
        .expect("block_on");
        let got = reader.join().expect("reader");
        assert_eq!(got.len(), LEN);
        assert!(got == expected, "bytes arrived out of order or changed");
    }

    /// 500 connects dropped at random points of their life: every socket
    /// is closed (the fd count returns to where it was), and a connect
    /// that is let finish still works.
    fn dropped_connects_close_their_sockets(backend) {
        let fds_before = fd_count();
        let listener = StdListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        listener.set_nonblocking(true).expect("nonblocking");
        percore::block_on(backend, async move {
            let mut rng = Rng::new(11);
            let (mut won, mut dropped) = (0, 0);
            for _ in 0..500 {
                match Deadline::random(&mut rng).race(TcpStream::connect(addr)).await {
                    Some(Ok(stream)) => {
                        won += 1;
                        drop(stream);
                    }
                    Some(Err(e)) => panic!("connect: {e}"),
                    None => dropped += 1,
                }
                // Keep the backlog short.
                while listener.accept().is_ok() {}
            }
            println!("{backend}: {won} connects finished, {dropped} dropped in flight");
            assert!(dropped > 50 && won > 50, "{won} finished, {dropped} dropped");
            drop(listener);
        })
        .expect("block_on");
        let fds = settle_fds(fds_before, Duration::from_secs(60));
        assert_eq!(fds, fds_before, "fd leak: {:?}", fd_table());
    }
}
