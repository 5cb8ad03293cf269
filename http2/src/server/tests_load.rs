//! The server connection under random input, and a timing loop for the
//! results page.

use super::tests::{client_start, headers, ok, open, GET};
use super::{Config, Connection};
use crate::frame::{self, ErrorCode, Setting, StreamId, PREFACE};

#[test]
fn random_and_mutated_input_only_gives_ok_or_err() {
    let mut valid = client_start(&[Setting::InitialWindowSize(100)]);
    frame::write_settings_ack(&mut valid);
    valid.extend(headers(1, GET, false));
    frame::write_data(&mut valid, StreamId(1), b"body", true);
    valid.extend(headers(3, GET, false));
    frame::write_rst(&mut valid, StreamId(3), ErrorCode::Cancel);
    frame::write_window_update(&mut valid, StreamId::ZERO, 1000);
    let mut seed = 0x0bad_cafe_dead_beefu64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut failures = 0;
    for _ in 0..5_000 {
        let mut wire = valid.clone();
        for _ in 0..1 + next() % 3 {
            let at = PREFACE.len() + (next() % (wire.len() - PREFACE.len()) as u64) as usize;
            wire[at] = next() as u8;
        }
        // Fed in random pieces, the unused tail kept as a socket loop would.
        let mut conn = Connection::new(Config::default());
        let mut buf = Vec::new();
        let mut fed = 0;
        while fed < wire.len() {
            let end = (fed + 1 + (next() % 40) as usize).min(wire.len());
            buf.extend_from_slice(&wire[fed..end]);
            fed = end;
            match conn.receive(&buf, |_| {}) {
                Ok(used) => drop(buf.drain(..used)),
                Err(_) => {
                    failures += 1;
                    break;
                }
            }
        }
        let _ = conn.send_data(StreamId(1), b"answer", true);
    }
    assert!(failures > 0);
}

/// Serves `rounds` requests: h2load's repeated request block in, an
/// answer of four fields and a 20-byte body out.
#[inline(never)]
fn serve_requests(conn: &mut Connection, first_stream: u32, rounds: u32, fixed: &[u8]) -> usize {
    let again = [0x82, 0x84, 0x86, 0xc0, 0xbf, 0x90, 0xbe];
    let mut frame = Vec::with_capacity(16);
    let mut written = 0;
    for i in 0..rounds {
        let stream = StreamId(first_stream + 2 * i);
        frame.clear();
        frame::write_headers(&mut frame, stream, &again, true, 16_384);
        if i % 1000 == 0 {
            // The client gives back the connection window the bodies took.
            frame::write_window_update(&mut frame, StreamId::ZERO, 20_000);
        }
        let used = conn.receive(&frame, |_| {}).unwrap();
        conn.send_headers(stream, false, |b| {
            b.status(200);
            b.field(b"content-length", b"20", false);
            b.encoded(fixed);
        })
        .unwrap();
        let sent = conn.send_data(stream, b"{\"message\":\"hello\"}\n", true);
        assert_eq!(sent, Ok(20));
        written += used + conn.output().len();
        conn.output().clear();
    }
    written
}

/// `cargo test -p percore-http2 --release --lib -- --ignored --nocapture serving`
/// (`HPACK_ROUNDS` sets the rounds, fewer under callgrind).
#[test]
#[ignore = "a timing loop, for the numbers in the results; run with --release"]
fn serving_timing() {
    let rounds: u32 = std::env::var("HPACK_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1_000_000);
    let mut conn = open(Config::default(), &[]);
    let first: Vec<u8> = (0..38)
        .map(|i| {
            u8::from_str_radix(
                &"828486418a089d5c0b8170dc780f035383f963e7907a8f9c541c722954d3a5358980aedbeb83"
                    [2 * i..2 * i + 2],
                16,
            )
            .unwrap()
        })
        .collect();
    let mut wire = Vec::new();
    frame::write_headers(&mut wire, StreamId(1), &first, true, 16_384);
    ok(&mut conn, &wire);
    conn.send_headers(StreamId(1), true, |b| b.status(200))
        .unwrap();
    let mut fixed = Vec::new();
    crate::hpack::encode_field(&mut fixed, b"date", b"Sun, 06 Dec 2026 12:00:00 GMT", false);
    crate::hpack::encode_field(&mut fixed, b"content-type", b"application/json", false);
    let start = std::time::Instant::now();
    let written = serve_requests(&mut conn, 3, rounds, &fixed);
    let ns = start.elapsed().as_nanos() as f64 / rounds as f64;
    println!(
        "request in, answer out: {ns:.1} ns ({} bytes a round)",
        written / rounds as usize
    );
    println!("busy connection keeps {} bytes allocated", conn.allocated());
    conn.release_idle();
    println!(
        "idle connection: {} bytes allocated, Connection itself {} bytes",
        conn.allocated(),
        std::mem::size_of::<Connection>()
    );
}
