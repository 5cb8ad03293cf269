//! Deterministic mutation fuzzing (FAULTS A20): random edits of a seed
//! corpus must never panic, never consume past the input, and only ever
//! yield complete requests, "need more", or an error status we expect.

use super::{Event, Machine};
use crate::{header_storage, parse_head, BodyDecoder, BodyKind, Limits};

const ITERATIONS: usize = 100_000;

/// Statuses the protocol core (and the service layer's 408) may answer.
const STATUSES: [u16; 8] = [400, 408, 413, 414, 417, 431, 501, 505];

/// Valid requests plus the FAULTS.md section A payloads (small versions of
/// the oversized ones; the tight limits below make them trip anyway).
const SEEDS: &[&[u8]] = &[
    b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /p?q=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"POST /e HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
    b"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n0\r\nT: v\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx",
    b"GET / HTTP/1.1\nHost: a\n\nGET /2 HTTP/1.1\nHost: a\n\n",
    b"GE T / HTTP/1.1\r\n\r\n",
    b"G=\":<>(e),[T];?\" /get HTTP/1.1\r\nHost: a\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 0\r\n\r\na",
    b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +1_0\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \xa0chunked\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0_2e\r\n5\r\r;ABCD\r\n",
    b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX:POST / HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
    b"GET / HTTP/1.1\r\n Host: a\r\nContent-Length : 5\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-\r\nEncoding: chunked\r\n:\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a\x00b\r\nX: va\rlue\r\n\r\n",
    b"GET / HTTP/1.2\r\nHost: a\r\n\r\n",
    b"GET / HTTP/4294967295.255\r\nHost: a\r\n\r\n",
    b"GET / HTTP/\r\r1.1\r\n\r\nGET /\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\n\r\nInvalid\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: a\r\nExpect: foo\r\nContent-Length: 0\r\n\r\nGET / HTTP/1.1\r\n\r\n",
];

/// The first seeds are valid requests.
const VALID_SEEDS: usize = 6;

/// Fragments that steer mutations toward framing-relevant bytes.
const TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r",
    b":",
    b" ",
    b"\t",
    b";",
    b",",
    b"0",
    b"\0",
    b"\xff",
    b"Content-Length: ",
    b"Transfer-Encoding: chunked\r\n",
    b"Host: a\r\n",
    b"HTTP/1.1",
    b"ffffffffffffffff",
    b"\r\n\r\n",
    b"Connection: close\r\n",
];

/// xorshift64*: tiny, deterministic, and good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    let pos = rng.below(input.len() + 1);
    match rng.below(7) {
        0 if pos < input.len() => input[pos] ^= 1 << rng.below(8),
        1 if pos < input.len() => input[pos] = rng.next() as u8,
        2 if pos < input.len() => {
            let end = (pos + 1 + rng.below(8)).min(input.len());
            input.drain(pos..end);
        }
        3 => {
            let token = TOKENS[rng.below(TOKENS.len())];
            input.splice(pos..pos, token.iter().copied());
        }
        4 if pos < input.len() => {
            let end = (pos + 1 + rng.below(16)).min(input.len());
            let copy = input[pos..end].to_vec();
            input.splice(pos..pos, copy);
        }
        5 => {
            let other = SEEDS[rng.below(SEEDS.len())];
            let from = rng.below(other.len());
            input.truncate(pos);
            input.extend_from_slice(&other[from..]);
        }
        _ => input.insert(pos, rng.next() as u8),
    }
}

/// Tight limits, so the small seeds also exercise every limit path.
fn tight() -> Limits {
    Limits {
        max_request_line: 40,
        max_header_bytes: 120,
        max_field_line: 48,
        max_headers: 4,
        max_body: 16,
        max_chunk_ext: 8,
        max_trailer_bytes: 24,
    }
}

fn check(input: &[u8], limits: Limits, cut: usize) {
    // Direct calls: a head never claims more bytes than it was given.
    let mut storage = header_storage::<100>();
    if let Ok(Some(head)) = parse_head(input, &mut storage, &limits) {
        assert!(head.head_len <= input.len());
        if let BodyKind::Length(n) = head.body {
            assert!(n <= limits.max_body);
        }
        let rest = &input[head.head_len..];
        let d = BodyDecoder::new(head.body, &limits).decode(rest);
        if let Ok(d) = d {
            assert!(d.consumed <= rest.len() && d.data.end <= d.consumed);
        }
    }

    // Through the machine, whole and split (it asserts consumed <= input).
    let mut whole = Machine::new(limits);
    whole.feed(input);
    let mut split = Machine::new(limits);
    split.feed(&input[..cut]);
    split.feed(&input[cut..]);
    whole.finish();
    split.finish();
    for event in whole.events.iter().chain(&split.events) {
        if let Event::Error(s) = event {
            assert!(
                STATUSES.contains(s),
                "status {s} for {:?}",
                String::from_utf8_lossy(input)
            );
        }
    }
    // Splitting may change which error is reported, never what succeeds.
    let ok = |events: &[Event]| {
        events
            .iter()
            .filter(|e| matches!(e, Event::Request { .. }))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ok(&whole.events),
        ok(&split.events),
        "split at {cut}: {:?}",
        String::from_utf8_lossy(input)
    );
    assert_eq!(
        whole.closed,
        split.closed,
        "split at {cut}: {:?}",
        String::from_utf8_lossy(input)
    );
}

#[test]
fn mutated_corpus_never_misbehaves() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..ITERATIONS {
        // Half the time mutate a valid seed, so deep paths (bodies,
        // trailers, pipelining) are reached and not only early rejections.
        let pool = if i % 4 < 2 {
            &SEEDS[..VALID_SEEDS]
        } else {
            SEEDS
        };
        let mut input = pool[rng.below(pool.len())].to_vec();
        for _ in 0..1 + rng.below(4) {
            mutate(&mut rng, &mut input);
        }
        let limits = if i % 2 == 0 {
            Limits::default()
        } else {
            tight()
        };
        let cut = rng.below(input.len() + 1);
        check(&input, limits, cut);
    }
}
