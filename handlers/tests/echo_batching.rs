//! Opt-in io_uring wait batching (`ServerBuilder::wait_batching`): a parked
//! core holds out for many completions up to a time bound. It must never
//! lose or stall a byte: concurrent connections all get every byte back, a
//! lone ping-pong connection (which can never fill a batch) still gets its
//! answers within the bound, and under concurrent load the core makes far
//! fewer `io_uring_enter` calls than messages (without batching it makes
//! about 0.5–0.7 per message at this load; batched, a few hundredths).

#[macro_use]
mod support;

use std::thread;
use std::time::{Duration, Instant};

use support::*;

const BOUND: Duration = Duration::from_micros(200);

backend_tests! {
    fn batched_waits_lose_nothing(backend) {
        let server = start_echo(builder(backend).wait_batching(Some(BOUND)), backend);
        let addr = server.local_addr();

        // 1. A lone connection: every round trip completes, each within a
        //    generous bound (the batch bound is 200 µs; a stall would be
        //    seconds).
        let mut lone = connect(addr);
        let started = Instant::now();
        for i in 0..200u32 {
            roundtrip(&mut lone, &i.to_le_bytes());
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "200 lone round trips took {:?}",
            started.elapsed()
        );

        // 2. Concurrent connections, each checking its own bytes.
        let before = sum(&server.stats(), |c| c.enters);
        let clients: Vec<_> = (0..32)
            .map(|id| {
                thread::spawn(move || {
                    let mut stream = connect(addr);
                    for round in 0..500usize {
                        roundtrip(&mut stream, pattern(id * 1000 + round, 64));
                    }
                })
            })
            .collect();
        for client in clients {
            client.join().expect("a client failed");
        }
        let enters = sum(&server.stats(), |c| c.enters) - before;
        let messages = 32 * 500;
        println!("{backend}: {enters} enters/waits for {messages} messages");
        if backend == Backend::Uring {
            assert!(
                enters < messages / 4,
                "batched waits made {enters} io_uring_enter calls for {messages} messages"
            );
        }
        server.shutdown();
        server.join().expect("server stopped cleanly");
    }
}
