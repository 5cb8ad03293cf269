//! A handler written the way a crate outside the framework would write
//! one, using only the public API: per-core state in `Cell`s (no locks),
//! timers, `spawn_local` with a join handle, `FixedBuf` writes, the
//! request counter and the stop signal. A tiny line protocol:
//!
//! - `ECHO <text>` → `<text>`
//! - `COUNT` → requests this core's handler has served
//! - `SLEEP <ms>` → `slept <ms>` after at least that long
//! - `SPAWN <n>` → `spawned <n*2>`, computed by a spawned task
//! - `CORE` → `<index>/<cores> <backend>`
//! - `WAIT` → `stopping`, once the server begins its stop
//! - anything else → `error`, and the connection closes

use std::cell::Cell;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use percore::buf::FixedBuf;
use percore::{Connection, CoreContext, Handler};
use percore_test_kit::*;

struct LineService {
    core: CoreContext,
    served: Cell<u64>,
}

impl LineService {
    async fn answer(&self, line: &str) -> Option<String> {
        self.served.set(self.served.get() + 1);
        percore::count_requests(1);
        let (cmd, arg) = line.split_once(' ').unwrap_or((line, ""));
        Some(match cmd {
            "ECHO" => arg.to_owned(),
            "COUNT" => self.served.get().to_string(),
            "SLEEP" => {
                let ms: u64 = arg.parse().ok()?;
                percore::time::sleep(Duration::from_millis(ms)).await;
                format!("slept {ms}")
            }
            "SPAWN" => {
                let n: u64 = arg.parse().ok()?;
                let task = percore::spawn_local(async move { n * 2 });
                format!("spawned {}", task.await.ok()?)
            }
            "CORE" => format!(
                "{}/{} {}",
                self.core.index,
                self.core.cores,
                percore::current_backend()
            ),
            "WAIT" => {
                percore::shutdown_signal().await;
                assert!(percore::is_shutting_down());
                "stopping".to_owned()
            }
            _ => return None,
        })
    }

    async fn reply(conn: &Connection, text: &str) -> std::io::Result<()> {
        let line = format!("{text}\n");
        // Prefer a registered write buffer; fall back to the String.
        if let Some(mut fixed) = FixedBuf::take() {
            if fixed.extend_from_slice(line.as_bytes()) == line.len() {
                let (res, _) = conn.write_all(fixed).await;
                return res;
            }
        }
        let (res, _) = conn.write_all(line).await;
        res
    }
}

impl Handler for LineService {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        let mut pending = Vec::new();
        while let Some(buf) = conn.read().await? {
            pending.extend_from_slice(&buf);
            drop(buf);
            while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line[..end]).into_owned();
                match self.answer(&line).await {
                    Some(answer) => Self::reply(&conn, &answer).await?,
                    None => {
                        Self::reply(&conn, "error").await?;
                        return conn.shutdown_write();
                    }
                }
            }
        }
        conn.shutdown_write()
    }
}

/// Sends one command line and reads one answer line.
fn ask(reader: &mut BufReader<TcpStream>, cmd: &str) -> String {
    reader
        .get_mut()
        .write_all(format!("{cmd}\n").as_bytes())
        .expect("write");
    let mut line = String::new();
    reader.read_line(&mut line).expect("read");
    assert!(line.ends_with('\n'), "no answer to {cmd:?}: {line:?}");
    line.trim_end().to_owned()
}

backend_tests! {
    /// The protocol works end to end and per-core state is per core.
    fn downstream_handler_with_per_core_state(backend) {
        let server = builder(backend)
            .start(|core| LineService { core: core.clone(), served: Cell::new(0) })
            .expect("start");
        check_backend(&server, backend);
        let addr = server.local_addr();
        let mut a = BufReader::new(connect(addr));
        let mut b = BufReader::new(connect(addr));
        assert_eq!(ask(&mut a, "ECHO hello world"), "hello world");
        assert_eq!(ask(&mut a, "COUNT"), "2");
        // Same core, same handler: the count is shared across connections.
        assert_eq!(ask(&mut b, "COUNT"), "3");
        let started = Instant::now();
        assert_eq!(ask(&mut b, "SLEEP 30"), "slept 30");
        assert!(started.elapsed() >= Duration::from_millis(30), "slept only {:?}", started.elapsed());
        assert_eq!(ask(&mut a, "SPAWN 21"), "spawned 42");
        assert_eq!(ask(&mut a, "CORE"), format!("0/1 {backend}"));
        // Pipelined: three commands in one write, answers in order.
        a.get_mut().write_all(b"ECHO one\nECHO two\nECHO three\n").expect("write");
        for want in ["one", "two", "three"] {
            let mut line = String::new();
            a.read_line(&mut line).expect("read");
            assert_eq!(line.trim_end(), want);
        }
        assert_eq!(ask(&mut b, "NONSENSE"), "error");
        let mut rest = String::new();
        assert_eq!(b.read_line(&mut rest).expect("read"), 0, "closed after an error");
        // A connection waiting for the stop is answered when it begins.
        let mut waiting = connect(addr);
        waiting.write_all(b"WAIT\n").expect("write");
        assert_eq!(ask(&mut a, "ECHO still here"), "still here");
        // 12 requests so far, WAIT included once the core has read it.
        wait_until(Duration::from_secs(60), "12 requests counted", || server.stats(), |s| sum(s, |c| c.requests) == 12);
        drop(a);
        server.shutdown();
        let mut line = String::new();
        BufReader::new(&mut waiting).read_line(&mut line).expect("read");
        assert_eq!(line, "stopping\n");
        drop(waiting);
        server.join().expect("join");
    }

    /// A task the factory spawns is the core's own background work (an
    /// expiry sweep, a cache refresh): it runs while the core serves, and
    /// one that never ends does not hold the stop.
    fn factory_spawns_a_background_task(backend) {
        let ticks = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = ticks.clone();
        // A stop that waited for the never-ending task would take the whole
        // drain: two minutes, which nothing else makes the stop take.
        const DRAIN: Duration = Duration::from_secs(120);
        let server = builder(backend)
            .drain_timeout(DRAIN)
            .start(move |core| {
                let counted = counted.clone();
                percore::spawn_local(async move {
                    loop {
                        percore::time::sleep(Duration::from_millis(5)).await;
                        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                });
                LineService { core: core.clone(), served: Cell::new(0) }
            })
            .expect("start");
        check_backend(&server, backend);
        wait_until(
            Duration::from_secs(60),
            "the background task to tick",
            || ticks.load(std::sync::atomic::Ordering::Relaxed),
            |&n| n >= 3,
        );
        let stopping = Instant::now();
        server.shutdown();
        server.join().expect("join");
        assert!(stopping.elapsed() < DRAIN, "the stop took {:?}: it waited for the task", stopping.elapsed());
    }
}
