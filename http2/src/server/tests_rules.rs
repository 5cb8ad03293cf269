//! The request rules of RFC 9113 §8.1.1 and RFC 8441 as a connection
//! applies them: which streams are reset, and what the application hears.

use super::tests::{frames, headers, ok, open, rst, Ev, GET};
use super::{Config, Connection};
use crate::frame::{self, ErrorCode, Kind, StreamId};

#[test]
fn extended_connect_is_announced_and_allowed_only_then() {
    const WS: &[(&str, &str)] = &[
        (":method", "CONNECT"),
        (":protocol", "websocket"),
        (":scheme", "https"),
        (":path", "/chat"),
        (":authority", "a"),
    ];
    let config = Config {
        enable_connect_protocol: true,
        ..Config::default()
    };
    let mut conn = Connection::new(config);
    let sent = frames(&mut conn);
    let (kind, _, _, payload) = &sent[0];
    assert_eq!(*kind, Kind::Settings);
    assert!(
        payload.chunks(6).any(|s| s == [0, 8, 0, 0, 0, 1]),
        "SETTINGS_ENABLE_CONNECT_PROTOCOL = 1"
    );
    let mut conn = open(config, &[]);
    let events = ok(&mut conn, &headers(1, WS, false));
    assert_eq!(
        events[1],
        Ev::Field(1, ":protocol".into(), "websocket".into())
    );
    assert!(matches!(events.last(), Some(Ev::Head { stream: 1, .. })));

    let mut conn = open(Config::default(), &[]);
    let sent = Connection::new(Config::default()).output().clone();
    assert!(
        !sent[9..].chunks(6).any(|s| s[..2] == [0, 8]),
        "not announced"
    );
    let events = ok(&mut conn, &headers(1, WS, false));
    assert_eq!(
        events.last(),
        Some(&Ev::Reset(1, ErrorCode::ProtocolError, false))
    );
    assert_eq!(frames(&mut conn), [rst(1, ErrorCode::ProtocolError)]);
}

#[test]
fn a_malformed_head_resets_its_stream_only() {
    let mut conn = open(Config::default(), &[]);
    let bad = [(":method", "GET"), (":path", "/"), ("Upper", "x")];
    let events = ok(&mut conn, &headers(1, &bad, true));
    assert_eq!(
        events.last(),
        Some(&Ev::Reset(1, ErrorCode::ProtocolError, false))
    );
    assert_eq!(frames(&mut conn), [rst(1, ErrorCode::ProtocolError)]);
    assert_eq!(conn.open_streams(), 0);
    // The connection goes on: the next stream is served.
    let events = ok(&mut conn, &headers(3, GET, true));
    assert!(matches!(events.last(), Some(Ev::Head { stream: 3, .. })));
    // Pseudo-header fields in trailers.
    ok(&mut conn, &headers(5, GET, false));
    let events = ok(&mut conn, &headers(5, &[(":path", "/")], true));
    assert_eq!(
        events.last(),
        Some(&Ev::Reset(5, ErrorCode::ProtocolError, false))
    );
}

#[test]
fn content_length_must_match_the_data() {
    let post = |length: &'static str| {
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/"),
            ("content-length", length),
        ]
    };
    let reset = |stream| Ev::Reset(stream, ErrorCode::ProtocolError, false);
    let mut conn = open(Config::default(), &[]);
    // Exact: the body arrives.
    let mut wire = headers(1, &post("5"), false);
    frame::write_data(&mut wire, StreamId(1), b"he", false);
    frame::write_data(&mut wire, StreamId(1), b"llo", true);
    let events = ok(&mut conn, &wire);
    assert_eq!(events.last(), Some(&Ev::Data(1, b"llo".to_vec(), true)));
    // Longer than said.
    let mut wire = headers(3, &post("2"), false);
    frame::write_data(&mut wire, StreamId(3), b"abc", false);
    assert_eq!(ok(&mut conn, &wire).last(), Some(&reset(3)));
    // Shorter, ended by DATA.
    let mut wire = headers(5, &post("4"), false);
    frame::write_data(&mut wire, StreamId(5), b"abc", true);
    assert_eq!(ok(&mut conn, &wire).last(), Some(&reset(5)));
    // Shorter, ended by trailers.
    let mut wire = headers(7, &post("4"), false);
    frame::write_data(&mut wire, StreamId(7), b"abc", false);
    wire.extend(headers(7, &[("x-t", "1")], true));
    assert_eq!(ok(&mut conn, &wire).last(), Some(&reset(7)));
    // A length, and END_STREAM on the HEADERS.
    assert_eq!(
        ok(&mut conn, &headers(9, &post("1"), true)).last(),
        Some(&reset(9))
    );
    // Not a number.
    assert_eq!(
        ok(&mut conn, &headers(11, &post("1x"), false)).last(),
        Some(&reset(11))
    );
    let sent = frames(&mut conn);
    for stream in [3, 5, 7, 9, 11] {
        assert!(
            sent.contains(&rst(stream, ErrorCode::ProtocolError)),
            "{stream}"
        );
    }
    assert_eq!(conn.open_streams(), 1, "stream 1 waits for its answer");
}

#[test]
fn stream_ends_follow_the_exchange() {
    let conn = Connection::new(Config::default());
    assert!(!conn.handshaken());
    let mut conn = open(Config::default(), &[]);
    assert!(conn.handshaken());
    ok(&mut conn, &headers(1, GET, true));
    assert_eq!(conn.stream_ends(StreamId(1)), Some((true, false)));
    conn.send_headers(StreamId(1), true, |b| b.status(204))
        .unwrap();
    assert_eq!(conn.stream_ends(StreamId(1)), None, "closed and forgotten");
    assert!(!conn.is_going_away());
    conn.go_away(ErrorCode::NoError, b"");
    assert!(conn.is_going_away());
}
