//! The raw echo server under load and under misbehaving clients, on both
//! backends: many concurrent streams of random bytes, half-close, clients
//! that reset at once, clients that never read (FAULTS B4/B6/B7 for raw
//! echo), and the same suite re-run in a child process with io_uring
//! features taken away (FAULTS D2).

use crate::support;

use std::io::{Read, Write};
use std::net::Shutdown;
use std::time::{Duration, Instant};

use percore_test_kit::*;
use support::{child_main, start_echo};

/// Provided-ring buffers per core by default (`BufConfig::count`).
const RING_BUFFERS: u64 = 256;

backend_tests! {
    /// 200 connections each send 1 MiB of random bytes in random-sized
    /// writes while reading; every byte comes back, in order.
    fn two_hundred_streams_of_one_mib(backend) {
        let server = start_echo(builder(backend), backend);
        let addr = server.local_addr();
        let streams = Streams {
            conns: 200,
            bytes: 1 << 20,
            max_write: 64 * 1024,
            threads: 16,
            half_close: true,
            limit: Duration::from_secs(90),
            first_id: 0,
        };
        let started = Instant::now();
        streams.run(addr).unwrap_or_else(|e| panic!("{e}"));
        let elapsed = started.elapsed();
        let total = 200u64 << 20;
        let stats = wait_until(Duration::from_secs(60), "all connections closed", || server.stats(), |s| {
            sum(s, |c| c.active) == 0
        });
        println!(
            "{backend}: 200 x 1 MiB echoed in {elapsed:?} ({:.0} MiB/s each way); {}",
            200.0 / elapsed.as_secs_f64(),
            stats[0]
        );
        assert_eq!(sum(&stats, |c| c.accepted), 200);
        assert_eq!(sum(&stats, |c| c.bytes_in), total, "bytes received by the server");
        assert_eq!(sum(&stats, |c| c.bytes_out), total, "bytes sent by the server");
        assert_eq!(sum(&stats, |c| c.errors_io), 0);
        let stats = wait_until(Duration::from_secs(60), "every ring buffer back", || server.stats(), |s| {
            sum(s, |c| c.ring_buffers_out) == 0
        });
        assert_eq!(sum(&stats, |c| c.ring_buffers_out), 0);
        server.shutdown();
        server.join().expect("join");
    }

    /// The client shuts its write side: the server echoes everything that
    /// came before, then closes its side.
    fn half_close_echoes_the_rest_then_closes(backend) {
        let server = start_echo(builder(backend), backend);
        let addr = server.local_addr();
        for (round, len) in [0usize, 1, 1000, 100 * 1024, 600 * 1024].into_iter().enumerate() {
            let data = pattern(round, len.max(1))[..len].to_vec();
            let mut client = connect(addr);
            // Everything fits in the socket buffers up to here, so write it
            // all before reading; 600 KiB goes through a writer thread.
            let mut writer = client.try_clone().expect("clone");
            let to_send = data.clone();
            let sender = std::thread::spawn(move || {
                for chunk in to_send.chunks(7919) {
                    writer.write_all(chunk).expect("write");
                }
                writer.shutdown(Shutdown::Write).expect("shutdown(Write)");
            });
            let back = read_to_end(&mut client).unwrap_or_else(|(got, e)| {
                panic!("round {round}: read after {} bytes: {e}", got.len())
            });
            sender.join().expect("writer thread");
            assert_eq!(back.len(), data.len(), "round {round}: echoed length");
            assert!(back == data, "round {round}: echoed bytes differ");
            // The server's end of stream is real: a further read says 0 again.
            assert_eq!(client.read(&mut [0u8; 16]).expect("read after EOF"), 0);
        }
        // The half-closed side does not linger on the server either.
        wait_until(Duration::from_secs(60), "half-closed connections to close", || server.stats(), |s| {
            sum(s, |c| c.active) == 0
        });
        server.shutdown();
        server.join().expect("join");
    }

    /// Clients that connect and reset at once (`SO_LINGER` 0), with and
    /// without data in flight: the server closes them, leaks no fd and no
    /// buffer, and keeps serving others.
    fn clients_that_reset_at_once(backend) {
        let server = start_echo(builder(backend), backend);
        let addr = server.local_addr();
        ping(addr);
        let idle_in_flight = idle_in_flight(backend);
        wait_until(Duration::from_secs(60), "the ping connection to close", || server.stats(), |s| {
            sum(s, |c| c.active) == 0 && sum(s, |c| c.in_flight) == idle_in_flight
        });
        let fds_before = fd_count();
        let mut rng = Rng::new(7);
        for i in 0..300usize {
            let mut client = connect(addr);
            match i % 4 {
                0 => {}
                1 => client.write_all(pattern(i, 1000)).expect("write"),
                2 => {
                    // Enough that the server is mid-send when the reset lands.
                    let _ = client.write_all(&pattern(i, 256 * 1024)[..rng.between(1, 256 * 1024)]);
                }
                _ => {
                    roundtrip(&mut client, pattern(i, 100));
                    client.write_all(pattern(i + 1, 4096)).expect("write");
                }
            }
            reset(client);
            if i % 50 == 49 {
                ping(addr);
            }
        }
        let stats = wait_until(Duration::from_secs(60), "reset connections to close", || server.stats(), |s| {
            sum(s, |c| c.active) == 0 && sum(s, |c| c.ring_buffers_out) == 0 && sum(s, |c| c.in_flight) == idle_in_flight
        });
        assert_eq!(sum(&stats, |c| c.accepted), 301 + 6);
        let fds = settle_fds(fds_before, Duration::from_secs(60));
        assert_eq!(fds, fds_before, "fd leak: {:?}", fd_table());
        ping(addr);
        server.shutdown();
        server.join().expect("join");
    }

    /// Clients that send and never read: the server stops reading them
    /// (backpressure) instead of buffering without bound, and keeps serving
    /// everyone else, with memory bounded.
    fn clients_that_never_read_are_bounded(backend) {
        let server = start_echo(builder(backend), backend);
        let addr = server.local_addr();
        ping(addr);
        let rss_before = vm_rss_kib("self");
        // Phase 1: a few silent clients. The server must stop reading them
        // (`stall` fails if it keeps taking bytes). On io_uring what bounds
        // the reading depends on timing: a bulk stream (whole buffers) is
        // read one pool buffer ahead of its stalled echo and holds no ring
        // buffer; a multishot receive still armed when the echo stalls is
        // paused after 16 queued completions (`BufConfig::stream_cap`; a
        // pause that lands late holds more, up to the ring). Each mechanism
        // has its own test in the framework's `read_ahead` suite.
        let mut silent = Vec::new();
        let pushed = stall(addr, &mut silent, 4);
        let stats = server.stats();
        let held = sum(&stats, |c| c.ring_buffers_out);
        println!(
            "{backend}: 4 silent clients pushed {pushed:?} KiB each before stalling; ring buffers held {held} \
             ({:.1} per client), backpressure pauses {}, switched to bulk reads {}",
            held as f64 / 4.0,
            sum(&stats, |c| c.backpressure_pauses),
            sum(&stats, |c| c.bulk_reads)
        );
        assert!(held <= RING_BUFFERS, "4 silent clients hold {held} ring buffers");
        ping_promptly(addr);
        // Phase 2: 20 more, enough to take every ring buffer if each held
        // what a late pause can: the others are still served, falling back
        // to receives into pool buffers should the ring run dry.
        let pushed = stall(addr, &mut silent, 20);
        let stats = server.stats();
        let rss_after = vm_rss_kib("self");
        let grown = rss_after.saturating_sub(rss_before);
        println!(
            "{backend}: 24 silent clients (the last pushed {pushed:?} KiB); ring buffers held {}, ENOBUFS {}, \
             RSS {rss_before} -> {rss_after} KiB",
            sum(&stats, |c| c.ring_buffers_out),
            sum(&stats, |c| c.buffer_exhausted)
        );
        ping_promptly(addr);
        // The whole process (server and clients) grew by far less than the
        // clients pushed: the ring (16 MiB, not all of it touched) plus two
        // pool buffers per connection (its stalled send and the receive
        // ahead of it) at most.
        assert!(grown < 24 * 1024, "RSS grew by {grown} KiB");
        for client in silent {
            reset(client);
        }
        wait_until(Duration::from_secs(60), "silent connections to close and return their buffers", || server.stats(), |s| {
            sum(s, |c| c.active) == 0 && sum(s, |c| c.ring_buffers_out) == 0
        });
        ping(addr);
        server.shutdown();
        server.join().expect("join");
    }
}

/// Opens `n` more connections that write and never read, and writes until
/// every one is stalled: no write progress for 300 ms. A server that reads
/// without bound never stalls them; the cap turns that into a failure
/// instead of a hang. Returns the KiB each new client pushed.
fn stall(
    addr: std::net::SocketAddr,
    silent: &mut Vec<std::net::TcpStream>,
    n: usize,
) -> Vec<usize> {
    const CAP: usize = 256 << 20;
    let chunk = pattern(1, 64 * 1024);
    let first = silent.len();
    for _ in 0..n {
        let client = connect(addr);
        client.set_nonblocking(true).expect("nonblocking");
        silent.push(client);
    }
    let mut written = vec![0usize; n];
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut stalled_since = Instant::now();
    loop {
        let mut progressed = false;
        for (client, written) in silent[first..].iter_mut().zip(written.iter_mut()) {
            loop {
                match client.write(chunk) {
                    Ok(n) => {
                        *written += n;
                        progressed = true;
                        assert!(
                            *written < CAP,
                            "the server took {} MiB from a client that never reads",
                            *written >> 20
                        );
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("write to the server: {e}"),
                }
            }
        }
        if progressed {
            stalled_since = Instant::now();
        } else if stalled_since.elapsed() >= Duration::from_millis(300) {
            return written.iter().map(|w| w / 1024).collect();
        }
        assert!(
            Instant::now() < deadline,
            "clients never stalled: wrote {written:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Twenty new connections each get their echo: the silent clients do
/// not starve them (a starved one fails on the client's read guard).
fn ping_promptly(addr: std::net::SocketAddr) {
    for _ in 0..20 {
        ping(addr);
    }
}

/// The child-process entry: a no-op in a normal run (see
/// [`support::child_main`]).
#[test]
fn child_entry() {
    child_main();
}

/// Runs this binary's `uring::` echo suite in a child process with
/// `PERCORE_FAULT=fault`, then checks with a child-mode server that the
/// fault really changed how the server works: its log says `log_mark`,
/// and it makes a receive submission per message (`single_shot`) or
/// still serves many messages per multishot receive.
fn degraded_suite(fault: &str, log_mark: &str, single_shot: bool) {
    let _serial = serial();
    let Some(out) = rerun_under_fault(
        &["echo_stream::uring::", "--test-threads=1", "--nocapture"],
        fault,
    ) else {
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "echo suite under PERCORE_FAULT={fault} failed:\n{stdout}\n{stderr}"
    );
    assert!(
        !stdout.contains("skipped:"),
        "suite skipped under the fault:\n{stdout}"
    );
    let passed = stdout.matches("\ntest echo_stream::uring::").count();
    assert!(
        passed >= 4 && stdout.contains("test result: ok."),
        "expected every uring:: test to run and pass:\n{stdout}"
    );

    let messages = 500u64;
    let probe = |fault: Option<&str>| {
        let mut cmd = child_command("echo_stream::child_entry", "uring");
        if let Some(fault) = fault {
            cmd.env("PERCORE_FAULT", fault);
        }
        let mut child = ChildServer::spawn(cmd, Duration::from_secs(60))
            .unwrap_or_else(|f| panic!("child server did not start: {f:?}"));
        let mut client = connect(child.addr);
        for i in 0..messages as usize {
            roundtrip(&mut client, pattern(i, 32));
        }
        drop(client);
        child.close_stdin();
        let (status, log) = child.wait(Duration::from_secs(60));
        assert!(status.success(), "child server failed: {status}\n{log}");
        let sqes =
            stat_from_log(&log, "sqes").unwrap_or_else(|| panic!("no stats in the log:\n{log}"));
        (sqes as f64 / messages as f64, log)
    };
    let (degraded, log) = probe(Some(fault));
    assert!(
        log.contains(log_mark),
        "the server's log does not say {log_mark}:\n{log}"
    );
    let (normal, _) = probe(None);
    println!("{fault}: {degraded:.2} submissions per message (normal: {normal:.2})");
    if single_shot {
        assert!(
            degraded >= 2.0,
            "a single-shot receive per message expected under {fault}: {degraded:.2} SQEs/msg"
        );
    } else {
        assert!(
            degraded < 1.6,
            "multishot receives should still serve many messages under {fault}: {degraded:.2} SQEs/msg"
        );
    }
    assert!(
        normal < 1.6,
        "multishot receive should serve many messages per SQE: {normal:.2} SQEs/msg"
    );
}

/// FAULTS D2: no multishot accept/receive (old kernel): single-shot
/// accept and plain receives, and the echo suite still passes.
#[test]
fn d2_no_multishot_runs_the_echo_suite() {
    degraded_suite("no_multishot", "multishot=false", true);
}

/// FAULTS D2: no provided-buffer ring: receives into pool buffers, and the
/// echo suite still passes.
#[test]
fn d2_no_buf_ring_runs_the_echo_suite() {
    degraded_suite("no_buf_ring", "buf_ring=false", true);
}

/// FAULTS D4: submissions fail after their SQEs were queued (one
/// `io_uring_enter` with submissions in eight fails with `ENOMEM` before the
/// kernel sees them): every operation stays alive, goes in with the next
/// enter, and completes; the failures are logged, and the echo suite still
/// passes.
#[test]
fn d4_failed_submits_run_the_echo_suite() {
    degraded_suite("enter_error=ENOMEM", "io_uring_enter failed", false);
}

/// FAULTS D2: a kernel before 6.17 refuses a multishot receive's byte
/// limit: the first is refused with `EINVAL`, the receive is armed again
/// without a limit, the log says so once, and the echo suite still passes.
#[test]
fn d2_refused_recv_limit_runs_the_echo_suite() {
    degraded_suite("recv_limit_refused", "without a byte limit", false);
}
