//! A conformance table after the Autobahn|Testsuite's cases 1–7 and 9
//! (framing, ping/pong, reserved bits, opcodes, fragmentation, UTF-8,
//! close handling, limits), each row a client's bytes and the outcome
//! RFC 6455 requires, run against the echo on both backends (FAULTS
//! M2, M3). `benches/results/ws-conformance.md` keeps the table.

use crate::support;

use percore_handlers::ws::WsConfig;
use percore_test_kit::*;
use support::ws::*;

/// What the server must do.
enum Want {
    /// Answer with these frames (opcode, payload), and stay open.
    Frames(Vec<(u8, Vec<u8>)>),
    /// Close with this code, then end the stream.
    Close(u16),
}

struct Case {
    id: &'static str,
    what: &'static str,
    send: Vec<u8>,
    want: Want,
}

fn f(opcode: u8, payload: &[u8]) -> Vec<u8> {
    client_frame(true, 0, opcode, true, payload)
}

fn frag(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    client_frame(fin, 0, opcode, true, payload)
}

fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

fn echo(opcode: u8, payload: &[u8]) -> Want {
    Want::Frames(vec![(opcode, payload.to_vec())])
}

fn close_with(code: u16, reason: &[u8]) -> Vec<u8> {
    let mut p = code.to_be_bytes().to_vec();
    p.extend_from_slice(reason);
    f(8, &p)
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let mut add = |id, what, send, want| {
        cases.push(Case {
            id,
            what,
            send,
            want,
        })
    };
    // 1: framing.
    for (id, len) in [
        ("1.1.1", 0),
        ("1.1.2", 125),
        ("1.1.3", 126),
        ("1.1.4", 127),
        ("1.1.5", 128),
        ("1.1.6", 65535),
        ("1.1.7", 65536),
    ] {
        let text = vec![b'*'; len];
        add(
            id,
            "text of a length at a size boundary",
            f(1, &text),
            echo(1, &text),
        );
    }
    for (id, len) in [
        ("1.2.1", 0),
        ("1.2.2", 125),
        ("1.2.6", 65535),
        ("1.2.7", 65536),
    ] {
        let bin = vec![0xfe; len];
        add(
            id,
            "binary of a length at a size boundary",
            f(2, &bin),
            echo(2, &bin),
        );
    }
    // 2: pings and pongs.
    add(
        "2.1",
        "ping without payload: pong",
        f(9, b""),
        echo(10, b""),
    );
    add(
        "2.2",
        "ping with text: pong echoes it",
        f(9, b"Hello, world!"),
        echo(10, b"Hello, world!"),
    );
    add(
        "2.3",
        "ping with binary",
        f(9, &[0, 0xff, 0xfe, 0xfd]),
        echo(10, &[0, 0xff, 0xfe, 0xfd]),
    );
    add(
        "2.4",
        "ping of 125 bytes",
        f(9, &[0xfe; 125]),
        echo(10, &[0xfe; 125]),
    );
    add(
        "2.5",
        "ping of 126 bytes: 1002",
        f(9, &[0xfe; 126]),
        Want::Close(1002),
    );
    add(
        "2.6",
        "unsolicited pong: ignored",
        cat(&[f(10, b"x"), f(1, b"after")]),
        echo(1, b"after"),
    );
    add(
        "2.7",
        "ten pings: ten pongs, in order",
        (0..10u8).map(|i| f(9, &[i])).collect::<Vec<_>>().concat(),
        Want::Frames((0..10u8).map(|i| (10, vec![i])).collect()),
    );
    // 3: reserved bits.
    for (id, rsv) in [("3.1", 1), ("3.2", 2), ("3.3", 3), ("3.4", 4), ("3.7", 7)] {
        add(
            id,
            "reserved bits set: 1002",
            client_frame(true, rsv, 1, true, b"x"),
            Want::Close(1002),
        );
    }
    add(
        "3.6",
        "reserved bit on a ping: 1002",
        client_frame(true, 6, 9, true, b""),
        Want::Close(1002),
    );
    // 4: opcodes.
    for (id, opcode) in [
        ("4.1.1", 3),
        ("4.1.2", 4),
        ("4.1.3", 5),
        ("4.1.4", 6),
        ("4.1.5", 7),
        ("4.2.1", 11),
        ("4.2.2", 12),
        ("4.2.3", 13),
        ("4.2.4", 14),
        ("4.2.5", 15),
    ] {
        add(
            id,
            "reserved opcode: 1002",
            f(opcode, b""),
            Want::Close(1002),
        );
    }
    add(
        "4.1.x",
        "valid echo, then a reserved opcode: echo, then 1002",
        cat(&[f(1, b"ok"), f(5, b"")]),
        Want::Frames(vec![
            (1, b"ok".to_vec()),
            (8, 1002u16.to_be_bytes().to_vec()),
        ]),
    );
    // 5: fragmentation.
    add(
        "5.1",
        "fragmented ping: 1002",
        cat(&[frag(false, 9, b"a"), frag(true, 0, b"b")]),
        Want::Close(1002),
    );
    add(
        "5.2",
        "fragmented pong: 1002",
        cat(&[frag(false, 10, b"a"), frag(true, 0, b"b")]),
        Want::Close(1002),
    );
    add(
        "5.3",
        "text in two fragments",
        cat(&[frag(false, 1, b"frag"), frag(true, 0, b"ment")]),
        echo(1, b"fragment"),
    );
    add(
        "5.6",
        "a ping between fragments: pong first",
        cat(&[frag(false, 1, b"frag"), f(9, b"p"), frag(true, 0, b"ment")]),
        Want::Frames(vec![(10, b"p".to_vec()), (1, b"fragment".to_vec())]),
    );
    add(
        "5.9",
        "continuation without a message: 1002",
        frag(true, 0, b"x"),
        Want::Close(1002),
    );
    add(
        "5.11",
        "continuation after a whole message: 1002",
        cat(&[f(1, b"a"), frag(true, 0, b"b")]),
        Want::Frames(vec![
            (1, b"a".to_vec()),
            (8, 1002u16.to_be_bytes().to_vec()),
        ]),
    );
    add(
        "5.15",
        "new text inside a fragmented one: 1002",
        cat(&[frag(false, 1, b"a"), frag(false, 1, b"b")]),
        Want::Close(1002),
    );
    add(
        "5.19",
        "one hundred 1-byte fragments",
        cat(&[
            vec![frag(false, 2, b"a")],
            (0..98).map(|_| frag(false, 0, b"b")).collect(),
            vec![frag(true, 0, b"c")],
        ]
        .concat()),
        echo(2, &cat(&[b"a".to_vec(), vec![b'b'; 98], b"c".to_vec()])),
    );
    add(
        "5.20",
        "empty fragments",
        cat(&[frag(false, 1, b""), frag(false, 0, b""), frag(true, 0, b"")]),
        echo(1, b""),
    );
    // 6: UTF-8.
    let hello = "Hello-µ@ßöäüàá-UTF-8!!".as_bytes();
    add(
        "6.2.1",
        "valid UTF-8 in one frame",
        f(1, hello),
        echo(1, hello),
    );
    add(
        "6.2.3",
        "valid UTF-8 split inside a character",
        cat(&[frag(false, 1, &hello[..7]), frag(true, 0, &hello[7..])]),
        echo(1, hello),
    );
    add(
        "6.2.4",
        "valid UTF-8 one byte per fragment",
        cat(&hello
            .iter()
            .enumerate()
            .map(|(i, b)| frag(i + 1 == hello.len(), if i == 0 { 1 } else { 0 }, &[*b]))
            .collect::<Vec<_>>()),
        echo(1, hello),
    );
    add(
        "6.3.1",
        "invalid UTF-8 in one frame: 1007",
        f(
            1,
            &[
                0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xcf, 0x83, 0xce, 0xbc, 0xce, 0xb5, 0xed, 0xa0, 0x80,
                0x65, 0x64, 0x69, 0x74, 0x65, 0x64,
            ],
        ),
        Want::Close(1007),
    );
    add(
        "6.3.2",
        "invalid UTF-8 across fragments: 1007",
        cat(&[
            frag(false, 1, &[0xce, 0xba, 0xe1]),
            frag(true, 0, &[0xbd, 0xff]),
        ]),
        Want::Close(1007),
    );
    add(
        "6.4.1",
        "invalid UTF-8 fails at its fragment (fail fast)",
        cat(&[frag(false, 1, &[0xce, 0xba, 0xf4, 0x90])]),
        Want::Close(1007),
    );
    add(
        "6.6",
        "overlong encoding: 1007",
        f(1, &[0xc0, 0xaf]),
        Want::Close(1007),
    );
    add(
        "6.8",
        "a surrogate: 1007",
        f(1, &[0xed, 0xa0, 0x80]),
        Want::Close(1007),
    );
    add(
        "6.9",
        "above U+10FFFF: 1007",
        f(1, &[0xf4, 0x90, 0x80, 0x80]),
        Want::Close(1007),
    );
    add(
        "6.10",
        "a character cut at the message's end: 1007",
        f(1, &[b'a', 0xe2, 0x82]),
        Want::Close(1007),
    );
    add(
        "6.11",
        "U+FFFF and U+10FFFF are valid",
        f(1, "\u{ffff}\u{10ffff}".as_bytes()),
        echo(1, "\u{ffff}\u{10ffff}".as_bytes()),
    );
    // 7: closing.
    add(
        "7.1.1",
        "close after an echo: the close is echoed",
        cat(&[f(1, b"x"), close_with(1000, b"")]),
        Want::Frames(vec![
            (1, b"x".to_vec()),
            (8, 1000u16.to_be_bytes().to_vec()),
        ]),
    );
    add(
        "7.1.3",
        "data after the close: dropped",
        cat(&[close_with(1000, b""), f(1, b"late")]),
        Want::Frames(vec![(8, 1000u16.to_be_bytes().to_vec())]),
    );
    add(
        "7.3.1",
        "close without a payload: empty close back",
        f(8, b""),
        Want::Frames(vec![(8, Vec::new())]),
    );
    add(
        "7.3.2",
        "close with a 1-byte payload: 1002",
        f(8, &[3]),
        Want::Close(1002),
    );
    add(
        "7.3.4",
        "close with a reason",
        close_with(1000, b"Hello World!"),
        Want::Frames(vec![(8, 1000u16.to_be_bytes().to_vec())]),
    );
    add(
        "7.3.6",
        "close over 125 bytes: 1002",
        f(8, &[b'x'; 126]),
        Want::Close(1002),
    );
    add(
        "7.5.1",
        "close reason not UTF-8: 1007",
        close_with(1000, &[0xce, 0xba, 0xff]),
        Want::Close(1007),
    );
    for code in [
        1000u16, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999,
    ] {
        add(
            "7.7.x",
            "a valid close code is echoed",
            close_with(code, b""),
            Want::Frames(vec![(8, code.to_be_bytes().to_vec())]),
        );
    }
    for code in [
        0u16, 999, 1004, 1005, 1006, 1016, 1100, 2000, 2999, 5000, 65535,
    ] {
        add(
            "7.9.x",
            "an invalid close code: 1002",
            close_with(code, b""),
            Want::Close(1002),
        );
    }
    // 9: large messages (within the table's 16 MiB limit).
    let big = vec![b'*'; 1 << 20];
    add("9.1.3", "a 1 MiB text message", f(1, &big), echo(1, &big));
    let bin = vec![0xfe; 4 << 20];
    add("9.2.4", "a 4 MiB binary message", f(2, &bin), echo(2, &bin));
    let pieces: Vec<Vec<u8>> = bin
        .chunks(64 << 10)
        .enumerate()
        .map(|(i, c)| frag(i == 63, if i == 0 { 2 } else { 0 }, c))
        .collect();
    add(
        "9.4.x",
        "4 MiB in 64 KiB fragments",
        cat(&pieces),
        echo(2, &bin),
    );
    // Unmasked and oversized (FAULTS M2, M3).
    add(
        "M2",
        "an unmasked client frame: 1002",
        client_frame(true, 0, 1, false, b"x"),
        Want::Close(1002),
    );
    let mut huge = vec![0x82, 0xff];
    huge.extend_from_slice(&u64::MAX.to_be_bytes());
    huge.extend_from_slice(&[0; 4]);
    add(
        "M3",
        "a length of 2^64-1 (top bit set): 1002",
        huge,
        Want::Close(1002),
    );
    let mut over = vec![0x82, 0xff];
    over.extend_from_slice(&(1u64 << 62).to_be_bytes());
    over.extend_from_slice(&[0; 4]);
    add(
        "M3",
        "a frame claiming 2^62 bytes: 1009 before any arrives",
        over,
        Want::Close(1009),
    );
    add(
        "M3",
        "a frame over max_frame: 1009",
        f(2, &vec![0; (16 << 20) + 1]),
        Want::Close(1009),
    );
    let parts: Vec<Vec<u8>> = (0..17)
        .map(|i| frag(i == 16, if i == 0 { 2 } else { 0 }, &vec![0; 1 << 20]))
        .collect();
    add(
        "M3",
        "fragments over max_message: 1009",
        cat(&parts),
        Want::Close(1009),
    );
    cases
}

/// Runs one case on a fresh connection; `Err` says how it failed.
fn run(addr: std::net::SocketAddr, case: &Case) -> Result<(), String> {
    let mut c = WsClient::new(connect(addr));
    c.handshake("/echo", "");
    judge(&mut c, case)
}

/// Sends a case's bytes on a WebSocket just opened and judges what comes
/// back.
fn judge<S: std::io::Read + std::io::Write>(
    c: &mut WsClient<S>,
    case: &Case,
) -> Result<(), String> {
    // A write error is fine: the server may close before all of it came.
    let _ = std::io::Write::write_all(&mut c.stream, &case.send);
    match &case.want {
        Want::Frames(frames) => {
            for (opcode, payload) in frames {
                let got = c
                    .frame()
                    .map_err(|e| format!("wanted opcode {opcode}: {e}"))?;
                let same = match *opcode {
                    // A close is judged by its code (its reason is free).
                    8 => {
                        got.opcode == 8
                            && got.close_code()
                                == Frame {
                                    fin: true,
                                    opcode: 8,
                                    payload: payload.clone(),
                                }
                                .close_code()
                    }
                    _ => got.opcode == *opcode && &got.payload == payload,
                };
                if !same || !got.fin {
                    return Err(format!(
                        "wanted opcode {opcode} ({} bytes), got {} ({} bytes)",
                        payload.len(),
                        got.opcode,
                        got.payload.len()
                    ));
                }
            }
            if frames.last().is_some_and(|(op, _)| *op == 8) {
                // After the close handshake the server ends the stream.
                let after = c.until_closed();
                return if after.is_empty() {
                    Ok(())
                } else {
                    Err(format!("frames after the close: {after:?}"))
                };
            }
            // Still open: a ping is answered.
            c.send_frame(true, 9, b"still");
            match c.frame() {
                Ok(p) if p.opcode == 10 && p.payload == b"still" => Ok(()),
                other => Err(format!("not open after the case: {other:?}")),
            }
        }
        Want::Close(code) => {
            let frames = c.until_closed();
            match frames.iter().find(|f| f.opcode == 8) {
                Some(close) if close.close_code() == *code => Ok(()),
                Some(close) => Err(format!("closed with {}, wanted {code}", close.close_code())),
                None => Err(format!("no close frame, wanted {code}: {frames:?}")),
            }
        }
    }
}

/// The table's limits: 16 MiB messages.
fn table_config() -> WsConfig {
    let mut config = WsConfig::default();
    config.max_frame = 16 << 20;
    config.max_message = 16 << 20;
    config.max_send_queue = 32 << 20;
    config
}

/// The table over HTTP/2.
#[cfg(feature = "h2")]
mod over_h2 {
    use super::*;

    backend_tests! {
        parallel;
        /// Every row of the table over HTTP/2 (RFC 8441): each case on a
        /// stream of one connection, through the `h2` crate's client.
        fn conformance_table_over_h2(backend) {
            let server = ws_server(backend, table_config());
            let h2 = support::ws_h2::H2Client::connect(server.local_addr());
            let mut failed = Vec::new();
            let cases = cases();
            for case in &cases {
                let mut ws = h2.websocket("/echo", &[]);
                if let Err(e) = judge(&mut ws.client, case) {
                    failed.push(format!("{} {}: {e}", case.id, case.what));
                }
            }
            server.shutdown();
            server.join().expect("join");
            assert!(failed.is_empty(), "{} of {} cases failed over HTTP/2:\n{}", failed.len(), cases.len(), failed.join("\n"));
        }
    }
}

backend_tests! {
    parallel;
    /// Every row of the table.
    fn conformance_table(backend) {
        let server = ws_server(backend, table_config());
        let mut failed = Vec::new();
        let cases = cases();
        for case in &cases {
            let verdict = run(server.local_addr(), case);
            println!("| {} | {} | {} |", case.id, case.what, if verdict.is_ok() { "pass" } else { "FAIL" });
            if let Err(e) = verdict {
                failed.push(format!("{} {}: {e}", case.id, case.what));
            }
        }
        server.shutdown();
        server.join().expect("join");
        assert!(failed.is_empty(), "{} of {} cases failed:\n{}", failed.len(), cases.len(), failed.join("\n"));
    }
}
