//! The negotiation's rules one by one, and the coders' round trips and
//! limits.

use super::*;
use crate::ws::CloseCode;

fn offer(values: &[&str]) -> Option<Offer> {
    Offer::first(values.iter().map(|v| v.as_bytes()))
}

#[test]
fn accepts_the_plain_offer_and_its_parameters() {
    assert_eq!(offer(&["permessage-deflate"]), Some(Offer::default()));
    let o = offer(&["permessage-deflate; client_max_window_bits"]).expect("offer");
    assert_eq!(o, Offer::default());
    let o = offer(&[
        "Permessage-Deflate; server_no_context_takeover; client_no_context_takeover; \
         client_max_window_bits=10; server_max_window_bits=\"15\"",
    ])
    .expect("offer");
    assert!(o.server_no_context_takeover && o.client_no_context_takeover);
    assert!(o.server_max_window_bits);
}

#[test]
fn declines_what_it_cannot_honour_and_takes_the_next_offer() {
    // A smaller server window cannot be honoured by the compressor.
    assert_eq!(
        offer(&["permessage-deflate; server_max_window_bits=10"]),
        None
    );
    let o = offer(&[
        "permessage-deflate; server_max_window_bits=10, permessage-deflate",
        "x-other",
    ]);
    assert_eq!(o, Some(Offer::default()));
    // A later field's offer, after another extension.
    let o = offer(&["x-webkit-deflate-frame", "permessage-deflate"]);
    assert_eq!(o, Some(Offer::default()));
    for bad in [
        "permessage-deflate; unknown",
        "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
        "permessage-deflate; server_no_context_takeover=1",
        "permessage-deflate; client_max_window_bits=7",
        "permessage-deflate; client_max_window_bits=16",
        "permessage-deflate; client_max_window_bits=09",
        "permessage-deflate; server_max_window_bits",
        "permessage-deflate; client_max_window_bits=\"15",
        "deflate-frame",
    ] {
        assert_eq!(offer(&[bad]), None, "{bad}");
    }
}

#[test]
fn the_answer_names_what_was_agreed() {
    let o = offer(&["permessage-deflate; server_max_window_bits=15"]).expect("offer");
    let shared = Negotiated::new(o, Deflate::default());
    assert_eq!(
        shared.answer(),
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover; \
         server_max_window_bits=15"
    );
    let keep = Deflate {
        context_takeover: true,
        ..Deflate::default()
    };
    assert_eq!(
        Negotiated::new(Offer::default(), keep).answer(),
        "permessage-deflate"
    );
    let o = offer(&["permessage-deflate; client_no_context_takeover"]).expect("offer");
    assert_eq!(
        Negotiated::new(o, keep).answer(),
        "permessage-deflate; client_no_context_takeover"
    );
}

/// The payload of the frame `encode` wrote, and whether RSV1 was set.
fn unframe(frame: &[u8]) -> (bool, &[u8]) {
    let at = match frame[1] {
        126 => 4,
        127 => 10,
        _ => 2,
    };
    (frame[0] & 0x40 != 0, &frame[at..])
}

fn round_trip(takeover: bool) {
    let config = Deflate {
        context_takeover: takeover,
        ..Deflate::default()
    };
    let n = Negotiated::new(Offer::default(), config);
    let (mut tx, mut rx) = (n.deflater(), n.inflater());
    let text = "the same words again and again; ".repeat(200);
    let mut sizes = Vec::new();
    for _ in 0..3 {
        let mut out = Vec::new();
        tx.encode(0x1, text.as_bytes(), &mut out);
        let (rsv1, payload) = unframe(&out);
        assert!(rsv1);
        assert!(!payload.ends_with(&TAIL), "the tail is stripped");
        sizes.push(payload.len());
        let back = rx.inflate(payload, 1 << 20).expect("inflate");
        assert_eq!(back, text.as_bytes());
    }
    assert!(sizes[0] < text.len() / 10, "{sizes:?}");
    if takeover {
        // The window remembers the first message: the next are smaller.
        assert!(sizes[1] < sizes[0], "{sizes:?}");
    } else {
        assert_eq!(sizes[0], sizes[2], "{sizes:?}");
    }
    // Short messages go as they are.
    let mut out = Vec::new();
    tx.encode(0x2, b"short", &mut out);
    assert_eq!(unframe(&out), (false, &b"short"[..]));
}

#[test]
fn round_trips_with_and_without_context_takeover() {
    round_trip(true);
    round_trip(false);
}

#[test]
fn a_zip_bomb_stops_at_the_limit() {
    let n = Negotiated::new(Offer::default(), Deflate::default());
    let mut tx = n.deflater();
    let zeros = vec![0u8; 8 << 20];
    let mut out = Vec::new();
    tx.encode(0x2, &zeros, &mut out);
    let (_, payload) = unframe(&out);
    assert!(payload.len() < 64 << 10, "{}", payload.len());
    let mut rx = n.inflater();
    let err = rx.inflate(payload, 1 << 20).expect_err("over the limit");
    assert_eq!(err.code, CloseCode::TOO_BIG);
    // Exactly at the limit is fine.
    let back = rx.inflate(payload, 8 << 20).expect("at the limit");
    assert_eq!(back.len(), 8 << 20);
    // Not DEFLATE at all (a reserved block type).
    let err = rx.inflate(&[0xff, 0xff, 0xff], 1024).expect_err("bad data");
    assert_eq!(err.code, CloseCode::INVALID_DATA);
}
