//! Unix domain sockets on both backends: the echo integrity suite over a
//! socket file, stale and live socket files, abstract names, the file's
//! mode and its removal after a stop and after a take-over, peer
//! credentials, a server with a TCP and a Unix listener at once, and
//! `UnixStream` as a client inside a core.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener as StdUnixListener, UnixStream as StdUnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use percore::net::{Endpoint, UnixAddr, UnixStream};
use percore::{core_index, submit_to, Connection, Handler};
use percore_test_kit::*;

/// A fresh path for a socket file (in a directory of its own).
fn socket_path(name: &str, backend: Backend) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "percore-unix-{}-{backend}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("socket directory");
    dir.join("s.sock")
}

/// A one-core test server listening on `path` only.
fn unix_builder(backend: Backend, path: &Path) -> ServerBuilder {
    builder(backend).listen(UnixAddr::path(path))
}

/// Writes one line naming itself, then closes.
struct Says(&'static str);

impl Handler for Says {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        conn.write_all(format!("{}\n", self.0).into_bytes()).await.0
    }
}

/// What a fresh connection to a [`Says`] server reads.
fn said(target: &Target) -> String {
    let mut sock = target.connect().expect("connect");
    let mut out = String::new();
    sock.read_to_string(&mut out).expect("read");
    out
}

/// Writes the peer's pid and uid, and the core index another core's
/// `submit_to` reports.
struct Credentials;

impl Handler for Credentials {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        let cred = conn.peer_cred()?;
        let core = submit_to(0, || async { core_index() })
            .await
            .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        let line = format!("{} {} {core}\n", cred.pid, cred.uid);
        conn.write_all(line.into_bytes()).await.0
    }
}

backend_tests! {
    /// 64 connections each send 256 KiB of random bytes in random-sized
    /// writes while reading, over a socket file; every byte comes back,
    /// in order, and the file is gone after the stop.
    fn echo_streams_over_a_socket_file(backend) {
        let path = socket_path("streams", backend);
        let server = unix_builder(backend, &path).start(|_core| PlainEcho).expect("start");
        check_backend(&server, backend);
        assert!(std::fs::symlink_metadata(&path).expect("socket file").file_type().is_socket());
        let streams = Streams {
            conns: 64,
            bytes: 256 * 1024,
            max_write: 16 * 1024,
            threads: 4,
            half_close: true,
            limit: Duration::from_secs(90),
            first_id: 0,
        };
        streams.run(path.clone()).unwrap_or_else(|e| panic!("{e}"));
        let stats = wait_until(Duration::from_secs(60), "all connections closed", || server.stats(), |s| {
            sum(s, |c| c.active) == 0
        });
        let total = 64u64 * 256 * 1024;
        assert_eq!(sum(&stats, |c| c.accepted), 64);
        assert_eq!(sum(&stats, |c| c.bytes_in), total);
        assert_eq!(sum(&stats, |c| c.bytes_out), total);
        assert_eq!(sum(&stats, |c| c.errors_io), 0);
        let listeners = server.listeners();
        assert_eq!(listeners.len(), 1);
        assert_eq!(listeners[0].addr, Endpoint::Unix(UnixAddr::path(&path)));
        assert_eq!((listeners[0].accepted, listeners[0].active), (64, 0));
        server.shutdown();
        server.join().expect("join");
        assert!(!path.exists(), "the socket file outlived its server");
    }

    /// Clients that send and close at once without reading what comes
    /// back cost the server nothing it keeps: every connection ends, and
    /// the next client is served.
    fn clients_that_leave_at_once(backend) {
        let path = socket_path("leave", backend);
        let server = unix_builder(backend, &path).start(|_core| PlainEcho).expect("start");
        let target = Target::Unix(path.clone());
        for i in 0..50 {
            let mut sock = target.connect().expect("connect");
            sock.write_all(pattern(i, 64 * 1024)).expect("write");
            drop(sock);
        }
        wait_until(Duration::from_secs(60), "every connection ended", || server.stats(), |s| {
            sum(s, |c| c.accepted) == 50 && sum(s, |c| c.active) == 0
        });
        let mut sock = target.connect().expect("connect");
        sock.write_all(b"still there?").expect("write");
        let mut back = [0u8; 12];
        sock.read_exact(&mut back).expect("echo");
        assert_eq!(&back, b"still there?");
        server.shutdown();
        server.join().expect("join");
    }

    /// Clients that send and never read: the server stops reading them
    /// (their writes stall well short of 256 MiB), keeps serving others,
    /// and gives every buffer back once they go.
    fn clients_that_never_read_are_bounded(backend) {
        const CAP: usize = 256 << 20;
        let path = socket_path("silent", backend);
        let server = unix_builder(backend, &path).start(|_core| PlainEcho).expect("start");
        let target = Target::Unix(path.clone());
        let chunk = pattern(3, 64 * 1024);
        let mut silent = Vec::new();
        for _ in 0..8 {
            let sock = target.connect().expect("connect");
            sock.set_nonblocking(true).expect("nonblocking");
            silent.push((sock, 0usize));
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        let mut quiet_since = std::time::Instant::now();
        while quiet_since.elapsed() < Duration::from_millis(300) {
            for (sock, written) in &mut silent {
                loop {
                    match sock.write(chunk) {
                        Ok(n) => {
                            *written += n;
                            quiet_since = std::time::Instant::now();
                            assert!(*written < CAP, "the server took {} MiB from a client that never reads", *written >> 20);
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) => panic!("write: {e}"),
                    }
                }
            }
            assert!(std::time::Instant::now() < deadline, "the silent clients never stalled");
            std::thread::sleep(Duration::from_millis(1));
        }
        let pushed: Vec<usize> = silent.iter().map(|(_, w)| w >> 10).collect();
        println!("{backend}: 8 silent Unix clients stalled after {pushed:?} KiB");
        let mut other = target.connect().expect("connect");
        other.write_all(b"served").expect("write");
        let mut back = [0u8; 6];
        other.read_exact(&mut back).expect("echo");
        assert_eq!(&back, b"served");
        drop(other);
        drop(silent);
        wait_until(Duration::from_secs(60), "every connection closed, every buffer back", || server.stats(), |s| {
            sum(s, |c| c.active) == 0 && sum(s, |c| c.ring_buffers_out) == 0
        });
        server.shutdown();
        server.join().expect("join");
    }

    /// A socket file no one accepts on (a server that was killed) is
    /// replaced; one a live server accepts on is refused, and so is a
    /// path that is not a socket. Neither of those is touched.
    fn stale_live_and_foreign_files(backend) {
        let path = socket_path("stale", backend);
        drop(StdUnixListener::bind(&path).expect("std bind"));
        assert!(path.exists(), "std leaves its socket file behind");
        let server = unix_builder(backend, &path).start(|_core| Says("replaced")).expect("start over a stale file");
        assert_eq!(said(&Target::Unix(path.clone())), "replaced\n");

        let refused = unix_builder(backend, &path).start(|_core| Says("second")).expect_err("a live path");
        assert_eq!(refused.kind(), ErrorKind::AddrInUse, "{refused}");
        let message = refused.to_string();
        assert!(message.contains(&path.display().to_string()) && message.contains("a server is accepting"), "{message}");
        assert_eq!(said(&Target::Unix(path.clone())), "replaced\n", "the live server lost its file");
        server.shutdown();
        server.join().expect("join");

        let file = socket_path("foreign", backend);
        std::fs::write(&file, b"not a socket").expect("write");
        let refused = unix_builder(backend, &file).start(|_core| PlainEcho).expect_err("a regular file");
        assert_eq!(refused.kind(), ErrorKind::AlreadyExists, "{refused}");
        assert_eq!(std::fs::read(&file).expect("read"), b"not a socket");
    }

    /// An abstract name has no file, and is reached by name.
    fn abstract_names(backend) {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("percore-test-{}-{backend}", std::process::id());
        let server = builder(backend)
            .listen(format!("unix:@{name}").parse::<Endpoint>().expect("parse"))
            .start(|_core| Says("abstract"))
            .expect("start");
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("name");
        let mut sock = StdUnixStream::connect_addr(&addr).expect("connect");
        sock.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        let mut out = String::new();
        sock.read_to_string(&mut out).expect("read");
        assert_eq!(out, "abstract\n");
        assert_eq!(server.listeners()[0].addr.to_string(), format!("unix:@{name}"));
        server.shutdown();
        server.join().expect("join");
        let gone = StdUnixStream::connect_addr(&addr).expect_err("the name outlived its server");
        assert_eq!(gone.kind(), ErrorKind::ConnectionRefused);
    }

    /// The socket file gets the mode asked for.
    fn the_file_mode_is_set(backend) {
        let path = socket_path("mode", backend);
        let server = unix_builder(backend, &path).unix_mode(0o600).start(|_core| PlainEcho).expect("start");
        let mode = std::fs::metadata(&path).expect("metadata").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        server.shutdown();
        server.join().expect("join");
    }

    /// A take-over moves the path to the new server at once; the old one's
    /// stop leaves the file (the new one's now), and the new one's stop
    /// removes it.
    fn take_over_keeps_the_path(backend) {
        let path = socket_path("take-over", backend);
        let target = Target::Unix(path.clone());
        let old = unix_builder(backend, &path).start(|_core| Says("old")).expect("start");
        assert_eq!(said(&target), "old\n");
        let new = unix_builder(backend, &path).take_over(true).start(|_core| Says("new")).expect("take over");
        assert_eq!(said(&target), "new\n");
        old.shutdown();
        old.join().expect("join old");
        assert!(path.exists(), "the old server removed the new one's file");
        assert_eq!(said(&target), "new\n");
        new.shutdown();
        new.join().expect("join new");
        assert!(!path.exists(), "the socket file outlived its server");
    }

    /// A server with a TCP and a Unix listener: each reaches its own
    /// handler on the same core, the Unix one sees its caller's
    /// credentials and reaches the core by `submit_to`, and each
    /// listener counts its own connections.
    fn tcp_and_unix_listeners_in_one_server(backend) {
        let path = socket_path("both", backend);
        let server = builder(backend)
            .add_listener(UnixAddr::path(&path), |_core| Credentials)
            .start(|_core| PlainEcho)
            .expect("start");
        let tcp = server.local_addr();
        for _ in 0..3 {
            ping(tcp);
        }
        for _ in 0..2 {
            let line = said(&Target::Unix(path.clone()));
            // SAFETY: getuid has no preconditions.
            let uid = unsafe { libc::getuid() };
            assert_eq!(line, format!("{} {uid} 0\n", std::process::id()));
        }
        let listeners = wait_until(Duration::from_secs(60), "both listeners idle", || server.listeners(), |l| {
            l.iter().all(|l| l.active == 0)
        });
        assert_eq!(listeners[0].addr, Endpoint::Tcp(tcp));
        assert_eq!(listeners[0].accepted, 3);
        assert_eq!(listeners[1].addr, Endpoint::Unix(UnixAddr::path(&path)));
        assert_eq!(listeners[1].accepted, 2);
        assert_eq!(sum(&server.stats(), |c| c.accepted), 5);
        server.shutdown();
        server.join().expect("join");
        assert!(!path.exists());
    }

    /// `UnixStream` as a client inside a core: a connected pair, a
    /// connection to a server's socket file, and the errors of a missing
    /// and of a stale one.
    fn unix_streams_inside_a_core(backend) {
        let path = socket_path("client", backend);
        let server = unix_builder(backend, &path).start(|_core| PlainEcho).expect("start");
        let stale = socket_path("client-stale", backend);
        drop(StdUnixListener::bind(&stale).expect("std bind"));
        let missing = stale.with_file_name("missing.sock");
        let path2 = path.clone();
        percore::block_on(backend, async move {
            let (a, b) = UnixStream::pair().expect("pair");
            a.write_all(b"pair".to_vec()).await.0.expect("write");
            assert_eq!(&b.read().await.expect("read").expect("bytes")[..], b"pair");
            assert_eq!(a.peer_cred().expect("cred").pid, std::process::id() as i32);
            assert_eq!(a.peer_addr().expect_err("no IP").kind(), ErrorKind::Unsupported);

            let conn = UnixStream::connect(&path2).await.expect("connect");
            assert!(conn.is_unix());
            conn.write_all(b"through the server".to_vec()).await.0.expect("write");
            conn.shutdown_write().expect("shutdown");
            let mut back = Vec::new();
            while let Some(buf) = conn.read().await.expect("read") {
                back.extend_from_slice(&buf);
            }
            assert_eq!(back, b"through the server");

            let e = UnixStream::connect(&missing).await.expect_err("missing");
            assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
            let e = UnixStream::connect(&stale).await.expect_err("stale");
            assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");
        })
        .expect("block_on");
        server.shutdown();
        server.join().expect("join");
    }
}
