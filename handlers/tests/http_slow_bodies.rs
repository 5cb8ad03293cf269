//! A slow-body flood (FAULTS B, `slowhttptest -B`), on both backends: a
//! thousand clients each send a head and the first 100 bytes of an 8 KiB
//! body, then stall. Each holds about what it sent, not a receive buffer;
//! every one is answered in full once the rest comes; and after they
//! leave, the memory they took goes back to the kernel.
//!
//! The test reads the process's RSS, so it runs alone (`serial`).

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use percore_test_kit::*;
use support::http::*;

const CLIENTS: usize = 1000;
const BODY: usize = 8192;
const FIRST: usize = 100;

/// The body of client `i`: bytes that say whose they are and where.
fn body(i: usize) -> Vec<u8> {
    (0..BODY).map(|k| (i * 31 + k * 7) as u8).collect()
}

fn rss_kib() -> u64 {
    vm_rss_kib("self")
}

/// Reads one response to a POST; returns its body.
fn response_body(stream: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).expect("read a head"),
            1,
            "closed mid-head"
        );
        got.push(byte[0]);
    }
    let head = String::from_utf8(got).expect("an ASCII head");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Content-Length in {head:?}"));
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).expect("read the body");
    body
}

backend_tests! {
    fn slow_bodies_hold_their_bytes_and_give_memory_back(backend) {
        let server = TestServer::echo(backend);
        // Warm: the core's first buffers and tables are not the flood's.
        for _ in 0..50 {
            let mut warm = TcpStream::connect(server.addr).expect("connect");
            warm.write_all(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc").expect("send");
            warm.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
            assert_eq!(response_body(&mut warm), b"abc");
        }
        let bodies: Vec<Vec<u8>> = (0..CLIENTS).map(body).collect();
        let requests_before = server.stats().requests;
        let before = rss_kib();

        let mut clients: Vec<TcpStream> = bodies
            .iter()
            .map(|body| {
                let mut c = TcpStream::connect(server.addr).expect("connect");
                let head = format!("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: {BODY}\r\n\r\n");
                c.write_all(&[head.as_bytes(), &body[..FIRST]].concat()).expect("send a head");
                c.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
                c
            })
            .collect();
        wait_until(Duration::from_secs(60), "every head parsed", || server.stats().requests - requests_before, |n| *n as usize >= CLIENTS);
        // The first bytes read too: a moment more, then the peak.
        std::thread::sleep(Duration::from_millis(200));
        let during = rss_kib();
        let per_client = during.saturating_sub(before) * 1024 / CLIENTS as u64;
        println!("{backend}: {per_client} bytes of RSS per client stalled mid-body ({before} -> {during} KiB)");
        assert!(per_client <= 16 * 1024, "{per_client} bytes per stalled client");

        // Nothing lost: each gets its whole body back.
        for (i, c) in clients.iter_mut().enumerate() {
            c.write_all(&bodies[i][FIRST..]).expect("send the rest");
        }
        for (i, c) in clients.iter_mut().enumerate() {
            assert!(response_body(c) == bodies[i], "client {i}'s body came back otherwise");
        }
        drop(clients);
        drop(bodies);
        wait_until(Duration::from_secs(60), "every client gone", || server.stats().active, |n| *n == 0);

        // The core gives back what the flood took: most of it, whatever
        // the allocator keeps for itself.
        let grew = during.saturating_sub(before);
        let back = wait_until(Duration::from_secs(60), "the flood's memory given back", rss_kib, |now| {
            now.saturating_sub(before) <= grew / 4
        });
        println!("{backend}: RSS {before} KiB before, {during} KiB during, {back} KiB after");
    }
}
