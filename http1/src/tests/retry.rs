//! When an incomplete head is parsed again ([`HeadRetry`]): a head that
//! arrives a byte at a time costs a number of parses that grows with its
//! lines and the logarithm of its size, not with its bytes, and every
//! verdict is the one the whole head gets.

use super::{request, run, Event, Machine};
use crate::{max_head_len, HeadRetry, Limits};

/// A valid 30 KiB head: 99 fields of 300 bytes each.
fn big_head() -> Vec<u8> {
    let mut head = b"GET /big HTTP/1.1\r\nHost: a\r\n".to_vec();
    for i in 0..99 {
        head.extend_from_slice(format!("X-{i}: ").as_bytes());
        head.extend_from_slice(&[b'v'; 300]);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head
}

fn trickle(input: &[u8]) -> Machine {
    let mut m = Machine::new(Limits::default());
    for byte in input.chunks(1) {
        m.feed(byte);
    }
    m
}

#[test]
fn a_trickled_head_is_parsed_a_few_times_not_once_per_byte() {
    let head = big_head();
    assert!(head.len() > 30_000);
    let m = trickle(&head);
    assert_eq!(m.events, vec![request("GET", "/big", b"")]);
    // Doublings from 1 byte to 30 KiB (15), plus the attempt at the end.
    assert!(
        m.parses <= 20,
        "{} parses for {} bytes",
        m.parses,
        head.len()
    );
}

#[test]
fn trickled_errors_match_the_whole_input() {
    // Over the 8 KiB line limits, with no line ending in sight.
    let long_line = [b"GET /".as_slice(), &[b'a'; 20_000]].concat();
    let long_field = [b"GET / HTTP/1.1\r\nX: ".as_slice(), &[b'v'; 20_000]].concat();
    let cases: [&[u8]; 4] = [
        // Found at once: the first byte is already wrong.
        b"\x00ET / HTTP/1.1\r\nHost: a\r\n\r\n",
        // Found when the head doubles (at 16 KiB), before any line ends.
        &long_line,
        &long_field,
        // Found at the empty line.
        b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x7fb\r\n\r\n",
    ];
    for input in cases {
        let whole = run(input);
        assert!(matches!(whole.as_slice(), [Event::Error(_)]), "{whole:?}");
        let m = trickle(input);
        assert!(m.closed, "{:?}", String::from_utf8_lossy(input));
        assert_eq!(m.events, whole, "{:?}", String::from_utf8_lossy(input));
    }
}

#[test]
fn a_retry_is_due_when_the_head_may_have_ended() {
    let mut retry = HeadRetry::default();
    let max = max_head_len(&Limits::default());
    assert!(retry.due(b"G", max), "the first attempt is always due");
    retry.tried(16);
    let line = b"GET / HTTP/1.1\r\nHost: a";
    assert!(!retry.due(line, max), "23 bytes, no empty line yet");
    // The empty line split over the last attempt and the new bytes.
    let mut head = b"GET / HTTP/1.1\r\n\r".to_vec();
    retry.tried(head.len());
    head.push(b'\n');
    assert!(retry.due(&head, max));
    // Bare LF endings too.
    let mut head = b"GET / HTTP/1.1\nHost: a\n".to_vec();
    retry.tried(head.len());
    head.push(b'\n');
    assert!(retry.due(&head, max));
    // A line ending that does not end the head is not enough.
    let mut head = b"GET / HTTP/1.1\r\nHost: a".to_vec();
    retry.tried(head.len());
    head.extend_from_slice(b"\r\nX: 1");
    assert!(!retry.due(&head, max));
    // Doubling.
    retry.tried(100);
    assert!(!retry.due(&[b'a'; 199], max));
    assert!(retry.due(&[b'a'; 200], max));
    // Longer than any head may be.
    retry.tried(max);
    assert!(retry.due(&vec![b'a'; max + 1], max));
    retry.reset();
    assert!(retry.due(b"", max));
}
