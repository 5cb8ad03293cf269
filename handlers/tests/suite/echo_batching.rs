//! Opt-in io_uring wait batching (`ServerBuilder::wait_batching`): a busy
//! core holds out for many completions up to a time bound. It must never
//! lose or stall a byte: concurrent connections all get every byte back,
//! and a lone ping-pong connection gets every answer without a single
//! batched wait (it never makes a core busy enough). Under concurrent load
//! batching engages and makes far fewer `io_uring_enter` calls than
//! messages; by default no wait is ever batched.

use crate::support;

use std::thread;
use std::time::Duration;

use percore_test_kit::*;
use support::start_echo;

const BOUND: Duration = Duration::from_micros(200);
const CLIENTS: usize = 32;
const ROUNDS: usize = 500;

/// Runs `CLIENTS` concurrent ping-pong clients, each checking its own
/// bytes; returns the core's enters (or epoll waits) and batched waits
/// during the run.
fn concurrent_enters(server: &percore::ServerHandle) -> (u64, u64) {
    let addr = server.local_addr();
    let before = sum(&server.stats(), |c| c.enters);
    let batched_before = sum(&server.stats(), |c| c.batched_waits);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| {
            thread::spawn(move || {
                let mut stream = connect(addr);
                for round in 0..ROUNDS {
                    roundtrip(&mut stream, pattern(id * 1000 + round, 64));
                }
            })
        })
        .collect();
    for client in clients {
        client.join().expect("a client failed");
    }
    (
        sum(&server.stats(), |c| c.enters) - before,
        sum(&server.stats(), |c| c.batched_waits) - batched_before,
    )
}

backend_tests! {
    fn batched_waits_lose_nothing(backend) {
        let server = start_echo(builder(backend).wait_batching(Some(BOUND)), backend);

        // 1. A lone connection: every round trip completes (a stalled one
        //    fails on the client's read guard), and no wait is batched.
        let mut lone = connect(server.local_addr());
        let batched_before = sum(&server.stats(), |c| c.batched_waits);
        for i in 0..200u32 {
            roundtrip(&mut lone, &i.to_le_bytes());
        }
        let lone_batched = sum(&server.stats(), |c| c.batched_waits) - batched_before;
        assert_eq!(lone_batched, 0, "a lone connection made the core batch its waits");

        // 2. Concurrent connections: batching engages.
        let (enters, batched) = concurrent_enters(&server);
        let messages = (CLIENTS * ROUNDS) as u64;
        println!("{backend}: {enters} enters/waits ({batched} batched) for {messages} messages (batching on)");
        if backend == Backend::Uring {
            assert!(batched > 0, "no wait was batched under {CLIENTS} busy connections");
            assert!(
                enters < messages / 4,
                "batched waits made {enters} io_uring_enter calls for {messages} messages"
            );
        } else {
            assert_eq!(batched, 0, "epoll has no batched waits");
        }
        server.shutdown();
        server.join().expect("server stopped cleanly");
    }

    fn no_batching_by_default(backend) {
        let server = start_echo(builder(backend), backend);
        let (enters, batched) = concurrent_enters(&server);
        let messages = (CLIENTS * ROUNDS) as u64;
        println!("{backend}: {enters} enters/waits for {messages} messages (default)");
        assert_eq!(batched, 0, "{batched} waits were batched by default");
        server.shutdown();
        server.join().expect("server stopped cleanly");
    }
}
