//! The server connection driven by a scripted client: handshake,
//! requests and answers, each limit, and random input.

use super::{Config, Connection, ConnectionError, Event};
use crate::frame::{self, flags, ErrorCode, FrameHeader, Kind, Setting, StreamId, PREFACE};
use crate::hpack::{Decoder, Encoder};

/// An event, owned, to compare.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ev {
    Field(u32, String, String),
    Head {
        stream: u32,
        end_stream: bool,
        trailers: bool,
        too_large: bool,
    },
    Data(u32, Vec<u8>, bool),
    Reset(u32, ErrorCode, bool),
    Capacity(u32),
    GoAway(u32, ErrorCode),
}

fn own(event: Event<'_>) -> Ev {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match event {
        Event::Field {
            stream,
            name,
            value,
            ..
        } => Ev::Field(stream.0, text(name), text(value)),
        Event::Headers {
            stream,
            end_stream,
            trailers,
            too_large,
        } => Ev::Head {
            stream: stream.0,
            end_stream,
            trailers,
            too_large,
        },
        Event::Data {
            stream,
            data,
            end_stream,
        } => Ev::Data(stream.0, data.to_vec(), end_stream),
        Event::Reset {
            stream,
            code,
            remote,
        } => Ev::Reset(stream.0, code, remote),
        Event::SendCapacity { stream } => Ev::Capacity(stream.0),
        Event::GoAway { last_stream, code } => Ev::GoAway(last_stream.0, code),
    }
}

fn feed(conn: &mut Connection, input: &[u8]) -> (Result<usize, ConnectionError>, Vec<Ev>) {
    let mut events = Vec::new();
    let result = conn.receive(input, |e| events.push(own(e)));
    (result, events)
}

/// Feeds `input`, which must be used whole, and returns the events.
pub(super) fn ok(conn: &mut Connection, input: &[u8]) -> Vec<Ev> {
    let (result, events) = feed(conn, input);
    assert_eq!(result, Ok(input.len()));
    events
}

/// Takes the server's output as (type, flags, stream, payload) frames.
pub(super) fn frames(conn: &mut Connection) -> Vec<(Kind, u8, u32, Vec<u8>)> {
    let out = std::mem::take(conn.output());
    let mut rest = &out[..];
    let mut list = Vec::new();
    while let Some(h) = FrameHeader::parse(rest) {
        let end = 9 + h.length as usize;
        list.push((h.kind, h.flags, h.stream.0, rest[9..end].to_vec()));
        rest = &rest[end..];
    }
    assert!(rest.is_empty(), "the output holds whole frames");
    list
}

fn goaway_code(conn: &mut Connection) -> ErrorCode {
    let list = frames(conn);
    let (kind, _, _, payload) = list.last().expect("a GOAWAY");
    assert_eq!(*kind, Kind::GoAway);
    ErrorCode::from_u32(u32::from_be_bytes(payload[4..8].try_into().unwrap()))
}

pub(super) fn client_start(settings: &[Setting]) -> Vec<u8> {
    let mut wire = PREFACE.to_vec();
    frame::write_settings(&mut wire, settings);
    wire
}

pub(super) fn headers(stream: u32, fields: &[(&str, &str)], end_stream: bool) -> Vec<u8> {
    let mut block = Vec::new();
    let mut b = Encoder::new().block(&mut block);
    for (n, v) in fields {
        b.field(n.as_bytes(), v.as_bytes(), false);
    }
    let mut wire = Vec::new();
    frame::write_headers(&mut wire, StreamId(stream), &block, end_stream, 16_384);
    wire
}

pub(super) const GET: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "a"),
];

/// A connection past the handshake, both SETTINGS acknowledged.
pub(super) fn open(config: Config, settings: &[Setting]) -> Connection {
    let mut conn = Connection::new(config);
    let mut wire = client_start(settings);
    frame::write_settings_ack(&mut wire);
    assert_eq!(ok(&mut conn, &wire), []);
    conn.output().clear();
    conn
}

pub(super) fn rst(stream: u32, code: ErrorCode) -> (Kind, u8, u32, Vec<u8>) {
    (
        Kind::RstStream,
        0,
        stream,
        code.to_u32().to_be_bytes().to_vec(),
    )
}

#[test]
fn handshake_byte_by_byte() {
    let mut conn = Connection::new(Config::default());
    let sent = frames(&mut conn);
    assert_eq!(sent.len(), 1);
    assert_eq!((sent[0].0, sent[0].1, sent[0].2), (Kind::Settings, 0, 0));
    let wire = client_start(&[Setting::HeaderTableSize(0)]);
    let mut pending = Vec::new();
    for &byte in &wire {
        pending.push(byte);
        let (used, events) = feed(&mut conn, &pending);
        pending.drain(..used.unwrap());
        assert!(events.is_empty());
    }
    assert!(pending.is_empty());
    assert_eq!(frames(&mut conn), [(Kind::Settings, flags::ACK, 0, vec![])]);
}

#[test]
fn a_bad_preface_or_first_frame_ends_the_connection() {
    let mut conn = Connection::new(Config::default());
    conn.output().clear();
    let (result, _) = feed(&mut conn, b"GET / HTTP/1.1\r\n");
    assert_eq!(result.unwrap_err().code, ErrorCode::ProtocolError);
    assert_eq!(goaway_code(&mut conn), ErrorCode::ProtocolError);
    assert!(
        feed(&mut conn, PREFACE).0.is_err(),
        "a failed connection reads nothing more"
    );

    let mut conn = Connection::new(Config::default());
    let mut wire = PREFACE.to_vec();
    frame::write_ping(&mut wire, [0; 8], false);
    assert_eq!(
        feed(&mut conn, &wire).0.unwrap_err().code,
        ErrorCode::ProtocolError
    );
}

#[test]
fn a_request_and_its_answer() {
    let mut conn = open(Config::default(), &[]);
    let events = ok(&mut conn, &headers(1, GET, true));
    assert_eq!(events[0], Ev::Field(1, ":method".into(), "GET".into()));
    assert_eq!(events[3], Ev::Field(1, ":authority".into(), "a".into()));
    assert_eq!(
        events[4],
        Ev::Head {
            stream: 1,
            end_stream: true,
            trailers: false,
            too_large: false
        }
    );
    conn.send_headers(StreamId(1), false, |b| {
        b.status(200);
        b.field(b"content-type", b"text/plain", false);
    })
    .unwrap();
    assert_eq!(conn.send_data(StreamId(1), b"hello", true), Ok(5));
    let out = frames(&mut conn);
    assert_eq!(
        (out[0].0, out[0].1, out[0].2),
        (Kind::Headers, flags::END_HEADERS, 1)
    );
    let mut fields = Vec::new();
    Decoder::new()
        .decode(&out[0].3, |n, v, _| fields.push((n.to_vec(), v.to_vec())))
        .unwrap();
    assert_eq!(fields[0], (b":status".to_vec(), b"200".to_vec()));
    assert_eq!(
        out[1],
        (Kind::Data, flags::END_STREAM, 1, b"hello".to_vec())
    );
    assert_eq!(conn.open_streams(), 0, "both ends ended the stream");
    assert_eq!(
        conn.send_data(StreamId(1), b"late", true),
        Err(super::SendError::UnknownStream)
    );
}

#[test]
fn a_body_trailers_and_window_updates() {
    let mut conn = open(Config::default(), &[]);
    let mut wire = headers(
        1,
        &[(":method", "POST"), (":scheme", "http"), (":path", "/")],
        false,
    );
    frame::write_data(&mut wire, StreamId(1), &[7; 40_000][..16_384], false);
    frame::write_data(&mut wire, StreamId(1), &[7; 40_000][16_384..32_768], false);
    wire.extend(headers(1, &[("grpc-status", "0")], true));
    let events = ok(&mut conn, &wire);
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Ev::Data(1, _, false)))
            .count(),
        2
    );
    assert_eq!(
        events.last(),
        Some(&Ev::Head {
            stream: 1,
            end_stream: true,
            trailers: true,
            too_large: false
        })
    );
    assert!(
        frames(&mut conn).is_empty(),
        "nothing is granted before the application releases"
    );
    conn.release(StreamId(1), 32_768);
    // Half the connection window is owed: it is granted; the stream
    // ended, so it gets nothing.
    assert_eq!(
        frames(&mut conn),
        [(Kind::WindowUpdate, 0, 0, 32_768u32.to_be_bytes().to_vec())]
    );
}

#[test]
fn headers_and_continuation_are_joined_and_bounded() {
    let mut conn = open(Config::default(), &[]);
    let mut block = Vec::new();
    let mut b = Encoder::new().block(&mut block);
    for (n, v) in GET {
        b.field(n.as_bytes(), v.as_bytes(), false);
    }
    let mut wire = Vec::new();
    frame::write_headers(&mut wire, StreamId(1), &block, true, 3);
    let events = ok(&mut conn, &wire);
    assert_eq!(events.len(), 5);
    // Another frame inside the block.
    let mut conn = open(Config::default(), &[]);
    let mut wire = Vec::new();
    frame::write_headers(&mut wire, StreamId(1), &block, true, 3);
    let mut ping = Vec::new();
    frame::write_ping(&mut ping, [0; 8], false);
    wire.splice(9 + 3..9 + 3, ping);
    assert_eq!(
        feed(&mut conn, &wire).0.unwrap_err().code,
        ErrorCode::ProtocolError
    );
    // CONTINUATION without HEADERS.
    let mut conn = open(Config::default(), &[]);
    let mut wire = Vec::new();
    frame::write_continuation(&mut wire, StreamId(1), &block, true);
    assert_eq!(
        feed(&mut conn, &wire).0.unwrap_err().code,
        ErrorCode::ProtocolError
    );
    // The flood: empty CONTINUATION frames that never end the block.
    let mut conn = open(Config::default(), &[]);
    let mut wire = Vec::new();
    frame::write_headers(&mut wire, StreamId(1), &block, true, 3);
    wire.truncate(9 + 3);
    for _ in 0..17 {
        frame::write_continuation(&mut wire, StreamId(1), &[], false);
    }
    assert_eq!(
        feed(&mut conn, &wire).0.unwrap_err().code,
        ErrorCode::EnhanceYourCalm
    );
    assert_eq!(goaway_code(&mut conn), ErrorCode::EnhanceYourCalm);
}

#[test]
fn stream_ids_follow_section_5_1_1() {
    let mut conn = open(Config::default(), &[]);
    assert_eq!(
        feed(&mut conn, &headers(2, GET, true)).0.unwrap_err().code,
        ErrorCode::ProtocolError
    );

    let mut conn = open(Config::default(), &[]);
    ok(&mut conn, &headers(5, GET, false));
    // A lower id than one already used, never opened: an unexpected
    // stream identifier.
    let (result, _) = feed(&mut conn, &headers(3, GET, true));
    assert_eq!(result.unwrap_err().code, ErrorCode::ProtocolError);

    // A stream this end reset: trailers still in flight are a stream error.
    let mut conn = open(Config::default(), &[]);
    ok(&mut conn, &headers(5, GET, false));
    conn.reset(StreamId(5), ErrorCode::Cancel);
    ok(&mut conn, &headers(7, GET, false));
    frames(&mut conn);
    assert!(ok(&mut conn, &headers(5, &[("x-t", "1")], true)).is_empty());
    assert_eq!(frames(&mut conn), [rst(5, ErrorCode::StreamClosed)]);
    // DATA on a stream never opened.
    let mut wire = Vec::new();
    frame::write_data(&mut wire, StreamId(9), b"x", false);
    assert_eq!(
        feed(&mut conn, &wire).0.unwrap_err().code,
        ErrorCode::ProtocolError
    );
}

#[test]
fn streams_over_the_limit_are_refused_and_hpack_stays_in_step() {
    let config = Config {
        max_concurrent_streams: 1,
        ..Config::default()
    };
    let mut conn = open(config, &[]);
    ok(&mut conn, &headers(1, GET, false));
    // Stream 3 indexes "x-a: 1" (literal with incremental indexing).
    let mut wire = Vec::new();
    frame::write_headers(
        &mut wire,
        StreamId(3),
        &[0x82, 0x40, 3, b'x', b'-', b'a', 1, b'1'],
        true,
        16_384,
    );
    assert!(ok(&mut conn, &wire).is_empty());
    assert_eq!(frames(&mut conn), [rst(3, ErrorCode::RefusedStream)]);
    conn.reset(StreamId(1), ErrorCode::Cancel);
    assert_eq!(frames(&mut conn), [rst(1, ErrorCode::Cancel)]);
    // Stream 5 refers to the entry the refused block inserted.
    let mut wire = Vec::new();
    // (GET, http, /: static entries 2, 6, 4; then dynamic entry 62.)
    let block = [0x82, 0x86, 0x84, 0xbe];
    frame::write_headers(&mut wire, StreamId(5), &block, true, 16_384);
    let events = ok(&mut conn, &wire);
    assert_eq!(events[3], Ev::Field(5, "x-a".into(), "1".into()));
}

#[test]
fn receive_windows_are_enforced() {
    let config = Config {
        initial_window_size: 100,
        ..Config::default()
    };
    let mut conn = open(config, &[]);
    let mut wire = headers(1, GET, false);
    frame::write_data(&mut wire, StreamId(1), &[0; 101], false);
    let events = ok(&mut conn, &wire);
    assert_eq!(
        events.last(),
        Some(&Ev::Reset(1, ErrorCode::FlowControlError, false))
    );
    assert_eq!(frames(&mut conn), [rst(1, ErrorCode::FlowControlError)]);

    let mut conn = open(Config::default(), &[]);
    let mut wire = headers(1, GET, false);
    wire.extend(headers(3, GET, false));
    for stream in [1, 3] {
        for _ in 0..3 {
            frame::write_data(&mut wire, StreamId(stream), &[0; 16_000], false);
        }
    }
    let (result, _) = feed(&mut conn, &wire);
    assert_eq!(result.unwrap_err().code, ErrorCode::FlowControlError);
}

#[test]
fn send_windows_limit_and_resume() {
    let mut conn = open(
        Config::default(),
        &[
            Setting::InitialWindowSize(10),
            Setting::MaxFrameSize(16_384),
        ],
    );
    ok(&mut conn, &headers(1, GET, true));
    conn.send_headers(StreamId(1), false, |b| b.status(200))
        .unwrap();
    assert_eq!(conn.send_data(StreamId(1), &[1; 25], true), Ok(10));
    assert_eq!(conn.send_capacity(StreamId(1)), 0);
    let mut wire = Vec::new();
    frame::write_window_update(&mut wire, StreamId(1), 5);
    assert_eq!(ok(&mut conn, &wire), [Ev::Capacity(1)]);
    assert_eq!(conn.send_data(StreamId(1), &[1; 15], true), Ok(5));
    // A larger initial window applies to open streams (§6.9.2).
    let mut wire = Vec::new();
    frame::write_settings(&mut wire, &[Setting::InitialWindowSize(20)]);
    assert_eq!(ok(&mut conn, &wire), [Ev::Capacity(0)]);
    assert_eq!(conn.send_data(StreamId(1), &[1; 10], true), Ok(10));
    let out = frames(&mut conn);
    let data: Vec<_> = out
        .iter()
        .filter(|f| f.0 == Kind::Data)
        .map(|f| (f.3.len(), f.1))
        .collect();
    assert_eq!(data, [(10, 0), (5, 0), (10, flags::END_STREAM)]);
    assert_eq!(conn.open_streams(), 0);
    // The connection window may not pass 2^31-1.
    let mut wire = Vec::new();
    frame::write_window_update(&mut wire, StreamId::ZERO, frame::MAX_WINDOW_SIZE);
    assert_eq!(
        feed(&mut conn, &wire).0.unwrap_err().code,
        ErrorCode::FlowControlError
    );
}

#[test]
fn rapid_resets_end_the_connection() {
    let config = Config {
        max_rapid_resets: 5,
        ..Config::default()
    };
    let mut conn = open(config, &[]);
    let reset = |conn: &mut Connection, id: u32| {
        let mut wire = headers(id, GET, true);
        frame::write_rst(&mut wire, StreamId(id), ErrorCode::Cancel);
        feed(conn, &wire)
    };
    for i in 0..5 {
        let (result, events) = reset(&mut conn, 1 + 2 * i);
        assert!(result.is_ok());
        assert_eq!(
            events.last(),
            Some(&Ev::Reset(1 + 2 * i, ErrorCode::Cancel, true))
        );
    }
    // An answered request takes one off the count.
    ok(&mut conn, &headers(11, GET, true));
    conn.send_headers(StreamId(11), true, |b| b.status(204))
        .unwrap();
    assert!(reset(&mut conn, 13).0.is_ok());
    let (result, _) = reset(&mut conn, 15);
    assert_eq!(result.unwrap_err().code, ErrorCode::EnhanceYourCalm);
    assert_eq!(goaway_code(&mut conn), ErrorCode::EnhanceYourCalm);
}

#[test]
fn refused_streams_count_as_rapid_resets() {
    let config = Config {
        max_concurrent_streams: 1,
        max_rapid_resets: 3,
        ..Config::default()
    };
    let mut conn = open(config, &[]);
    ok(&mut conn, &headers(1, GET, false));
    for id in [3, 5, 7] {
        assert!(ok(&mut conn, &headers(id, GET, true)).is_empty());
    }
    let refused = headers(9, GET, true);
    assert_eq!(
        feed(&mut conn, &refused).0.unwrap_err().code,
        ErrorCode::EnhanceYourCalm
    );
}

#[test]
fn a_head_over_the_list_limit_is_flagged_for_431() {
    let config = Config {
        max_header_list_size: 100,
        ..Config::default()
    };
    let mut conn = open(config, &[]);
    let events = ok(
        &mut conn,
        &headers(
            1,
            &[(":method", "GET"), (":path", "/"), ("cookie", "a=b")],
            true,
        ),
    );
    assert_eq!(events.len(), 3);
    assert_eq!(
        events[2],
        Ev::Head {
            stream: 1,
            end_stream: true,
            trailers: false,
            too_large: true
        }
    );
}

#[test]
fn ping_goaway_and_a_long_answer() {
    let mut conn = open(Config::default(), &[]);
    let mut wire = Vec::new();
    frame::write_ping(&mut wire, *b"pingpong", false);
    assert!(ok(&mut conn, &wire).is_empty());
    assert_eq!(
        frames(&mut conn),
        [(Kind::Ping, flags::ACK, 0, b"pingpong".to_vec())]
    );
    ok(&mut conn, &headers(1, GET, true));
    // A block larger than the peer's frame size goes out with CONTINUATION.
    let long = vec![b'v'; 20_000];
    conn.send_headers(StreamId(1), true, |b| {
        b.status(200);
        b.field(b"x-long", &long, false);
    })
    .unwrap();
    let kinds: Vec<_> = frames(&mut conn).iter().map(|f| (f.0, f.1)).collect();
    assert_eq!(
        kinds,
        [
            (Kind::Headers, flags::END_STREAM),
            (Kind::Continuation, flags::END_HEADERS)
        ]
    );
    let mut wire = Vec::new();
    frame::write_goaway(&mut wire, StreamId::ZERO, ErrorCode::NoError, b"");
    assert_eq!(ok(&mut conn, &wire), [Ev::GoAway(0, ErrorCode::NoError)]);
    conn.go_away(ErrorCode::NoError, b"");
    assert!(
        ok(&mut conn, &headers(3, GET, true)).is_empty(),
        "no new stream after GOAWAY"
    );
}

#[test]
fn an_idle_connection_keeps_little() {
    let mut conn = open(Config::default(), &[]);
    ok(&mut conn, &headers(1, GET, true));
    conn.send_headers(StreamId(1), true, |b| b.status(200))
        .unwrap();
    conn.output().clear();
    conn.release_idle();
    assert_eq!(
        conn.allocated(),
        0,
        "the stateless encoder's answers leave no table either"
    );
}
