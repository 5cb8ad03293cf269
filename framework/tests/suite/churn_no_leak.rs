//! The churn loop of the foundation issue (FAULTS D3, cancellation): on a
//! server core, race accept, connect and receive against short random
//! deadlines, drop the losers with their operations in flight, and repeat
//! 2,000 times; then count what is left. A cancelled accept or connect
//! whose completion still brings an fd must close it, a cancelled receive
//! that took a ring buffer must give it back: open fds (`/proc/self/fd`),
//! ring buffers out and operations in flight all return to where they
//! started.
//!
//! The loop runs inside a handler (a test-local one, written against the
//! public API only), so that the server's counters see it.

use std::cell::Cell;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use percore::net::{TcpListener, TcpStream};
use percore::{Connection, Handler};
use percore_test_kit::*;

const ITERATIONS: usize = 2_000;
/// The failure guard of one churn run.
const LIMIT: Duration = Duration::from_secs(60);

/// What the loop saw, so the test can check both sides of each race ran.
#[derive(Debug, Default)]
struct Tally {
    connects_won: Cell<u32>,
    connects_dropped: Cell<u32>,
    accepts_won: Cell<u32>,
    accepts_dropped: Cell<u32>,
    reads_won: Cell<u32>,
    reads_dropped: Cell<u32>,
    streams_dropped_with_data: Cell<u32>,
    resets: Cell<u32>,
}

fn bump(c: &Cell<u32>) {
    c.set(c.get() + 1);
}

async fn churn(seed: u64) -> Result<String, String> {
    let mut rng = Rng::new(seed);
    let tally = Tally::default();
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut listener = TcpListener::bind(loopback).map_err(|e| e.to_string())?;
    let started = Instant::now();
    for i in 0..ITERATIONS {
        if started.elapsed() > LIMIT {
            return Err(format!("churn ran out of time at iteration {i}"));
        }
        // Now and then, drop the listener with its accept in flight and
        // connections queued in its backlog.
        if i % 250 == 249 {
            listener = TcpListener::bind(loopback).map_err(|e| e.to_string())?;
        }
        let addr = listener.local_addr();
        // Sometimes an accept alone, which may have nothing to take yet.
        if rng.between(0, 4) == 0 {
            match Deadline::random(&mut rng).race(listener.accept()).await {
                Some(Ok(_stale)) => bump(&tally.accepts_won),
                Some(Err(e)) => return Err(format!("iteration {i}: accept failed: {e}")),
                None => bump(&tally.accepts_dropped),
            }
            continue;
        }
        let connect = Deadline::random(&mut rng).race(TcpStream::connect(addr));
        let accept = Deadline::random(&mut rng).race(listener.accept());
        let (client, server) = join2(connect, accept).await;
        let server = match server {
            Some(Ok(s)) => {
                bump(&tally.accepts_won);
                Some(s)
            }
            Some(Err(e)) => return Err(format!("iteration {i}: accept failed: {e}")),
            None => {
                bump(&tally.accepts_dropped);
                None
            }
        };
        let client = match client {
            Some(Ok(c)) => {
                bump(&tally.connects_won);
                c
            }
            Some(Err(e)) => return Err(format!("iteration {i}: connect failed: {e}")),
            None => {
                bump(&tally.connects_dropped);
                continue;
            }
        };
        // The accepted connection may be an older one from the backlog
        // (its connect was dropped after the handshake): accept on until
        // this client's own connection comes, dropping the others.
        let me = client.local_addr().map_err(|e| e.to_string())?;
        let mut server = server;
        let mut skipped = 0;
        let server = loop {
            if let Some(s) = server.take() {
                if s.peer_addr().ok() == Some(me) {
                    break s;
                }
                skipped += 1;
                if skipped > 1024 {
                    return Err(format!("iteration {i}: the accepted connection never came"));
                }
            }
            match percore::time::timeout(IO_TIMEOUT, listener.accept()).await {
                Ok(Ok(s)) => server = Some(s),
                Ok(Err(e)) => return Err(format!("iteration {i}: accept failed: {e}")),
                Err(_) => return Err(format!("iteration {i}: the accepted connection never came")),
            }
        };
        let tag = (i % 251) as u8;
        // A third of the time nothing is sent, so the read has to wait.
        let len = if rng.between(0, 2) == 0 {
            0
        } else {
            rng.between(1, 40_000)
        };
        if len > 0 {
            let (res, _) = client.write_all(vec![tag; len]).await;
            res.map_err(|e| format!("iteration {i}: write: {e}"))?;
        }
        match Deadline::random(&mut rng).race(server.read()).await {
            Some(Ok(Some(buf))) => {
                bump(&tally.reads_won);
                if buf.iter().any(|&b| b != tag) {
                    return Err(format!(
                        "iteration {i}: read bytes of another connection (buffer reuse)"
                    ));
                }
            }
            Some(Ok(None)) => {
                return Err(format!("iteration {i}: end of stream on a live connection"))
            }
            Some(Err(e)) => return Err(format!("iteration {i}: read: {e}")),
            None => bump(&tally.reads_dropped),
        }
        match rng.between(0, 3) {
            // Drop the server side with data (and ring buffers) pending.
            0 => {
                if len > 0 {
                    bump(&tally.streams_dropped_with_data);
                }
                drop(server);
                drop(client);
            }
            // Reset from the client while the server may be receiving.
            1 => {
                client
                    .set_linger(Some(Duration::ZERO))
                    .map_err(|e| e.to_string())?;
                drop(client);
                bump(&tally.resets);
                let _ = Deadline::random(&mut rng).race(server.read()).await;
                drop(server);
            }
            // A dropped read loses nothing: more bytes, a read raced and
            // dropped, then every byte still arrives, in order.
            2 => {
                let more = rng.between(1, 4096);
                let (res, _) = client.write_all(vec![tag; more]).await;
                res.map_err(|e| format!("iteration {i}: write: {e}"))?;
                let _ = Deadline::random(&mut rng).race(server.read()).await;
                drop(client);
                loop {
                    match percore::time::timeout(IO_TIMEOUT, server.read()).await {
                        Ok(Ok(Some(buf))) if buf.iter().all(|&b| b == tag) => {}
                        Ok(Ok(Some(_))) => {
                            return Err(format!("iteration {i}: read bytes of another connection"))
                        }
                        Ok(Ok(None)) => break,
                        Ok(Err(e)) => return Err(format!("iteration {i}: read: {e}")),
                        Err(_) => {
                            return Err(format!(
                                "iteration {i}: no end of stream after the peer closed"
                            ))
                        }
                    }
                }
            }
            _ => {
                drop(client);
                drop(server);
            }
        }
    }
    drop(listener);
    let t = &tally;
    let report = format!(
        "connect {}/{} accept {}/{} read {}/{} (won/dropped), dropped with data {}, resets {}, {:?}",
        t.connects_won.get(),
        t.connects_dropped.get(),
        t.accepts_won.get(),
        t.accepts_dropped.get(),
        t.reads_won.get(),
        t.reads_dropped.get(),
        t.streams_dropped_with_data.get(),
        t.resets.get(),
        started.elapsed()
    );
    for (what, n) in [
        ("connects dropped", t.connects_dropped.get()),
        ("accepts dropped", t.accepts_dropped.get()),
        ("reads dropped", t.reads_dropped.get()),
        ("reads won", t.reads_won.get()),
        (
            "streams dropped with data",
            t.streams_dropped_with_data.get(),
        ),
    ] {
        if n < 20 {
            return Err(format!(
                "too few {what} ({n}) for the test to mean anything: {report}"
            ));
        }
    }
    Ok(report)
}

/// Runs the churn loop for each connection and answers `ok <report>` or
/// `error <why>`.
struct Churn;

impl Handler for Churn {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        let Some(seed) = conn.read().await? else {
            return Ok(());
        };
        let seed = seed.first().copied().unwrap_or(0) as u64;
        let line = match churn(seed).await {
            Ok(report) => format!("ok {report}\n"),
            Err(e) => format!("error {e}\n"),
        };
        let (res, _) = conn.write_all(line.into_bytes()).await;
        res?;
        while conn.read().await?.is_some() {}
        Ok(())
    }
}

backend_tests! {
    /// 2,000 iterations of accept/connect/receive raced against random
    /// deadlines; no fd, ring buffer or operation outlives them.
    fn churn_leaks_nothing(backend) {
        let server = builder(backend).start(|_core| Churn).expect("start");
        check_backend(&server, backend);
        let addr = server.local_addr();
        let idle = idle_in_flight(backend);
        // A connection that closes at once: once it is counted, the accept
        // loop runs (and holds its reserve fd) before the baseline.
        drop(connect(addr));
        wait_until(Duration::from_secs(60), "the server to settle", || server.stats(), |s| {
            sum(s, |c| c.accepted) == 1 && sum(s, |c| c.active) == 0 && sum(s, |c| c.in_flight) == idle
        });
        let fds_before = fd_count();
        let fd_table_before = fd_table();
        let stats_before = server.stats();
        {
            let mut control = connect(addr);
            control.set_read_timeout(Some(LIMIT + Duration::from_secs(10))).expect("timeout");
            control.write_all(&[if backend == Backend::Uring { 1 } else { 2 }]).expect("write");
            let mut line = String::new();
            BufReader::new(&control).read_line(&mut line).expect("read the churn report");
            println!("{backend}: {}", line.trim_end());
            assert!(line.starts_with("ok "), "{line}");
        }
        let stats = wait_until(Duration::from_secs(60), "every connection, buffer and operation to be gone", || server.stats(), |s| {
            sum(s, |c| c.active) == 0 && sum(s, |c| c.ring_buffers_out) == 0 && sum(s, |c| c.in_flight) == idle
        });
        assert_eq!(sum(&stats, |c| c.ring_buffers_out), sum(&stats_before, |c| c.ring_buffers_out));
        let table_before = fd_table_before.join(" ");
        let fds = settle_fds(fds_before, Duration::from_secs(60));
        assert_eq!(fds, fds_before, "fd leak: before {table_before}; now {:?}", fd_table());
        assert_eq!(sum(&stats, |c| c.panics), 0);
        println!("{backend}: after churn: {}", stats[0]);
        server.shutdown();
        server.join().expect("join");
    }
}

/// The same churn with single-shot accepts and receives (PERCORE_FAULT
/// `no_multishot`, read once per process, so in a child process): their
/// cancellation paths differ (a late accept's fd, a pool buffer).
#[test]
fn churn_leaks_nothing_without_multishot() {
    let _serial = serial();
    let Some(out) = rerun_under_fault(
        &[
            "churn_no_leak::uring::churn_leaks_nothing",
            "--exact",
            "--nocapture",
        ],
        "no_multishot",
    ) else {
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "churn under no_multishot failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!(
        "{}",
        stdout
            .lines()
            .filter(|l| l.starts_with("uring:"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
