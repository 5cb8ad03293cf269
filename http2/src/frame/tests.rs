//! Round trips of every frame type, and every validity rule of §4 and §6.

use super::*;

fn one(wire: &[u8], role: Role) -> Result<Frame<'_>, FrameError> {
    match decode(wire, MAX_MAX_FRAME_SIZE, role)? {
        Some((frame, used)) => {
            assert_eq!(used, wire.len(), "one frame takes the whole input");
            Ok(frame)
        }
        None => panic!("incomplete frame"),
    }
}

/// A raw frame: header fields and payload as given, checks bypassed.
fn raw(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut wire = Vec::new();
    let header = FrameHeader {
        length: payload.len() as u32,
        kind: Kind::from_u8(kind),
        flags,
        stream: StreamId(stream),
    };
    header.write(&mut wire);
    wire.extend_from_slice(payload);
    wire
}

fn error(wire: &[u8]) -> FrameError {
    one(wire, Role::Server).expect_err("the frame breaks a rule")
}

fn conn(code: ErrorCode) -> impl Fn(FrameError) {
    move |e| {
        assert_eq!((e.code, e.scope), (code, Scope::Connection), "{e}");
    }
}

fn on_stream(code: ErrorCode, id: u32) -> impl Fn(FrameError) {
    move |e| {
        assert_eq!(
            (e.code, e.scope),
            (code, Scope::Stream(StreamId(id))),
            "{e}"
        );
    }
}

#[test]
fn every_type_round_trips() {
    let mut w = Vec::new();
    write_data(&mut w, StreamId(1), b"hello", true);
    let data = Data {
        stream: StreamId(1),
        end_stream: true,
        data: b"hello",
        flow_len: 5,
    };
    assert_eq!(one(&w, Role::Server), Ok(Frame::Data(data)));

    let mut w = Vec::new();
    write_headers(&mut w, StreamId(3), b"block", false, 16_384);
    let headers = Headers {
        stream: StreamId(3),
        end_stream: false,
        end_headers: true,
        priority: None,
        block: b"block",
    };
    assert_eq!(one(&w, Role::Server), Ok(Frame::Headers(headers)));

    let spec = PrioritySpec {
        dependency: StreamId(1),
        exclusive: true,
        weight: 200,
    };
    let mut w = Vec::new();
    write_priority(&mut w, StreamId(5), spec);
    assert_eq!(
        one(&w, Role::Server),
        Ok(Frame::Priority(Priority {
            stream: StreamId(5),
            spec
        }))
    );

    let mut w = Vec::new();
    write_rst(&mut w, StreamId(7), ErrorCode::Cancel);
    assert_eq!(
        one(&w, Role::Server),
        Ok(Frame::RstStream(RstStream {
            stream: StreamId(7),
            code: ErrorCode::Cancel
        }))
    );

    let sent = [
        Setting::HeaderTableSize(0),
        Setting::EnablePush(false),
        Setting::MaxConcurrentStreams(100),
        Setting::InitialWindowSize(MAX_WINDOW_SIZE),
        Setting::MaxFrameSize(MAX_MAX_FRAME_SIZE),
        Setting::MaxHeaderListSize(16_384),
        Setting::EnableConnectProtocol(true),
    ];
    let mut w = Vec::new();
    write_settings(&mut w, &sent);
    let Ok(Frame::Settings(settings)) = one(&w, Role::Client) else {
        panic!("settings")
    };
    assert!(!settings.ack);
    assert_eq!(settings.iter().collect::<Vec<_>>(), sent);
    let mut w = Vec::new();
    write_settings_ack(&mut w);
    let Ok(Frame::Settings(ack)) = one(&w, Role::Server) else {
        panic!("settings ack")
    };
    assert!(ack.ack && ack.iter().next().is_none());

    for ack in [false, true] {
        let mut w = Vec::new();
        write_ping(&mut w, *b"abcdefgh", ack);
        assert_eq!(
            one(&w, Role::Server),
            Ok(Frame::Ping(Ping {
                ack,
                data: *b"abcdefgh"
            }))
        );
    }

    let mut w = Vec::new();
    write_goaway(
        &mut w,
        StreamId(9),
        ErrorCode::EnhanceYourCalm,
        b"too many resets",
    );
    let goaway = GoAway {
        last_stream: StreamId(9),
        code: ErrorCode::EnhanceYourCalm,
        debug: b"too many resets",
    };
    assert_eq!(one(&w, Role::Server), Ok(Frame::GoAway(goaway)));

    let mut w = Vec::new();
    write_window_update(&mut w, StreamId::ZERO, MAX_WINDOW_SIZE);
    let update = WindowUpdate {
        stream: StreamId::ZERO,
        increment: MAX_WINDOW_SIZE,
    };
    assert_eq!(one(&w, Role::Server), Ok(Frame::WindowUpdate(update)));

    let mut w = Vec::new();
    write_continuation(&mut w, StreamId(11), b"rest", true);
    let cont = Continuation {
        stream: StreamId(11),
        end_headers: true,
        block: b"rest",
    };
    assert_eq!(one(&w, Role::Server), Ok(Frame::Continuation(cont)));

    // PUSH_PROMISE, padded, as a client reads it.
    let w = raw(
        5,
        flags::PADDED | flags::END_HEADERS,
        1,
        &[2, 0, 0, 0, 2, b'h', b'b', 0, 0],
    );
    let promise = PushPromise {
        stream: StreamId(1),
        promised: StreamId(2),
        end_headers: true,
        block: b"hb",
    };
    assert_eq!(one(&w, Role::Client), Ok(Frame::PushPromise(promise)));
    conn(ErrorCode::ProtocolError)(one(&w, Role::Server).unwrap_err());

    // An unknown type is passed on to be ignored, flags and all.
    let w = raw(0xfa, 0xff, 3, b"whatever");
    assert!(
        matches!(one(&w, Role::Server), Ok(Frame::Unknown(h)) if h.kind == Kind::Unknown(0xfa))
    );

    for code in 0..=0xe {
        assert_eq!(ErrorCode::from_u32(code).to_u32(), code);
    }
    assert_eq!(ErrorCode::from_u32(0xdead), ErrorCode::Unknown(0xdead));
}

#[test]
fn a_block_splits_into_headers_and_continuations() {
    let block: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
    let mut w = Vec::new();
    write_headers(&mut w, StreamId(1), &block, true, 16_384);
    let mut input = &w[..];
    let mut joined = Vec::new();
    let mut kinds = Vec::new();
    while let Some((frame, used)) = decode(input, 16_384, Role::Server).unwrap() {
        match frame {
            Frame::Headers(h) => {
                assert!(h.end_stream && !h.end_headers);
                joined.extend_from_slice(h.block);
                kinds.push(("headers", h.end_headers));
            }
            Frame::Continuation(c) => {
                joined.extend_from_slice(c.block);
                kinds.push(("continuation", c.end_headers));
            }
            other => panic!("unexpected {other:?}"),
        }
        input = &input[used..];
    }
    assert!(input.is_empty());
    assert_eq!(
        kinds,
        [
            ("headers", false),
            ("continuation", false),
            ("continuation", true)
        ]
    );
    assert_eq!(joined, block);
}

#[test]
fn padding_and_priority_fields() {
    // DATA: pad length 3, "ab", three bytes of padding.
    let w = raw(0, flags::PADDED, 1, &[3, b'a', b'b', 0, 0, 0]);
    let Ok(Frame::Data(d)) = one(&w, Role::Server) else {
        panic!("data")
    };
    assert_eq!((d.data, d.flow_len), (&b"ab"[..], 6));
    // Padding that fills the rest exactly leaves empty data.
    let w = raw(0, flags::PADDED, 1, &[2, 0, 0]);
    let Ok(Frame::Data(d)) = one(&w, Role::Server) else {
        panic!("data")
    };
    assert!(d.data.is_empty());
    // HEADERS with both: pad length, priority fields, block, padding.
    let w = raw(
        1,
        flags::PADDED | flags::PRIORITY | flags::END_HEADERS,
        3,
        &[1, 0x80, 0, 0, 1, 15, b'h', 0],
    );
    let Ok(Frame::Headers(h)) = one(&w, Role::Server) else {
        panic!("headers")
    };
    assert_eq!(
        h.priority,
        Some(PrioritySpec {
            dependency: StreamId(1),
            exclusive: true,
            weight: 15
        })
    );
    assert_eq!(h.block, b"h");
}

#[test]
fn stream_zero_where_forbidden_and_nonzero_where_forbidden() {
    for kind in [0u8, 1, 2, 3, 9] {
        let payload: &[u8] = if kind == 2 {
            &[0, 0, 0, 1, 0]
        } else {
            &[0, 0, 0, 0]
        };
        conn(ErrorCode::ProtocolError)(error(&raw(kind, 0, 0, payload)));
    }
    conn(ErrorCode::ProtocolError)(error(&raw(4, 0, 1, &[])));
    conn(ErrorCode::ProtocolError)(error(&raw(6, 0, 1, &[0; 8])));
    conn(ErrorCode::ProtocolError)(error(&raw(7, 0, 1, &[0; 8])));
}

#[test]
fn lengths_each_type_refuses() {
    for len in [0, 7, 9] {
        conn(ErrorCode::FrameSizeError)(error(&raw(6, 0, 0, &vec![0; len])));
    }
    for len in [1, 5, 7, 13] {
        conn(ErrorCode::FrameSizeError)(error(&raw(4, 0, 0, &vec![0; len])));
    }
    conn(ErrorCode::FrameSizeError)(error(&raw(4, flags::ACK, 0, &[0, 3, 0, 0, 0, 1])));
    for len in [3, 5] {
        conn(ErrorCode::FrameSizeError)(error(&raw(8, 0, 1, &vec![1; len])));
        conn(ErrorCode::FrameSizeError)(error(&raw(3, 0, 1, &vec![0; len])));
    }
    for len in [4, 6] {
        on_stream(ErrorCode::FrameSizeError, 3)(error(&raw(2, 0, 3, &vec![0; len])));
    }
    conn(ErrorCode::FrameSizeError)(error(&raw(7, 0, 0, &[0; 7])));
    // PADDED with no room for the pad length, or the priority fields.
    conn(ErrorCode::FrameSizeError)(error(&raw(0, flags::PADDED, 1, &[])));
    conn(ErrorCode::FrameSizeError)(error(&raw(1, flags::PRIORITY, 1, &[0, 0, 0, 3])));
    conn(ErrorCode::FrameSizeError)(error(&raw(
        1,
        flags::PRIORITY | flags::PADDED,
        1,
        &[0, 0, 0, 0, 3],
    )));
}

#[test]
fn padding_longer_than_the_payload() {
    conn(ErrorCode::ProtocolError)(error(&raw(0, flags::PADDED, 1, &[3, 0, 0])));
    conn(ErrorCode::ProtocolError)(error(&raw(0, flags::PADDED, 1, &[255])));
    conn(ErrorCode::ProtocolError)(error(&raw(1, flags::PADDED, 1, &[2, 0x82])));
    // With PRIORITY, the padding may not eat into the priority fields.
    conn(ErrorCode::ProtocolError)(error(&raw(
        1,
        flags::PADDED | flags::PRIORITY,
        1,
        &[1, 0, 0, 0, 3, 16],
    )));
}

#[test]
fn window_update_of_zero() {
    on_stream(ErrorCode::ProtocolError, 5)(error(&raw(8, 0, 5, &[0, 0, 0, 0])));
    conn(ErrorCode::ProtocolError)(error(&raw(8, 0, 0, &[0, 0, 0, 0])));
    // The reserved bit alone is still an increment of 0.
    conn(ErrorCode::ProtocolError)(error(&raw(8, 0, 0, &[0x80, 0, 0, 0])));
}

#[test]
fn self_dependency_is_a_stream_error() {
    on_stream(ErrorCode::ProtocolError, 3)(error(&raw(2, 0, 3, &[0, 0, 0, 3, 0])));
    // On HEADERS the block must still be decoded: the frame parses, and
    // the receiver raises the stream error afterwards.
    let w = raw(1, flags::PRIORITY, 3, &[0, 0, 0, 3, 0, 0x82]);
    let Ok(Frame::Headers(h)) = one(&w, Role::Server) else {
        panic!("headers")
    };
    assert!(h.depends_on_itself());
    assert_eq!(h.block, [0x82]);
}

#[test]
fn settings_values_out_of_range() {
    let setting = |id: u16, value: u32| {
        let mut p = id.to_be_bytes().to_vec();
        p.extend(value.to_be_bytes());
        raw(4, 0, 0, &p)
    };
    conn(ErrorCode::ProtocolError)(error(&setting(2, 2)));
    conn(ErrorCode::FlowControlError)(error(&setting(4, MAX_WINDOW_SIZE + 1)));
    conn(ErrorCode::ProtocolError)(error(&setting(5, 16_383)));
    conn(ErrorCode::ProtocolError)(error(&setting(5, MAX_MAX_FRAME_SIZE + 1)));
    conn(ErrorCode::ProtocolError)(error(&setting(8, 2)));
    // A server may not enable push towards a client.
    conn(ErrorCode::ProtocolError)(one(&setting(2, 1), Role::Client).unwrap_err());
    // Limits themselves, and unknown settings, pass.
    for (id, value) in [
        (2, 1),
        (4, MAX_WINDOW_SIZE),
        (5, 16_384),
        (5, MAX_MAX_FRAME_SIZE),
        (0x99, 7),
    ] {
        assert!(
            one(&setting(id, value), Role::Server).is_ok(),
            "setting {id} = {value}"
        );
    }
    let w = setting(0x99, 7);
    let Ok(Frame::Settings(s)) = one(&w, Role::Server) else {
        panic!("settings")
    };
    assert_eq!(s.iter().count(), 0, "an unknown setting is ignored");
}

#[test]
fn oversize_frames_and_partial_input() {
    let mut w = Vec::new();
    write_data(&mut w, StreamId(1), &[0; 20_000], false);
    let e = decode(&w[..9], 16_384, Role::Server).unwrap_err();
    on_stream(ErrorCode::FrameSizeError, 1)(e);
    let mut w = Vec::new();
    write_headers(&mut w, StreamId(1), &[0; 20_000], false, 20_000);
    conn(ErrorCode::FrameSizeError)(decode(&w, 16_384, Role::Server).unwrap_err());
    let mut w = Vec::new();
    write_ping(&mut w, [1; 8], false);
    for cut in 0..w.len() {
        assert_eq!(
            decode(&w[..cut], 16_384, Role::Server),
            Ok(None),
            "cut at {cut}"
        );
    }
    // A payload of the wrong length for its header is refused, not read past.
    let header = FrameHeader::parse(&w).unwrap();
    conn(ErrorCode::FrameSizeError)(parse(header, &w[9..15], Role::Server).unwrap_err());
}

#[test]
fn random_and_mutated_frames_only_give_ok_or_err() {
    let mut seed = 0x1234_5678_9abc_def1u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut valid = Vec::new();
    write_settings(&mut valid, &[Setting::MaxFrameSize(20_000)]);
    write_headers(&mut valid, StreamId(1), b"abcdef", false, 4);
    write_data(&mut valid, StreamId(1), b"body", true);
    write_goaway(&mut valid, StreamId(1), ErrorCode::NoError, b"");
    let mut oks = 0;
    for _ in 0..20_000 {
        let mut input = valid.clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() % input.len() as u64) as usize;
            input[at] = next() as u8;
        }
        let role = if next() % 2 == 0 {
            Role::Server
        } else {
            Role::Client
        };
        let mut rest = &input[..];
        while let Ok(Some((_, used))) = decode(rest, 20_000, role) {
            oks += 1;
            rest = &rest[used..];
        }
    }
    assert!(oks > 0);
}
