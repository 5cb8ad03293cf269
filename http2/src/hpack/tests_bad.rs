//! Integers, malformed blocks, the header list limit, random input, and
//! a timing loop for the h2load request block.

use super::tests::{decode, hex, Rng};
use super::{huffman, integer, Decoder, Encoder, HpackError};

#[test]
fn integers_of_appendix_c1_and_every_prefix() {
    let mut out = Vec::new();
    integer::encode(&mut out, 10, 5, 0);
    integer::encode(&mut out, 1337, 5, 0);
    integer::encode(&mut out, 42, 8, 0);
    assert_eq!(out, hex("0a 1f9a0a 2a"));
    assert_eq!(integer::decode(&hex("1f9a0a"), 5), Ok((1337, 3)));
    for prefix in 1..=8u8 {
        for value in [
            0,
            1,
            30,
            31,
            127,
            128,
            255,
            256,
            1337,
            65_535,
            1 << 28,
            u32::MAX - 1,
            u32::MAX,
        ] {
            let mut out = Vec::new();
            let high = !((1u16 << prefix) - 1) as u8;
            integer::encode(&mut out, value, prefix, high);
            assert_eq!(out[0] & high, high, "the pattern bits are kept");
            assert_eq!(
                integer::decode(&out, prefix),
                Ok((value, out.len())),
                "{value} with {prefix} bits"
            );
        }
    }
}

#[test]
fn integers_that_are_errors() {
    assert_eq!(integer::decode(&[], 5), Err(HpackError::Truncated));
    assert_eq!(integer::decode(&hex("1f"), 5), Err(HpackError::Truncated));
    assert_eq!(
        integer::decode(&hex("1f 80 80"), 5),
        Err(HpackError::Truncated)
    );
    // 2^32: one past u32.
    assert_eq!(
        integer::decode(&hex("ff 81 fe ff ff 0f"), 8),
        Err(HpackError::IntegerOverflow)
    );
    assert_eq!(
        integer::decode(&hex("ff 80 fe ff ff 0f"), 8),
        Ok((u32::MAX, 6))
    );
    // Zeros that go on: an over-long encoding of a small value.
    assert_eq!(
        integer::decode(&hex("1f 80 80 80 80 80 00"), 5),
        Err(HpackError::IntegerOverflow)
    );
    let mut endless = vec![0x1f];
    endless.extend([0x80; 1000]);
    assert_eq!(
        integer::decode(&endless, 5),
        Err(HpackError::IntegerOverflow)
    );
}

#[test]
fn huffman_strings_that_are_errors() {
    let bad = |s: &str| {
        let mut out = Vec::new();
        huffman::decode(&hex(s), &mut out)
    };
    // '0' is 00000: three padding bits of zeros.
    assert_eq!(bad("00"), Err(HpackError::Huffman));
    // 'a' (00011) then padding of eleven ones: longer than 7 bits.
    assert_eq!(bad("1f ff"), Err(HpackError::Huffman));
    // EOS itself (thirty ones) inside the string.
    assert_eq!(bad("ff ff ff ff"), Err(HpackError::Huffman));
    assert_eq!(bad("1f ff ff ff ff"), Err(HpackError::Huffman));
    // Padding that is not all ones.
    assert_eq!(bad("18"), Err(HpackError::Huffman));
    assert_eq!(bad("1f"), Ok(()));
    assert_eq!(bad(""), Ok(()));
    // Through the decoder: a Huffman value holding EOS.
    assert_eq!(
        decode(&mut Decoder::new(), &hex("04 84 ff ff ff ff")),
        Err(HpackError::Huffman)
    );
}

#[test]
fn malformed_blocks_are_errors() {
    let cases: &[(&str, HpackError)] = &[
        ("80", HpackError::InvalidIndex),
        ("be", HpackError::InvalidIndex),
        ("ff 80 01", HpackError::InvalidIndex),
        ("7f 07 01 61", HpackError::InvalidIndex),
        ("0f 30 01 61", HpackError::InvalidIndex),
        ("ff", HpackError::Truncated),
        ("400a6375", HpackError::Truncated),
        ("41", HpackError::Truncated),
        ("41 05 61", HpackError::Truncated),
        ("40", HpackError::Truncated),
        ("ff ff ff ff ff 0f", HpackError::IntegerOverflow),
        ("41 7f 80 80 80 80 80", HpackError::IntegerOverflow),
        ("3fe21f", HpackError::SizeUpdateTooLarge),
        ("82 20", HpackError::SizeUpdateNotAtStart),
        ("20 20 20 82", HpackError::TooManySizeUpdates),
    ];
    for (block, error) in cases {
        assert_eq!(
            decode(&mut Decoder::new(), &hex(block)),
            Err(*error),
            "block {block}"
        );
        assert_eq!(
            error.error_code(),
            Some(crate::frame::ErrorCode::CompressionError)
        );
    }
    // Two updates in a row are allowed, the last one ruling.
    let mut d = Decoder::new();
    assert_eq!(decode(&mut d, &hex("20 3f e1 1f 82")).unwrap().len(), 1);
    assert_eq!(d.table().max_size(), 4096);
}

#[test]
fn the_header_list_limit_stops_fields_but_keeps_the_table() {
    let mut d = Decoder::new();
    // :method GET (42) + :path / (38) + x: y (34) = 114.
    d.set_max_header_list_size(100);
    let mut block = hex("82 84");
    block.extend([0x40, 0x01, b'x', 0x01, b'y']); // indexed literal: inserted
    block.extend([0x00, 0x01, b'z', 0x01, b'w']); // not indexed: skipped
    let mut seen = Vec::new();
    let result = d.decode(&block, |n, v, _| seen.push((n.to_vec(), v.to_vec())));
    assert_eq!(result, Err(HpackError::HeaderListTooLarge));
    assert_eq!(result.unwrap_err().error_code(), None);
    assert_eq!(
        seen.len(),
        2,
        "only the fields within the limit were passed on"
    );
    assert_eq!(
        d.table().get(1),
        Some((&b"x"[..], &b"y"[..])),
        "the table stayed in step"
    );
    // The connection goes on: the next block may use the entry.
    let f = decode(&mut d, &hex("be")).unwrap();
    assert_eq!(f, [(b"x".to_vec(), b"y".to_vec(), false)]);
}

/// Every valid block the tests know, to mutate.
fn seeds() -> Vec<Vec<u8>> {
    let mut blocks: Vec<Vec<u8>> = [
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6",
        "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
        "1008 7061 7373 776f 7264 0673 6563 7265 74",
        "3fe1 01 4803 3330 37c1 c0bf",
        H2LOAD_FIRST,
    ]
    .iter()
    .map(|s| hex(s))
    .collect();
    let mut block = Vec::new();
    let mut fields = Encoder::new().block(&mut block);
    fields.status(302);
    fields.field(b"x-long", &[b'q'; 300], false);
    fields.field(b"set-cookie", b"a=b", true);
    blocks.push(block);
    blocks
}

#[test]
fn random_and_mutated_blocks_only_give_ok_or_err() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let seeds = seeds();
    let mut outcomes = [0usize; 2];
    for round in 0..20_000 {
        let block: Vec<u8> = if round % 2 == 0 {
            let len = rng.below(64);
            (0..len).map(|_| rng.next() as u8).collect()
        } else {
            let mut block = seeds[rng.below(seeds.len())].clone();
            for _ in 0..1 + rng.below(4) {
                match rng.below(4) {
                    0 if !block.is_empty() => {
                        let at = rng.below(block.len());
                        block[at] = rng.next() as u8;
                    }
                    1 if !block.is_empty() => {
                        let at = rng.below(block.len());
                        block[at] ^= 1 << rng.below(8);
                    }
                    2 => block.truncate(rng.below(block.len() + 1)),
                    _ => block.insert(rng.below(block.len() + 1), rng.next() as u8),
                }
            }
            block
        };
        // A fresh decoder, and one that carries a table from a previous block.
        let mut fresh = Decoder::new();
        fresh.set_max_header_list_size(1 + rng.below(4096));
        let result = fresh.decode(&block, |_, _, _| {});
        outcomes[result.is_ok() as usize] += 1;
        let mut warm = Decoder::new();
        let _ = warm.decode(&seeds[2], |_, _, _| {});
        let _ = warm.decode(&block, |_, _, _| {});
        assert!(warm.table().size() <= warm.table().max_size());
    }
    assert!(
        outcomes[0] > 0 && outcomes[1] > 0,
        "both outcomes were exercised: {outcomes:?}"
    );
}

/// h2load's first request (nghttp2 1.59), as its encoder writes it:
/// Huffman strings, `:authority`, `accept` and `user-agent` indexed.
const H2LOAD_FIRST: &str =
    "828486418a089d5c0b8170dc780f035383f963e7907a8f9c541c722954d3a5358980aedbeb83";
/// The same request again: seven bytes, three of them dynamic indexes.
const H2LOAD_AGAIN: &str = "828486c0bf90be";

#[test]
fn the_h2load_request_decodes() {
    let mut d = Decoder::new();
    let first = decode(&mut d, &hex(H2LOAD_FIRST)).unwrap();
    let again = decode(&mut d, &hex(H2LOAD_AGAIN)).unwrap();
    assert_eq!(first, again);
    assert_eq!(
        first[3],
        (b":authority".to_vec(), b"127.0.0.1:8080".to_vec(), false)
    );
    assert_eq!(first[6].1, b"h2load nghttp2/1.59.0");
    assert_eq!(d.table().len(), 3);
}

/// Decodes `block` `rounds` times, each on a new decoder.
#[inline(never)]
fn decode_fresh(block: &[u8], rounds: u32) -> usize {
    let mut count = 0;
    for _ in 0..rounds {
        let mut d = Decoder::new();
        d.decode(std::hint::black_box(block), |n, v, _| {
            count += n.len() + v.len()
        })
        .unwrap();
    }
    count
}

/// Decodes `block` `rounds` times on one decoder.
#[inline(never)]
fn decode_warm(d: &mut Decoder, block: &[u8], rounds: u32) -> usize {
    let mut count = 0;
    for _ in 0..rounds {
        d.decode(std::hint::black_box(block), |n, v, _| {
            count += n.len() + v.len()
        })
        .unwrap();
    }
    count
}

/// Encodes a typical answer `rounds` times; with `fixed`, date and
/// content-type come pre-encoded.
#[inline(never)]
fn encode_answer(out: &mut Vec<u8>, fixed: Option<&[u8]>, rounds: u32) -> usize {
    let mut enc = Encoder::new();
    let mut count = 0;
    for _ in 0..rounds {
        out.clear();
        let mut b = enc.block(out);
        b.status(200);
        b.field(b"content-length", b"20", false);
        match fixed {
            Some(fixed) => b.encoded(std::hint::black_box(fixed)),
            None => {
                b.field(b"date", b"Sun, 06 Dec 2026 12:00:00 GMT", false);
                b.field(b"content-type", b"application/json", false);
            }
        }
        count += std::hint::black_box(&*out).len();
    }
    count
}

/// The numbers of the crate's results page:
/// `cargo test -p percore-http2 --release --lib -- --ignored --nocapture timing`.
/// `HPACK_ROUNDS` sets the rounds (fewer under callgrind).
#[test]
#[ignore = "a timing loop, for the numbers in the results; run with --release"]
fn timing_of_the_h2load_request() {
    let first = hex(H2LOAD_FIRST);
    let again = hex(H2LOAD_AGAIN);
    let rounds: u32 = std::env::var("HPACK_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1_000_000);
    let per = |start: std::time::Instant| start.elapsed().as_nanos() as f64 / rounds as f64;

    let start = std::time::Instant::now();
    let mut count = decode_fresh(&first, rounds);
    let fresh_ns = per(start);

    let mut d = Decoder::new();
    d.decode(&first, |_, _, _| {}).unwrap();
    let start = std::time::Instant::now();
    count += decode_warm(&mut d, &again, rounds);
    let again_ns = per(start);

    let mut warm = Decoder::new();
    let start = std::time::Instant::now();
    count += decode_warm(&mut warm, &first, rounds);
    let warm_ns = per(start);

    let mut out = Vec::with_capacity(64);
    let start = std::time::Instant::now();
    count += encode_answer(&mut out, None, rounds);
    let encode_ns = per(start);
    let len = out.len();

    let mut fixed = Vec::new();
    super::encode_field(&mut fixed, b"date", b"Sun, 06 Dec 2026 12:00:00 GMT", false);
    super::encode_field(&mut fixed, b"content-type", b"application/json", false);
    let start = std::time::Instant::now();
    count += encode_answer(&mut out, Some(&fixed), rounds);
    let fixed_ns = per(start);

    println!("decode first block, new decoder:      {fresh_ns:6.1} ns");
    println!("decode second block (dynamic refs):   {again_ns:6.1} ns");
    println!("decode first block, again and again:  {warm_ns:6.1} ns");
    println!("encode answer, 4 fields ({len} bytes):  {encode_ns:6.1} ns");
    println!("same, date and content-type pre-encoded: {fixed_ns:6.1} ns");
    println!(
        "after both blocks the decoder keeps {} bytes allocated ({} entries, size {})",
        d.allocated(),
        d.table().len(),
        d.table().size()
    );
    println!(
        "a decoder whose 4096-octet table is full keeps {} bytes",
        warm.allocated()
    );
    println!(
        "sizes: Decoder {} bytes, Encoder {} bytes (no heap)",
        std::mem::size_of::<Decoder>(),
        std::mem::size_of::<Encoder>()
    );
    assert!(count > 0);
}
