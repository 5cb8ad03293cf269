//! Allocations per HTTP/2 request in steady state, on both backends: the
//! count, measured, and a bound that keeps it from growing unseen.
//!
//! HTTP/2 is not free of allocations as HTTP/1 is: 4 a request, measured
//! on both backends. A stream that ends in its first poll (as these do)
//! reuses the room of the one before, and the field block, the output
//! and the answer's buffers are the core's, lent; what is allocated is
//! the connection's stream stores and the request's field list, which
//! an idle connection does not keep (the client here waits for each
//! answer, so the connection is idle between requests). The test prints
//! the count and the first sizes so that a change is seen, and fails
//! past a bound just above the count.
#![cfg(feature = "h2")]

use std::io::{Read, Write};
use std::net::TcpStream;

use percore_test_kit::alloc::*;
use percore_test_kit::*;
use std::sync::atomic::Ordering;

use crate::support::http::*;

/// Allocations per request the test accepts (it measures 4).
const BOUND_PER_REQUEST: u64 = 5;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An HTTP/2 client on one connection that asks `GET /` and reads the
/// answer to its end, one request at a time.
struct H2 {
    s: TcpStream,
    next: u32,
}

impl H2 {
    fn connect(addr: std::net::SocketAddr) -> H2 {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
            .expect("timeout");
        s.set_nodelay(true).expect("nodelay");
        let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        hello.extend(frame(4, 0, 0, &[]));
        s.write_all(&hello).expect("preface");
        H2 { s, next: 1 }
    }

    fn read_frame(&mut self) -> (u8, u8, u32, Vec<u8>) {
        let mut head = [0u8; 9];
        self.s.read_exact(&mut head).expect("a frame head");
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0; len];
        self.s.read_exact(&mut payload).expect("a frame payload");
        let stream = u32::from_be_bytes(head[5..9].try_into().expect("4 bytes")) & 0x7fff_ffff;
        (head[3], head[4], stream, payload)
    }

    /// One `GET /`, read to its end; the DATA received is given back to
    /// the connection's window.
    fn get(&mut self) {
        let id = self.next;
        self.next += 2;
        // :method GET, :scheme http, :path /, :authority t (literal).
        self.s
            .write_all(&frame(1, 0x5, id, &[0x82, 0x86, 0x84, 0x01, 0x01, b't']))
            .expect("a request");
        let mut status_seen = false;
        loop {
            let (kind, flags, stream, payload) = self.read_frame();
            match kind {
                // SETTINGS: acknowledged.
                4 if flags & 1 == 0 => self.s.write_all(&frame(4, 1, 0, &[])).expect("ack"),
                1 if stream == id => status_seen = true,
                0 if stream == id && !payload.is_empty() => {
                    let n = (payload.len() as u32).to_be_bytes();
                    self.s
                        .write_all(&frame(8, 0, 0, &n))
                        .expect("window update");
                }
                _ => {}
            }
            if stream == id && flags & 1 == 1 && (kind == 0 || kind == 1) {
                assert!(status_seen, "the stream ended without its head");
                return;
            }
        }
    }
}

backend_tests! {
    /// 5,000 requests on one HTTP/2 connection after 500 to warm up: the
    /// allocations on the core thread, per request, printed and bounded.
    fn allocations_per_h2_request(backend) {
        let mut config = Config::default();
        config.max_requests = u32::MAX;
        let server = TestServer::start(backend, config, || {
            TRACKED.with(|t| t.set(true));
            HttpEcho
        });
        let mut c = H2::connect(server.addr);
        for _ in 0..500 {
            c.get();
        }
        ALLOCS.store(0, Ordering::Relaxed);
        COUNTING.store(true, Ordering::SeqCst);
        const REQUESTS: u64 = 5_000;
        for _ in 0..REQUESTS {
            c.get();
        }
        COUNTING.store(false, Ordering::SeqCst);
        let allocs = ALLOCS.load(Ordering::Relaxed);
        let sizes: Vec<usize> = SIZES.iter().map(|s| s.load(Ordering::Relaxed)).collect();
        println!("{backend}: the first allocations' sizes: {sizes:?}");
        println!("{backend}: {allocs} allocations over {REQUESTS} HTTP/2 requests ({:.1} a request)", allocs as f64 / REQUESTS as f64);
        assert!(allocs > 0, "the core thread's allocations were not counted");
        assert!(allocs <= BOUND_PER_REQUEST * REQUESTS, "{allocs} allocations over {REQUESTS} requests");
    }
}
