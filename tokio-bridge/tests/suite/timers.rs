//! tokio's timers and sockets inside percore handlers: they work, they do
//! not block the core, and a tokio future dropped mid-flight (by its
//! handler, or by the server's stop) releases what it held.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use percore::future::{select, Either};
use percore::{Connection, Handler};
use percore_test_kit::{builder, check_backend, connect, fd_count, fd_table, settle_fds};
use percore_tokio::CompatExt;
use tokio::io::AsyncReadExt;

/// A hang detector, not a speed limit.
const HANG: Duration = Duration::from_secs(60);

/// Counts its drops: proves a tokio future was dropped, not leaked.
struct Guard(Arc<AtomicUsize>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Answers one command byte:
/// - `T`: tokio's sleep, timeout (elapsed and not), interval and
///   `tokio::spawn`; answers what each did.
/// - `S`: a long tokio sleep, until the client closes (the handler then
///   drops the sleep mid-flight).
/// - `R`: a task that reads a tokio socket to `peer`, which never sends;
///   answers `armed` and returns (the task runs on until the stop).
struct Cmd {
    peer: SocketAddr,
    drops: Arc<AtomicUsize>,
}

impl Handler for Cmd {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        let Some(cmd) = conn.read().await? else {
            return Ok(());
        };
        let answer: &'static [u8] = match cmd.first() {
            Some(b'T') => timers().compat().await,
            Some(b'S') => {
                let guard = Guard(self.drops.clone());
                let long = async move {
                    let _guard = guard;
                    tokio::time::sleep(HANG * 10).await;
                }
                .compat();
                match select(long, conn.read()).await {
                    Either::Left(()) => b"slept",
                    Either::Right(_) => return Ok(()),
                }
            }
            Some(b'R') => {
                let guard = Guard(self.drops.clone());
                let peer = self.peer;
                let stream = tokio::net::TcpStream::connect(peer).compat().await?;
                percore_tokio::spawn_local(async move {
                    let _guard = guard;
                    let mut stream = stream;
                    let mut byte = [0; 1];
                    let _ = stream.read(&mut byte).await;
                    unreachable!("the peer sends only after the stop");
                });
                b"armed"
            }
            _ => b"?",
        };
        let (res, _) = conn.write_all(answer).await;
        res?;
        conn.shutdown_write()
    }
}

async fn timers() -> &'static [u8] {
    let start = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_millis(20)).await;
    if start.elapsed() < Duration::from_millis(20) {
        return b"sleep woke early";
    }
    let pending = tokio::time::timeout(Duration::from_millis(10), std::future::pending::<()>());
    if pending.await.is_ok() {
        return b"timeout did not elapse";
    }
    if tokio::time::timeout(HANG, async { 7 }).await != Ok(7) {
        return b"timeout lost the value";
    }
    let mut ticks = tokio::time::interval(Duration::from_millis(5));
    for _ in 0..3 {
        ticks.tick().await;
    }
    // tokio::spawn runs on the runtime's thread, off the core.
    let elsewhere = tokio::spawn(async { std::thread::current().name().map(str::to_owned) });
    if elsewhere.await.ok().flatten().as_deref() != Some(percore_tokio::THREAD_NAME) {
        return b"tokio::spawn ran elsewhere";
    }
    b"timers ok"
}

fn ask(addr: SocketAddr, cmd: &[u8]) -> Vec<u8> {
    let mut c = connect(addr);
    c.write_all(cmd).expect("send");
    let mut answer = Vec::new();
    c.read_to_end(&mut answer).expect("answer");
    answer
}

percore_test_kit::backend_tests! {
    /// A long tokio sleep in one connection blocks neither the core nor
    /// the timers of another; dropped by its handler, it is released.
    fn timers_in_handlers(backend) {
        let peer = TcpListener::bind("127.0.0.1:0").expect("bind");
        let drops = Arc::new(AtomicUsize::new(0));
        let (p, d) = (peer.local_addr().expect("addr"), drops.clone());
        let server = builder(backend)
            .start(move |_core| Cmd { peer: p, drops: d.clone() })
            .expect("server starts");
        check_backend(&server, backend);
        let addr = server.local_addr();

        // 1. A connection waits on a long tokio sleep.
        let mut sleeper = connect(addr);
        sleeper.write_all(b"S").expect("send");

        // 2. Others are served meanwhile, their timers fire.
        for _ in 0..3 {
            assert_eq!(ask(addr, b"T"), b"timers ok");
        }
        assert_eq!(drops.load(Ordering::SeqCst), 0, "the sleep ended early");

        // 3. The client leaves: its handler drops the sleep mid-flight.
        drop(sleeper);
        percore_test_kit::wait_until(
            HANG,
            "the sleep dropped",
            || drops.load(Ordering::SeqCst),
            |&n| n == 1,
        );
        server.shutdown();
        server.join().expect("server stops cleanly");
    }

    /// A task awaiting a tokio socket when the server stops is dropped
    /// with the core: its socket closes and its registration goes, so the
    /// readiness that comes later wakes nothing; the runtime serves the
    /// next server.
    fn stop_drops_tokio_futures(backend) {
        percore_tokio::handle(); // its thread and fds belong to the baseline
        let baseline = fd_count();
        let peer = TcpListener::bind("127.0.0.1:0").expect("bind");
        let drops = Arc::new(AtomicUsize::new(0));
        let (p, d) = (peer.local_addr().expect("addr"), drops.clone());
        let server = builder(backend)
            .start(move |_core| Cmd { peer: p, drops: d.clone() })
            .expect("server starts");
        let addr = server.local_addr();

        // 1. Two tasks wait on tokio sockets.
        assert_eq!(ask(addr, b"R"), b"armed");
        assert_eq!(ask(addr, b"R"), b"armed");
        let mut ends: Vec<_> = (0..2).map(|_| peer.accept().expect("accept").0).collect();

        // 2. The stop drops both, and with them their sockets.
        server.shutdown();
        server.join().expect("server stops cleanly");
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        for end in &mut ends {
            end.set_read_timeout(Some(HANG)).expect("timeout");
            let mut buf = [0; 1];
            assert_eq!(end.read(&mut buf).expect("end of stream"), 0);
            // Readiness for a registration that is gone.
            let _ = end.write_all(b"late");
        }
        drop(ends);
        drop(peer);
        // At most the baseline: an fd another test of the process still
        // held when the baseline was counted may have closed since.
        let left = settle_fds(baseline, HANG);
        assert!(left <= baseline, "{left} fds, {baseline} before: {:?}", fd_table());

        // 3. The runtime still serves another server's timers.
        let (p, d) = (addr, drops.clone());
        let server = builder(backend)
            .start(move |_core| Cmd { peer: p, drops: d.clone() })
            .expect("server starts");
        assert_eq!(ask(server.local_addr(), b"T"), b"timers ok");
        server.shutdown();
        server.join().expect("server stops cleanly");
    }
}
