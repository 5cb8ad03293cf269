//! The io_uring driver under the kernel conditions that test its
//! bookkeeping (`PERCORE_FAULT`, read once per process, so each runs in a
//! child process of this binary): an SQ that is always full (every push
//! submits and reaps, so completions are dispatched from inside other
//! dispatches), cancellations and wake-up reads that cannot be queued at
//! first, and a ring without `DEFER_TASKRUN`. Under each, concurrent
//! streams are echoed byte for byte, in order, and the server stops with
//! nothing left in flight.

use std::io::{Read, Write};

use percore_test_kit::*;

/// Bytes each client streams through the echo.
const STREAM: usize = 256 * 1024;
/// Clients at once.
const CLIENTS: usize = 8;

backend_tests! {
    /// Concurrent clients each stream bytes in small writes while a thread
    /// of theirs reads the echo back: every byte returns, in order.
    fn concurrent_streams_echo_in_order(backend) {
        let server = builder(backend).start(|_core| PlainEcho).expect("start");
        check_backend(&server, backend);
        let addr = server.local_addr();
        let clients: Vec<_> = (0..CLIENTS)
            .map(|id| {
                std::thread::spawn(move || {
                    let stream = connect(addr);
                    let mut reader = stream.try_clone().expect("clone");
                    let sent = pattern(id, STREAM);
                    let writer = std::thread::spawn(move || {
                        let mut stream = stream;
                        for chunk in sent.chunks(1000) {
                            stream.write_all(chunk).expect("write");
                        }
                        stream
                    });
                    let mut back = vec![0u8; STREAM];
                    reader.read_exact(&mut back).expect("read the echo");
                    let stream = writer.join().expect("writer");
                    drop(stream);
                    assert!(back == sent, "client {id}: the echo differs");
                })
            })
            .collect();
        for client in clients {
            client.join().expect("client");
        }
        let stats = server.stats();
        server.shutdown();
        server.join().expect("join");
        assert_eq!(sum(&stats, |c| c.panics), 0);
    }
}

/// Runs this binary's `uring::` tests in a child under `fault`.
fn suite_under(fault: &str) {
    let _serial = serial();
    let Some(out) = rerun_under_fault(
        &["under_faults::uring::", "--test-threads=1", "--nocapture"],
        fault,
    ) else {
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed") && !stdout.contains("skipped:"),
        "suite under PERCORE_FAULT={fault} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn with_an_sq_that_is_always_full() {
    suite_under("sq_full");
}

#[test]
fn with_cancellations_and_wake_reads_refused_at_first() {
    suite_under("cancel_refused=16,wake_refused=4");
}

#[test]
fn without_defer_taskrun() {
    suite_under("no_defer_taskrun");
}

#[test]
fn with_every_fault_at_once() {
    suite_under("sq_full,cancel_refused=16,wake_refused=4,no_defer_taskrun,enter_error=EAGAIN");
}
