//! The echo server with its resources made scarce, on both backends
//! (FAULTS C3, C4, and the per-core connection limit): every client still
//! finishes with every byte, and nothing is left behind.

use crate::support;

use std::io::{ErrorKind, Read, Write};
use std::time::Duration;

use percore_test_kit::*;
use support::start_echo;

/// Waits until the server is idle again and checks it holds nothing: no
/// connection, no ring buffer, and only the listener's accept in flight.
fn assert_idle(server: &ServerHandle) -> Vec<StatsSnapshot> {
    let idle_in_flight = idle_in_flight(server.backend());
    wait_until(
        Duration::from_secs(60),
        "the server to be idle with nothing held",
        || server.stats(),
        |s| {
            sum(s, |c| c.active) == 0
                && sum(s, |c| c.ring_buffers_out) == 0
                && sum(s, |c| c.in_flight) == idle_in_flight
        },
    )
}

backend_tests! {
    /// FAULTS C3: a provided-buffer ring of 8 buffers and 64 clients
    /// bursting. Receives find the ring empty (ENOBUFS), fall back to pool
    /// buffers and re-arm; no receive stream ends for good, every client
    /// finishes, and every buffer is back in the ring at the end.
    fn tiny_buffer_ring_with_64_bursting_clients(backend) {
        let server = start_echo(builder(backend).recv_buffers(8, 4096), backend);
        let addr = server.local_addr();
        Streams {
            conns: 64,
            bytes: 256 * 1024,
            max_write: 64 * 1024,
            threads: 8,
            half_close: true,
            limit: Duration::from_secs(60),
            first_id: 0,
        }
        .run(addr)
        .unwrap_or_else(|e| panic!("{e}"));
        let stats = assert_idle(&server);
        println!(
            "{backend}: ENOBUFS {} times, multishot ended {} times, {} backpressure pauses",
            sum(&stats, |c| c.buffer_exhausted),
            sum(&stats, |c| c.multishot_ended),
            sum(&stats, |c| c.backpressure_pauses)
        );
        assert_eq!(sum(&stats, |c| c.bytes_out), 64 * 256 * 1024);
        if backend == Backend::Uring {
            assert!(sum(&stats, |c| c.buffer_exhausted) > 0, "the ring never ran dry: the test proves nothing");
        }
        ping(addr);
        server.shutdown();
        server.join().expect("join");
    }

    /// FAULTS C4: a tiny ring (8 SQEs, 32 CQEs) and 500 connections with
    /// small echoes: completions overflow the CQ (kept by the kernel with
    /// NODROP and flushed on the next enter) and the SQ fills up; everything
    /// completes and no driver call fails.
    fn tiny_ring_with_500_connections(backend) {
        let server = start_echo(builder(backend).ring_entries(8), backend);
        let addr = server.local_addr();
        Streams {
            conns: 500,
            bytes: 4096,
            max_write: 512,
            threads: 4,
            half_close: true,
            limit: Duration::from_secs(60),
            first_id: 0,
        }
        .run(addr)
        .unwrap_or_else(|e| panic!("{e}"));
        let stats = assert_idle(&server);
        println!(
            "{backend}: {} SQEs in {} enters, {} multishot ends",
            sum(&stats, |c| c.submissions),
            sum(&stats, |c| c.enters),
            sum(&stats, |c| c.multishot_ended)
        );
        assert_eq!(sum(&stats, |c| c.accepted), 500);
        assert_eq!(sum(&stats, |c| c.bytes_out), 500 * 4096);
        assert_eq!(sum(&stats, |c| c.errors_driver), 0, "a driver call failed");
        assert_eq!(sum(&stats, |c| c.errors_io), 0);
        server.shutdown();
        server.join().expect("join");
    }

    /// At `max_connections` the core stops accepting (no busy loop; on
    /// io_uring its multishot accept is cancelled, so clients past the
    /// limit wait in the kernel's backlog, not accepted into the process)
    /// and resumes as soon as a connection closes.
    fn connection_limit_pauses_and_resumes_accepting(backend) {
        let server = start_echo(builder(backend).max_connections(4), backend);
        let addr = server.local_addr();
        let mut open: Vec<_> = (0..4)
            .map(|i| {
                let mut c = connect(addr);
                roundtrip(&mut c, pattern(i, 100));
                c
            })
            .collect();
        let fds = fd_count();
        let mut fifth = connect(addr);
        fifth.write_all(b"fifth").expect("write");
        // Queued behind the fifth, so they do not take the slot it waits for.
        let behind: Vec<_> = (0..4).map(|_| connect(addr)).collect();
        fifth.set_read_timeout(Some(Duration::from_millis(300))).expect("timeout");
        let mut back = [0u8; 5];
        // (A thread that ran an io_uring core may see EINTR once when the
        // kernel tears that ring down: retry it.)
        let read = loop {
            match fifth.read(&mut back) {
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        match read {
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            other => panic!("the fifth connection was served over the limit: {other:?}"),
        }
        // Only the clients' own sockets: the server took none of them.
        assert_eq!(fd_count() - fds, behind.len() + 1, "descriptors {:?}", fd_table());
        let stats = server.stats();
        assert_eq!(sum(&stats, |c| c.active), 4);
        assert!(sum(&stats, |c| c.accept_paused) >= 1);
        // Paused, not spinning: the core thread sleeps (measured by the
        // kernel; the core's own CPU gauge is only sampled while it runs).
        let ticks_before = core_thread_ticks(server_cpu());
        std::thread::sleep(Duration::from_millis(500));
        let spent = core_thread_ticks(server_cpu()) - ticks_before;
        assert!(spent <= 3, "the paused core used {} ms of CPU in 500 ms", spent * 10);
        drop(open.pop());
        fifth.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        fifth.read_exact(&mut back).expect("the fifth connection is served once one closes");
        assert_eq!(&back, b"fifth");
        drop(open);
        drop(fifth);
        drop(behind);
        wait_until(Duration::from_secs(60), "connections to close", || server.stats(), |s| sum(s, |c| c.active) == 0);
        server.shutdown();
        server.join().expect("join");
    }
}
