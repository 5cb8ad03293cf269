//! A gathered write to a peer that reset fails with an error and raises no
//! `SIGPIPE`, on both backends. This test binary restores the default
//! disposition (terminate) first, as a C host embedding percore might, so
//! a `sendmsg` without `MSG_NOSIGNAL` would kill the process and fail the
//! run. Its own file: the disposition is process-wide.
//!
//! On io_uring, Linux 6.18 raised no `SIGPIPE` for an `IORING_OP_SENDMSG`
//! without the flag either (tried on 2026-12-02): there the test checks the
//! errors and the buffers, and epoll's `sendmsg` is the one it guards.

use percore_test_kit::backend_tests;

use std::io::ErrorKind;
use std::net::TcpListener as StdListener;
use std::time::Duration;

use percore::net::TcpStream;

fn default_sigpipe() {
    // SAFETY: setting a signal's disposition to SIG_DFL has no memory
    // effects; `signal` is async-signal-safe and the handler is not Rust.
    let previous = unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    assert_ne!(previous, libc::SIG_ERR, "signal(SIGPIPE, SIG_DFL)");
}

backend_tests! {
    /// The peer closes with a reset; gathered writes go on until three
    /// failed, the later ones on the closed pipe: the errors say the peer
    /// is gone, and the buffers come back.
    fn a_gathered_write_to_a_reset_peer_fails_without_sigpipe(backend) {
        default_sigpipe();
        let listener = StdListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (connected, wait) = std::sync::mpsc::channel::<()>();
        let peer = std::thread::spawn(move || {
            let (s, _) = listener.accept().expect("accept");
            // Not before the client's connect has finished, which a reset
            // would fail instead.
            wait.recv().expect("connected");
            drop(reset_on_close(s));
        });
        percore::block_on(backend, async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            connected.send(()).expect("tell the peer");
            peer.join().expect("peer");
            percore::time::sleep(Duration::from_millis(20)).await;
            // The first failure is often the reset itself; the writes after
            // it meet the closed pipe, where a send without `MSG_NOSIGNAL`
            // raises the signal.
            let mut kinds = Vec::new();
            for _ in 0..100 {
                let bufs = (b"header ".to_vec(), vec![7u8; 64 << 10]);
                let (res, (head, body)) = stream.write_all_vectored(bufs).await;
                assert_eq!((head.len(), body.len()), (7, 64 << 10), "the buffers come back");
                if let Err(e) = res {
                    kinds.push(e.kind());
                    if kinds.len() == 3 {
                        break;
                    }
                }
            }
            assert!(
                kinds.iter().all(|k| matches!(k, ErrorKind::BrokenPipe | ErrorKind::ConnectionReset)),
                "{kinds:?}"
            );
            assert!(kinds.contains(&ErrorKind::BrokenPipe), "no write met the closed pipe: {kinds:?}");
        })
        .expect("block_on");
    }
}

/// Sets `SO_LINGER` to zero seconds, so that closing `s` sends a reset.
fn reset_on_close(s: std::net::TcpStream) -> std::net::TcpStream {
    use std::os::fd::AsRawFd;
    let value = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket fd; the kernel reads one `linger` from `value`.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&value as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "SO_LINGER: {}", std::io::Error::last_os_error());
    s
}
