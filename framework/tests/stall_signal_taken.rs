//! A program that handles the stall watchdog's sampling signal
//! (`SIGRTMIN+5`) itself keeps it: stalls are still counted and logged,
//! without a backtrace, saying why, and the signal is never sent. Its own
//! file: a signal's disposition is process-wide.

use std::io::{Read, Write};
use std::time::Duration;

use percore::{Connection, Handler};
use percore_test_kit::*;

/// Blocks its core 200 ms, then echoes.
struct Blocker;

impl Handler for Blocker {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        while let Some(buf) = conn.read().await? {
            std::thread::sleep(Duration::from_millis(200));
            let (res, _) = conn.write_all(buf).await;
            res?;
        }
        conn.shutdown_write()
    }
}

/// The program ignores the signal, as one that uses it for itself
/// might; were the watchdog to send it anyway, nothing would show, so
/// the test checks the report's reason.
fn take_the_signal() {
    // SAFETY: setting a disposition to SIG_IGN has no memory effects.
    let previous = unsafe { libc::signal(libc::SIGRTMIN() + 5, libc::SIG_IGN) };
    assert_ne!(previous, libc::SIG_ERR, "signal(SIGRTMIN+5, SIG_IGN)");
}

backend_tests! {
    fn a_taken_signal_leaves_reports_without_backtrace(backend) {
        take_the_signal();
        log_capture::install();
        log_capture::clear();
        let server = builder(backend)
            .stall_threshold(Some(Duration::from_millis(50)))
            .start(|_core| Blocker)
            .expect("start");
        let mut client = connect(server.local_addr());
        client.write_all(b"x").expect("write");
        let mut echo = [0u8; 1];
        client.read_exact(&mut echo).expect("the echo, after the stall");
        let reader = server.stats_reader();
        server.shutdown();
        server.join().expect("join");
        let reports = log_capture::warnings("core stalled");
        assert!(!reports.is_empty(), "the stall is reported");
        for line in &reports {
            assert!(line.contains("backtrace=none (the sampling signal (SIGRTMIN+5) already has a handler)"), "{line}");
        }
        assert!(sum(&reader.snapshot(), |c| c.stalls) >= 1);
    }
}
