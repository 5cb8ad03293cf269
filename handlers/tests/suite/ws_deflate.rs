//! `permessage-deflate` (RFC 7692) on both backends: a table after the
//! Autobahn|Testsuite's cases 12 (compressed echoes of text and binary
//! at several sizes, whole and fragmented) and 13 (the offer's
//! parameters), then the violations (RSV1 where it may not be, a zip
//! bomb, data that is not DEFLATE, compressed text that is not UTF-8).
//! Autobahn sends 1000 messages a case; the rows here send a few, which
//! is enough to carry a window from one message to the next.
//! `benches/results/ws-conformance.md` keeps the table.

use std::net::{SocketAddr, TcpStream};

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};
use percore_handlers::ws::{Deflate, WsConfig};
use percore_test_kit::*;

use crate::support;
use support::ws::*;

const TAIL: [u8; 4] = [0, 0, 0xff, 0xff];

/// A client that speaks the extension as the server's 101 agreed.
struct Peer {
    c: WsClient<TcpStream>,
    /// The server's `Sec-WebSocket-Extensions`, if it sent one.
    answer: Option<String>,
    tx: Compress,
    rx: Decompress,
}

impl Peer {
    fn open(addr: SocketAddr, offer: &str) -> Peer {
        let mut c = WsClient::new(connect(addr));
        let extra = match offer {
            "" => String::new(),
            offer => format!("Sec-WebSocket-Extensions: {offer}\r\n"),
        };
        let head = c.handshake("/echo", &extra);
        let answer = head.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("sec-websocket-extensions")
                .then(|| value.trim().to_owned())
        });
        Peer {
            c,
            answer,
            tx: Compress::new(Compression::new(6), false),
            rx: Decompress::new(false),
        }
    }

    fn agreed(&self, param: &str) -> bool {
        self.answer.as_deref().is_some_and(|a| a.contains(param))
    }

    /// `data` deflated, without the tail; a window kept unless the server
    /// asked for `client_no_context_takeover`.
    fn deflate(&mut self, data: &[u8]) -> Vec<u8> {
        if self.agreed("client_no_context_takeover") {
            self.tx.reset();
        }
        let mut out = Vec::with_capacity(data.len() + 64);
        let start = self.tx.total_in();
        loop {
            let taken = (self.tx.total_in() - start) as usize;
            self.tx
                .compress_vec(&data[taken..], &mut out, FlushCompress::Sync)
                .expect("compress");
            if (self.tx.total_in() - start) as usize == data.len() && out.len() < out.capacity() {
                break;
            }
            out.reserve(out.capacity());
        }
        assert!(out.ends_with(&TAIL));
        out.truncate(out.len() - 4);
        out
    }

    /// Sends a data message, deflated (RSV1 on its first frame) or not,
    /// in `parts` frames.
    fn send(&mut self, opcode: u8, data: &[u8], compress: bool, parts: usize) {
        let payload = if compress {
            self.deflate(data)
        } else {
            data.to_vec()
        };
        let size = payload.len().div_ceil(parts).max(1);
        let pieces: Vec<&[u8]> = match payload.is_empty() {
            true => vec![&[]],
            false => payload.chunks(size).collect(),
        };
        let mut bytes = Vec::new();
        for (i, piece) in pieces.iter().enumerate() {
            let first = i == 0;
            let rsv = if first && compress { 0b100 } else { 0 };
            let op = if first { opcode } else { 0 };
            bytes.extend(client_frame(i + 1 == pieces.len(), rsv, op, true, piece));
        }
        self.c.send_raw(&bytes);
    }

    /// The next data message: its opcode, payload inflated, and whether
    /// it came compressed. `Err` names a close or the stream's end.
    fn recv(&mut self) -> Result<(u8, Vec<u8>, bool), String> {
        let (rsv, first) = self.c.frame_with_rsv().map_err(|e| e.to_string())?;
        if first.opcode == 8 {
            return Err(format!("closed with {}", first.close_code()));
        }
        let mut payload = first.payload;
        let mut fin = first.fin;
        while !fin {
            let (more_rsv, next) = self.c.frame_with_rsv().map_err(|e| e.to_string())?;
            if more_rsv != 0 || next.opcode != 0 {
                return Err(format!("bad continuation: rsv {more_rsv}, {next:?}"));
            }
            payload.extend(next.payload);
            fin = next.fin;
        }
        if rsv & 0b011 != 0 {
            return Err(format!("reserved bits {rsv:#b}"));
        }
        let compressed = rsv & 0b100 != 0;
        if compressed {
            payload = self.inflate(&payload)?;
        }
        Ok((first.opcode, payload, compressed))
    }

    fn inflate(&mut self, payload: &[u8]) -> Result<Vec<u8>, String> {
        if self.agreed("server_no_context_takeover") {
            self.rx.reset(false);
        }
        let input = [payload, &TAIL[..]].concat();
        let mut out = Vec::with_capacity(4 * input.len() + 1024);
        let start = self.rx.total_in();
        loop {
            let taken = (self.rx.total_in() - start) as usize;
            self.rx
                .decompress_vec(&input[taken..], &mut out, FlushDecompress::Sync)
                .map_err(|e| format!("inflate: {e}"))?;
            if (self.rx.total_in() - start) as usize == input.len() && out.len() < out.capacity() {
                return Ok(out);
            }
            out.reserve(out.capacity());
        }
    }

    /// The close code the server ends with.
    fn close_code(&mut self) -> Option<u16> {
        self.c
            .until_closed()
            .iter()
            .find(|f| f.opcode == 8)
            .map(|f| f.close_code())
    }
}

/// What a row sends and wants.
enum Want {
    /// Each message of `(opcode, data, parts)`, sent compressed when the
    /// extension was agreed and `data` is not empty, comes back equal
    /// (compressed when agreed and 64 bytes or more), `rounds` times.
    Echo(Vec<(u8, Vec<u8>, usize)>, usize),
    /// These bytes (after the handshake) get a close with this code.
    Close(fn(&mut Peer) -> Vec<u8>, u16),
}

struct Row {
    id: &'static str,
    what: String,
    offer: &'static str,
    /// The server's answer, `None` for the extension declined.
    answer: Option<&'static str>,
    want: Want,
}

/// Text alike from one message to the next, as Autobahn's case 12.1
/// sends (English-like words); binary of no pattern for 12.4.
fn text(len: usize) -> Vec<u8> {
    let words = "the quick brown fox jumps over a lazy dog; ".as_bytes();
    words.iter().copied().cycle().take(len).collect()
}

fn noise(len: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_u32;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

const PLAIN: &str = "permessage-deflate";

fn rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for (id, len) in [
        ("12.1.1", 16),
        ("12.1.2", 64),
        ("12.1.3", 256),
        ("12.1.4", 1024),
        ("12.1.5", 4096),
        ("12.1.8", 65536),
        ("12.1.9", 131_072),
    ] {
        rows.push(Row {
            id,
            what: format!("text of {len} bytes, compressed both ways"),
            offer: PLAIN,
            answer: Some(PLAIN),
            want: Want::Echo(vec![(1, text(len), 1)], 5),
        });
    }
    for (id, len) in [("12.4.2", 64), ("12.4.5", 4096), ("12.4.8", 65536)] {
        rows.push(Row {
            id,
            what: format!("binary of {len} bytes that does not compress"),
            offer: PLAIN,
            answer: Some(PLAIN),
            want: Want::Echo(vec![(2, noise(len), 1)], 3),
        });
    }
    rows.push(Row {
        id: "12.1.x",
        what: "text of 4096 bytes deflated then cut into 4 frames".into(),
        offer: PLAIN,
        answer: Some(PLAIN),
        want: Want::Echo(vec![(1, text(4096), 4), (2, text(300), 2)], 3),
    });
    for (id, offer, answer) in [
        ("13.1", PLAIN, PLAIN),
        (
            "13.2",
            "permessage-deflate; client_no_context_takeover",
            "permessage-deflate; client_no_context_takeover",
        ),
        ("13.3", "permessage-deflate; client_max_window_bits=8", PLAIN),
        ("13.4", "permessage-deflate; client_max_window_bits=15", PLAIN),
        (
            "13.5",
            "permessage-deflate; client_no_context_takeover; client_max_window_bits=8",
            "permessage-deflate; client_no_context_takeover",
        ),
        (
            "13.7",
            "permessage-deflate; client_max_window_bits=8, \
             permessage-deflate; client_no_context_takeover, permessage-deflate",
            PLAIN,
        ),
        (
            "13.s",
            "permessage-deflate; server_no_context_takeover",
            "permessage-deflate; server_no_context_takeover",
        ),
        (
            "13.w",
            "permessage-deflate; server_max_window_bits=15",
            "permessage-deflate; server_max_window_bits=15",
        ),
        (
            "13.d",
            "permessage-deflate; server_max_window_bits=10, permessage-deflate; client_no_context_takeover",
            "permessage-deflate; client_no_context_takeover",
        ),
    ] {
        rows.push(Row {
            id,
            what: format!("offer `{offer}`"),
            offer,
            answer: Some(answer),
            want: Want::Echo(vec![(1, text(4096), 1), (2, text(1000), 1)], 3),
        });
    }
    for offer in [
        "permessage-deflate; server_max_window_bits=10",
        "permessage-deflate; unknown_parameter",
        "x-webkit-deflate-frame",
    ] {
        rows.push(Row {
            id: "13.n",
            what: format!("offer `{offer}` declined: plain frames"),
            offer,
            answer: None,
            want: Want::Echo(vec![(1, text(4096), 1)], 2),
        });
    }
    let mut close = |id, what: &str, offer, want: fn(&mut Peer) -> Vec<u8>, code| {
        rows.push(Row {
            id,
            what: what.into(),
            offer,
            answer: (offer == PLAIN).then_some(PLAIN),
            want: Want::Close(want, code),
        })
    };
    close(
        "R1",
        "RSV1 without the extension: 1002",
        "",
        |_| client_frame(true, 0b100, 1, true, b"hello"),
        1002,
    );
    close(
        "R2",
        "RSV1 on a continuation: 1002",
        PLAIN,
        |_| {
            let mut b = client_frame(false, 0, 1, true, b"hel");
            b.extend(client_frame(true, 0b100, 0, true, b"lo"));
            b
        },
        1002,
    );
    close(
        "R3",
        "RSV1 on a ping: 1002",
        PLAIN,
        |_| client_frame(true, 0b100, 9, true, b"p"),
        1002,
    );
    close(
        "R4",
        "RSV2 with the extension: 1002",
        PLAIN,
        |_| client_frame(true, 0b010, 2, true, b"x"),
        1002,
    );
    close(
        "M3",
        "a zip bomb (2 MiB of zeros, deflated) over max_message: 1009",
        PLAIN,
        |p| {
            let bomb = p.deflate(&vec![0; 2 << 20]);
            assert!(bomb.len() < 64 << 10, "{}", bomb.len());
            client_frame(true, 0b100, 2, true, &bomb)
        },
        1009,
    );
    close(
        "D1",
        "RSV1 on data that is not DEFLATE: 1007",
        PLAIN,
        |_| client_frame(true, 0b100, 2, true, &[0xff; 16]),
        1007,
    );
    close(
        "6.x",
        "compressed text that is not UTF-8: 1007",
        PLAIN,
        |p| {
            let bad = p.deflate(&[b'a', 0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xff, b'z']);
            client_frame(true, 0b100, 1, true, &bad)
        },
        1007,
    );
    rows
}

/// Runs one row on a fresh connection; `Err` says how it failed.
fn run(addr: SocketAddr, row: &Row) -> Result<(), String> {
    let mut p = Peer::open(addr, row.offer);
    if p.answer.as_deref() != row.answer {
        return Err(format!("answered {:?}, wanted {:?}", p.answer, row.answer));
    }
    let agreed = p.answer.is_some();
    match &row.want {
        Want::Echo(messages, rounds) => {
            for _ in 0..*rounds {
                for (opcode, data, parts) in messages {
                    p.send(*opcode, data, agreed && !data.is_empty(), *parts);
                    let (op, back, compressed) = p.recv()?;
                    if op != *opcode || &back != data {
                        return Err(format!("echo of {} bytes differs", data.len()));
                    }
                    if compressed != (agreed && data.len() >= 64) {
                        return Err(format!(
                            "{} bytes came compressed: {compressed}",
                            data.len()
                        ));
                    }
                }
            }
            p.c.send_frame(true, 8, &1000u16.to_be_bytes());
            match p.close_code() {
                Some(1000) => Ok(()),
                other => Err(format!("close answered with {other:?}")),
            }
        }
        Want::Close(bytes, code) => {
            let bytes = bytes(&mut p);
            // The server may close before all of it came.
            let _ = std::io::Write::write_all(&mut p.c.stream, &bytes);
            match p.close_code() {
                Some(got) if got == *code => Ok(()),
                other => Err(format!("closed with {other:?}, wanted {code}")),
            }
        }
    }
}

backend_tests! {
    parallel;
    /// Every row of the table, against a server that keeps its windows
    /// (context takeover) when the client lets it.
    fn deflate_table(backend) {
        let mut deflate = Deflate::default();
        deflate.context_takeover = true;
        let mut config = WsConfig::default();
        config.deflate = Some(deflate);
        let server = ws_server(backend, config);
        let rows = rows();
        let mut failed = Vec::new();
        for row in &rows {
            let verdict = run(server.local_addr(), row);
            println!("| {} | {} | {} |", row.id, row.what, if verdict.is_ok() { "pass" } else { "FAIL" });
            if let Err(e) = verdict {
                failed.push(format!("{} {}: {e}", row.id, row.what));
            }
        }
        server.shutdown();
        server.join().expect("join");
        assert!(failed.is_empty(), "{} of {} rows failed:\n{}", failed.len(), rows.len(), failed.join("\n"));
    }

    /// The default (the core's shared coders): the server asks for no
    /// context takeover both ways, and messages still round-trip, many
    /// connections interleaved on the one coder pair.
    fn deflate_shared_coders(backend) {
        let server = ws_server(backend, WsConfig::default());
        let want = "permessage-deflate; server_no_context_takeover; client_no_context_takeover";
        let mut peers: Vec<Peer> = (0..3)
            .map(|_| Peer::open(server.local_addr(), "permessage-deflate; client_max_window_bits"))
            .collect();
        for round in 0..3 {
            for (i, p) in peers.iter_mut().enumerate() {
                assert_eq!(p.answer.as_deref(), Some(want));
                let data = text(1000 + 100 * i + round);
                p.send(1, &data, true, 1 + round);
                let (op, back, compressed) = p.recv().expect("echo");
                assert_eq!((op, compressed), (1, true));
                assert_eq!(back, data);
            }
        }
        server.shutdown();
        server.join().expect("join");
    }
}
