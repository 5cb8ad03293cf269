//! `percore::drain_deadline()`: absent before the stop, then the very
//! instant the drain ends, so that a handler that answers a little before
//! it gets its answer out before its task is cancelled.
//!
//! The handler writes `none` when the connection opens (no stop yet), waits
//! for the stop, writes how many milliseconds the drain has left, writes
//! `before` 200 ms ahead of the deadline, and then waits forever: the drain
//! cancels it, closing the connection.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use percore::{Connection, Handler};
use percore_test_kit::*;

/// The drain of the test server.
const DRAIN: Duration = Duration::from_millis(1500);

/// How long before the deadline the handler writes `before`.
const AHEAD: Duration = Duration::from_millis(200);

struct UntilTheDeadline;

impl Handler for UntilTheDeadline {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        let first = match percore::drain_deadline() {
            None => "none\n",
            Some(_) => "early\n",
        };
        conn.write_all(first).await.0?;
        percore::shutdown_signal().await;
        let Some(deadline) = percore::drain_deadline() else {
            conn.write_all("missing\n").await.0?;
            return Ok(());
        };
        let left = deadline.saturating_duration_since(percore::time::now());
        conn.write_all(format!("{}\n", left.as_millis())).await.0?;
        percore::time::sleep_until(deadline - AHEAD).await;
        conn.write_all("before\n").await.0?;
        std::future::pending::<()>().await;
        Ok(())
    }
}

/// The next line from the server, without its newline; `None` at the close.
fn line(reader: &mut BufReader<TcpStream>) -> Option<String> {
    let mut text = String::new();
    match reader.read_line(&mut text) {
        Ok(0) => None,
        Ok(_) => Some(text.trim_end().to_owned()),
        Err(e) => panic!("read a line: {e}"),
    }
}

backend_tests! {
    /// 1. Before the stop there is no deadline. 2. After it, the deadline
    /// is the drain timeout away. 3. A write just before it reaches the
    /// client; 4. then the drain cancels the task and the server stops, at
    /// the deadline and not before.
    fn known_from_the_stop_and_kept_by_the_drain(backend) {
        let handle = builder(backend)
            .drain_timeout(DRAIN)
            .start(|_core| UntilTheDeadline)
            .expect("start the server");
        check_backend(&handle, backend);
        let stream = TcpStream::connect(handle.local_addr()).expect("connect");
        stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        let mut reader = BufReader::new(stream);
        // 1.
        assert_eq!(line(&mut reader).as_deref(), Some("none"));
        // 2.
        let stopped = Instant::now();
        handle.shutdown();
        let left: u64 = line(&mut reader)
            .expect("the time left")
            .parse()
            .expect("a number of milliseconds");
        // The deadline is at least DRAIN after `stopped`, and the handler
        // measured it no later than this line was read: what it had left
        // and what has passed since `stopped` make up at least DRAIN
        // (1 ms for the truncation to milliseconds), however late it ran.
        let since = stopped.elapsed().as_millis() as u64;
        assert!(
            left <= DRAIN.as_millis() as u64 && left + since + 1 >= DRAIN.as_millis() as u64,
            "{left} ms left of a {DRAIN:?} drain, read {since} ms after the stop"
        );
        // 3.
        assert_eq!(line(&mut reader).as_deref(), Some("before"));
        // 4.
        assert_eq!(line(&mut reader), None, "closed at the deadline");
        let closed = stopped.elapsed();
        handle.join().expect("the server stopped cleanly");
        assert!(
            closed >= DRAIN - Duration::from_millis(100),
            "closed {closed:?} after the stop, for a {DRAIN:?} drain"
        );
    }
}
