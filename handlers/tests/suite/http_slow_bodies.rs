//! A slow-body flood (FAULTS B, `slowhttptest -B`), on both backends: a
//! thousand clients each send a head and the first 100 bytes of an 8 KiB
//! body, then stall. Each holds about what it sent, not a receive buffer;
//! every one is answered in full once the rest comes; and after they
//! leave, the memory they took goes back to the kernel.
//!
//! The test reads the process's RSS, so it runs alone (`serial`).

use crate::support;

use std::time::Duration;

use percore_test_kit::http::*;
use percore_test_kit::*;
use support::http::*;

const CLIENTS: usize = 1000;
const BODY: usize = 8192;
const FIRST: usize = 100;
/// RSS growth below which the process's own noise hides a give-back.
const NOISE_KIB: u64 = 4096;

/// The body of client `i`: bytes that say whose they are and where.
fn body(i: usize) -> Vec<u8> {
    (0..BODY).map(|k| (i * 31 + k * 7) as u8).collect()
}

fn rss_kib() -> u64 {
    vm_rss_kib("self")
}

/// Clients that each sent a head and the first [`FIRST`] bytes of its
/// body, once the server has parsed every head.
fn stalled(server: &TestServer, bodies: &[Vec<u8>]) -> Vec<Client> {
    let requests_before = server.stats().requests;
    let head = format!("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: {BODY}\r\n\r\n");
    let clients: Vec<Client> = bodies
        .iter()
        .map(|body| {
            let mut c = Client::connect(server.addr);
            c.send(&[head.as_bytes(), &body[..FIRST]].concat());
            c
        })
        .collect();
    wait_until(
        Duration::from_secs(60),
        "every head parsed",
        || server.stats().requests - requests_before,
        |n| *n as usize >= bodies.len(),
    );
    clients
}

/// Sends each client the rest of its body: each gets it all back.
fn finish(clients: &mut [Client], bodies: &[Vec<u8>]) {
    for (i, c) in clients.iter_mut().enumerate() {
        c.send(&bodies[i][FIRST..]);
    }
    for (i, c) in clients.iter_mut().enumerate() {
        let r = c.response();
        assert!(
            r.status == 200 && r.body == bodies[i],
            "client {i}: {} and its body otherwise",
            r.status
        );
    }
}

backend_tests! {
    fn slow_bodies_hold_their_bytes_and_give_memory_back(backend) {
        let server = TestServer::echo(backend);
        let bodies: Vec<Vec<u8>> = (0..CLIENTS).map(body).collect();
        // Warm: the core's first buffers and tables, and the allocator's
        // arenas that a flood first touches, are not the flood's. A
        // smaller flood, whole, first.
        let warm = &bodies[..CLIENTS / 4];
        let mut clients = stalled(&server, warm);
        finish(&mut clients, warm);
        drop(clients);
        wait_until(Duration::from_secs(60), "the warm-up's clients gone", || server.stats().active, |n| *n == 0);
        let before = rss_kib();

        let mut clients = stalled(&server, &bodies);
        // The first bytes read too: a moment more, then the peak.
        std::thread::sleep(Duration::from_millis(200));
        let during = rss_kib();
        let per_client = during.saturating_sub(before) * 1024 / CLIENTS as u64;
        println!("{backend}: {per_client} bytes of RSS per client stalled mid-body ({before} -> {during} KiB)");
        assert!(per_client <= 16 * 1024, "{per_client} bytes per stalled client");

        // Nothing lost: each gets its whole body back.
        finish(&mut clients, &bodies);
        drop(clients);
        drop(bodies);
        wait_until(Duration::from_secs(60), "every client gone", || server.stats().active, |n| *n == 0);

        // The core gives back what the flood took: most of it, whatever
        // the allocator keeps for itself. The process's RSS also moves by
        // a few MiB with what this test's own clients and the tests before
        // it leave the allocator, so a flood that grew it by less says
        // nothing either way (`give_back` tests the giving back itself).
        let grew = during.saturating_sub(before);
        if grew < NOISE_KIB {
            println!("{backend}: the flood grew the RSS by {grew} KiB, within the process's noise: give-back not measured here");
            return;
        }
        let back = wait_until(Duration::from_secs(60), "the flood's memory given back", rss_kib, |now| {
            now.saturating_sub(before) < grew / 2
        });
        println!("{backend}: RSS {before} KiB before, {during} KiB during, {back} KiB after");
    }
}
