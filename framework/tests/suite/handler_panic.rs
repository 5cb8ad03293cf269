//! FAULTS E5: a handler that panics. The panicking connection is closed,
//! the core's other connections keep working, and `stats().panics` counts
//! each panic. A factory that panics fails the start with a clear error.

use std::io::{ErrorKind, Read, Write};
use std::time::Duration;

use percore::{Connection, Handler};
use percore_test_kit::*;

const MAGIC: &[u8] = b"PANIC!";

/// Echo that panics when a received buffer contains [`MAGIC`].
struct PanicOnMagic;

impl Handler for PanicOnMagic {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        while let Some(buf) = conn.read().await? {
            if buf.windows(MAGIC.len()).any(|w| w == MAGIC) {
                panic!("the test handler was told to panic");
            }
            let (res, _) = conn.write_all(buf).await;
            res?;
        }
        conn.shutdown_write()
    }
}

backend_tests! {
    /// Five connections make the handler panic, one at a time, while eight
    /// others stay open and keep echoing.
    fn panicking_handler_closes_only_its_connection(backend) {
        quiet_expected_panics();
        let server = builder(backend).start(|_core| PanicOnMagic).expect("start");
        check_backend(&server, backend);
        let addr = server.local_addr();
        let mut others: Vec<_> = (0..8).map(|_| connect(addr)).collect();
        for (i, other) in others.iter_mut().enumerate() {
            roundtrip(other, pattern(i, 1000));
        }
        for round in 0..5 {
            let mut victim = connect(addr);
            roundtrip(&mut victim, b"hello before the panic");
            victim.write_all(MAGIC).expect("write");
            // Closed by the server, not left hanging: end of stream or reset.
            let mut buf = [0u8; 64];
            match victim.read(&mut buf) {
                Ok(0) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
                other => panic!("round {round}: the panicking connection was not closed: {other:?}"),
            }
            for (i, other) in others.iter_mut().enumerate() {
                roundtrip(other, pattern(round * 10 + i, 3000));
            }
            ping(addr);
        }
        // Only the panicking connections (and the pings) closed.
        wait_until(Duration::from_secs(60), "five panics counted, eight connections open", || server.stats(), |s| {
            sum(s, |c| c.panics) == 5 && sum(s, |c| c.active) == 8
        });
        drop(others);
        wait_until(Duration::from_secs(60), "connections to close", || server.stats(), |s| sum(s, |c| c.active) == 0);
        server.shutdown();
        server.join().expect("a core that caught panics still stops cleanly");
    }

    /// A handler factory that panics fails `start` with an error naming the
    /// cause (and leaves no thread behind).
    fn panicking_factory_fails_the_start(backend) {
        quiet_expected_panics();
        let err = builder(backend)
            .start(|_core| -> PanicOnMagic { panic!("the test factory was told to panic") })
            .expect_err("start with a panicking factory");
        assert!(err.to_string().contains("panicked"), "unclear error: {err}");
        // The port it would have used is free again, and a good server runs.
        let server = builder(backend).start(|_core| PanicOnMagic).expect("start after a failed start");
        ping(server.local_addr());
        server.shutdown();
        server.join().expect("join");
    }
}
