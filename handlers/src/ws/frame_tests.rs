use super::*;

/// A client frame: masked with a fixed key.
fn client(fin: bool, opcode: u8, payload: &[u8]) -> BytesMut {
    let mut out = Vec::new();
    encode_head(&mut out, opcode, payload.len());
    if !fin {
        out[0] &= 0x7f;
    }
    out[1] |= 0x80;
    let mask = [1, 2, 3, 4];
    out.extend_from_slice(&mask);
    let mut body = payload.to_vec();
    unmask(&mut body, mask);
    out.extend_from_slice(&body);
    BytesMut::from(&out[..])
}

fn decode_all(d: &mut Decoder, input: &[u8]) -> Result<Vec<Event>, Violation> {
    let mut buf = BytesMut::from(input);
    let mut events = Vec::new();
    while let Some(e) = d.decode(&mut buf)? {
        events.push(e);
    }
    Ok(events)
}

#[test]
fn a_frame_split_at_every_byte_decodes_once() {
    let frame = client(true, op::TEXT, "héllo wörld".as_bytes());
    for split in 0..frame.len() {
        let mut d = Decoder::new(1 << 20, 1 << 20);
        let mut input = BytesMut::from(&frame[..split]);
        assert_eq!(d.decode(&mut input), Ok(None), "split {split}");
        input.extend_from_slice(&frame[split..]);
        let event = d.decode(&mut input).expect("valid");
        assert_eq!(
            event,
            Some(Event::Message {
                text: true,
                data: Bytes::from("héllo wörld")
            })
        );
        assert!(input.is_empty());
    }
}

#[test]
fn fragments_gather_with_control_frames_between() {
    let mut input = client(false, op::TEXT, "κό".as_bytes());
    input.extend_from_slice(&client(true, op::PING, b"p"));
    // A two-byte character cut between fragments.
    let word = "σμε".as_bytes();
    input.extend_from_slice(&client(false, op::CONTINUATION, &word[..3]));
    input.extend_from_slice(&client(true, op::CONTINUATION, &word[3..]));
    let mut d = Decoder::new(1 << 20, 1 << 20);
    let events = decode_all(&mut d, &input).expect("valid");
    assert_eq!(
        events,
        vec![
            Event::Ping(Bytes::from_static(b"p")),
            Event::Message {
                text: true,
                data: Bytes::from("κόσμε")
            }
        ]
    );
}

#[test]
fn violations_have_their_codes() {
    let mut unmasked = Vec::new();
    encode(&mut unmasked, op::TEXT, b"x");
    let mut rsv = client(true, op::TEXT, b"x");
    rsv[0] |= 0x40;
    let mut bad_close = client(true, op::CLOSE, &[0x03, 0xec]); // 1004
    bad_close.extend_from_slice(&[]);
    let cases: Vec<(&str, BytesMut, u16)> = vec![
        ("unmasked", BytesMut::from(&unmasked[..]), 1002),
        ("rsv", rsv, 1002),
        ("opcode 3", client(true, 3, b""), 1002),
        ("opcode 11", client(true, 11, b""), 1002),
        ("fragmented ping", client(false, op::PING, b""), 1002),
        ("long ping", client(true, op::PING, &[0; 126]), 1002),
        (
            "bare continuation",
            client(true, op::CONTINUATION, b"x"),
            1002,
        ),
        (
            "bad utf-8",
            client(true, op::TEXT, &[0xce, 0xba, 0xff]),
            1007,
        ),
        ("close code 1004", bad_close, 1002),
        ("close one byte", client(true, op::CLOSE, &[3]), 1002),
        (
            "close bad reason",
            client(true, op::CLOSE, &[3, 232, 0xff]),
            1007,
        ),
        ("frame too big", client(true, op::BINARY, &[0; 65]), 1009),
    ];
    for (name, input, code) in cases {
        let mut d = Decoder::new(64, 128);
        let got = decode_all(&mut d, &input).expect_err(name);
        assert_eq!(got.code.0, code, "{name}: {got}");
    }
    // A message over the limit from fragments that each fit.
    let mut input = client(false, op::BINARY, &[0; 64]);
    input.extend_from_slice(&client(false, op::CONTINUATION, &[0; 64]));
    input.extend_from_slice(&client(true, op::CONTINUATION, &[0; 1]));
    let mut d = Decoder::new(64, 128);
    assert_eq!(
        decode_all(&mut d, &input).expect_err("too big").code.0,
        1009
    );
    // A length with its top bit set.
    let mut huge = vec![0x82, 0xff];
    huge.extend_from_slice(&u64::MAX.to_be_bytes());
    huge.extend_from_slice(&[0; 4]);
    let mut d = Decoder::new(64, 128);
    assert_eq!(decode_all(&mut d, &huge).expect_err("huge").code.0, 1002);
    // 2^62 bytes: over the limit, refused before any of it arrives.
    let mut big = vec![0x82, 0xff];
    big.extend_from_slice(&(1u64 << 62).to_be_bytes());
    big.extend_from_slice(&[0; 4]);
    let mut d = Decoder::new(64, 128);
    assert_eq!(decode_all(&mut d, &big).expect_err("big").code.0, 1009);
}

#[test]
fn invalid_text_fails_at_the_fragment_that_brings_it() {
    // 0xf4 0x90 can begin no valid sequence: refused before the end.
    let input = client(false, op::TEXT, &[b'a', 0xf4, 0x90]);
    let mut d = Decoder::new(1 << 20, 1 << 20);
    assert_eq!(
        decode_all(&mut d, &input).expect_err("fail fast").code.0,
        1007
    );
    // A sequence cut at the end of the last fragment is refused.
    let input = client(true, op::TEXT, &[b'a', 0xce]);
    let mut d = Decoder::new(1 << 20, 1 << 20);
    assert_eq!(decode_all(&mut d, &input).expect_err("cut").code.0, 1007);
}

#[test]
fn encoded_lengths_use_the_three_forms() {
    for (len, head) in [(0, 2), (125, 2), (126, 4), (65535, 4), (65536, 10)] {
        let mut out = Vec::new();
        encode(&mut out, op::BINARY, &vec![7; len]);
        assert_eq!(out.len(), head + len, "{len}");
        assert_eq!(out[0], 0x82);
    }
}

#[test]
fn unmask_matches_the_bytewise_rule() {
    let mask = [0x12, 0x34, 0x56, 0x78];
    for len in 0..40 {
        let data: Vec<u8> = (0..len as u8).collect();
        let mut fast = data.clone();
        unmask(&mut fast, mask);
        let slow: Vec<u8> = data
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ mask[i % 4])
            .collect();
        assert_eq!(fast, slow);
    }
}
