//! Unit tests of the response parser: every framing split at every byte,
//! fed a byte at a time, bad responses, and random mutations fed in
//! random pieces.

use super::{ResponseError, ResponseLimits, ResponseParser};

const LIMITS: ResponseLimits = ResponseLimits {
    max_head: 1024,
    max_body: 4096,
};

/// A fed response's status, body and reusability, or its failure.
type Fed = Result<(u16, Vec<u8>, bool), ResponseError>;

/// What feeding `wire` in the pieces that end at `cuts` gives, then, when
/// `eof`, the end of stream: the answer's status, body and reusability, or
/// the failure (`Bad("incomplete")` when neither came); and whether it came
/// before the end of stream.
fn feed_pieces(wire: &[u8], cuts: &[usize], eof: bool) -> (Fed, bool) {
    let mut parser = ResponseParser::new(LIMITS, false);
    let mut buf = Vec::new();
    let mut from = 0;
    for &to in cuts.iter().chain(std::iter::once(&wire.len())) {
        buf.extend_from_slice(&wire[from..to]);
        from = to;
        match parser.feed(&mut buf, false) {
            Ok(Some(a)) => return (Ok((a.status, buf[a.body].to_vec(), a.reusable)), true),
            Ok(None) => {}
            Err(e) => return (Err(e), true),
        }
    }
    let incomplete = Err(ResponseError::Bad("incomplete"));
    if !eof {
        return (incomplete, false);
    }
    let end = match parser.feed(&mut buf, true) {
        Ok(Some(a)) => Ok((a.status, buf[a.body].to_vec(), a.reusable)),
        Ok(None) => incomplete,
        Err(e) => Err(e),
    };
    (end, false)
}

/// Feeds `wire` split at `split`, then ends the stream when `eof`.
fn parse_split(wire: &[u8], split: usize, eof: bool) -> Fed {
    feed_pieces(wire, &[split], eof).0
}

/// (wire bytes, end of stream after them, status, body, reusable).
type Case = (&'static [u8], bool, u16, &'static [u8], bool);

/// Every split of every framing gives the same answer.
#[test]
fn shotgun_framings() {
    let cases: [Case; 5] = [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false, 200, b"hello", true),
        (
            b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n2\r\nde\r\n0\r\nT: v\r\n\r\n",
            false,
            201,
            b"abcde",
            true,
        ),
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close", true, 200, b"until close", false),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n", false, 204, b"", true),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi", false, 200, b"hi", false),
    ];
    for (wire, eof, status, body, reusable) in cases {
        for split in 0..=wire.len() {
            let got = parse_split(wire, split, eof);
            assert_eq!(
                got,
                Ok((status, body.to_vec(), reusable)),
                "{:?} split at {split}",
                String::from_utf8_lossy(wire)
            );
        }
    }
}

/// A response fed a byte at a time (each head scanned again only when it
/// may have ended, see `HeadRetry`) gives the answer it gives whole, and a
/// head that outgrows the limit without ending is still refused.
#[test]
fn byte_at_a_time() {
    let wire = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nX-Long: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\nContent-Length: 5\r\n\r\nhello";
    let mut parser = ResponseParser::new(LIMITS, false);
    let mut buf = Vec::new();
    let mut answer = None;
    for (i, &b) in wire.iter().enumerate() {
        buf.push(b);
        if let Some(a) = parser.feed(&mut buf, false).expect("valid") {
            assert_eq!(i, wire.len() - 1, "complete only at the last byte");
            answer = Some((a.status, buf[a.body].to_vec(), a.reusable));
        }
    }
    assert_eq!(answer, Some((200, b"hello".to_vec(), true)));

    let start = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
    let (refused, buffered) = feed_until_refused(start, 4 * LIMITS.max_head, |b| b.push(b'a'));
    assert_eq!(
        refused,
        Some(ResponseError::Bad("response head over the limit"))
    );
    assert!(buffered <= LIMITS.max_head + 1, "{buffered} bytes buffered");
}

/// Feeds a buffer grown by `grow` before each call, at most `tries` times,
/// until the parser refuses it: the refusal and the bytes then buffered.
fn feed_until_refused(
    mut buf: Vec<u8>,
    tries: usize,
    grow: impl Fn(&mut Vec<u8>),
) -> (Option<ResponseError>, usize) {
    let mut parser = ResponseParser::new(LIMITS, false);
    let refused = (0..tries).find_map(|_| {
        grow(&mut buf);
        parser.feed(&mut buf, false).err()
    });
    (refused, buf.len())
}

/// Bad responses fail with a reason; a short one is truncated; bytes past
/// the response make the connection unusable.
#[test]
fn bad_responses() {
    let bad: [&[u8]; 8] = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"SSH-2.0-OpenSSH_9.2\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 101 Switching\r\n\r\n",
    ];
    for wire in bad {
        let got = parse_split(wire, wire.len(), true);
        assert!(
            matches!(got, Err(ResponseError::Bad(_))),
            "{:?}: {got:?}",
            String::from_utf8_lossy(wire)
        );
    }
    let big = format!("HTTP/1.1 200 OK\r\nX: {}\r\n\r\n", "a".repeat(2000));
    assert_eq!(
        parse_split(big.as_bytes(), 10, false),
        Err(ResponseError::Bad("response head over the limit"))
    );
    // Interim responses count towards the head limit: an endless stream of
    // them is refused once the heads together pass it.
    let (refused, buffered) = feed_until_refused(Vec::new(), 1000, |b| {
        b.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
    });
    assert_eq!(
        refused,
        Some(ResponseError::Bad("response head over the limit"))
    );
    assert!(
        buffered <= LIMITS.max_head + 64,
        "{buffered} bytes buffered"
    );
    let mut early_hints = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n".to_vec();
    early_hints.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    assert_eq!(
        parse_split(&early_hints, 7, false),
        Ok((200, b"ok".to_vec(), true))
    );
    let long = b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n";
    assert!(matches!(
        parse_split(long, 5, false),
        Err(ResponseError::Bad(_))
    ));
    let short = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhal";
    assert_eq!(parse_split(short, 3, true), Err(ResponseError::Truncated));
    assert_eq!(parse_split(b"", 0, true), Err(ResponseError::Closed));
    let extra = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhiEXTRA";
    assert_eq!(
        parse_split(extra, extra.len(), false),
        Ok((200, b"hi".to_vec(), false))
    );
}

/// Random mutations of valid responses (every framing), fed whole and in
/// random pieces: the parser never panics, an answer's body always lies in
/// the buffer, and the pieces give the answer the whole gives, as soon as
/// its last byte is in (a parser that waited for more would leave the
/// request hanging until its deadline).
#[test]
fn mutated_responses_in_pieces() {
    let seeds: [&[u8]; 5] = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n2\r\nde\r\n0\r\nT: v\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close",
        b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi",
    ];
    let tokens: [&[u8]; 10] = [
        b"\r\n",
        b"\n",
        b"\r",
        b":",
        b" ",
        b"0",
        b";",
        b"ffffffff",
        b"\r\n\r\n",
        b"Transfer-Encoding: chunked\r\n",
    ];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n.max(1) as u64) as usize
    };
    for _ in 0..20_000 {
        let mut wire = seeds[next(seeds.len())].to_vec();
        for _ in 0..1 + next(3) {
            let at = next(wire.len() + 1);
            match next(4) {
                0 if at < wire.len() => wire[at] = next(256) as u8,
                1 if at < wire.len() => drop(wire.remove(at)),
                2 => {
                    let token = tokens[next(tokens.len())];
                    wire.splice(at..at, token.iter().copied());
                }
                _ => wire.insert(at, next(256) as u8),
            }
        }
        let (whole, whole_early) = feed_pieces(&wire, &[], true);
        let mut cuts = [next(wire.len() + 1), next(wire.len() + 1)];
        cuts.sort_unstable();
        let (pieces, pieces_early) = feed_pieces(&wire, &cuts, true);
        let shown = String::from_utf8_lossy(&wire);
        for got in [&whole, &pieces] {
            assert_ne!(
                got,
                &Err(ResponseError::Bad("incomplete")),
                "no answer at the end of stream: {shown:?}"
            );
        }
        // Whether the connection is reusable may differ: a piece can end
        // exactly at the response, before the bytes after it arrive.
        let status_and_body = |r: &Fed| r.as_ref().ok().map(|a| (a.0, a.1.clone()));
        if let Some(answer) = status_and_body(&whole) {
            assert_eq!(
                status_and_body(&pieces),
                Some(answer),
                "{shown:?} cut at {cuts:?}"
            );
            assert!(
                !whole_early || pieces_early,
                "{shown:?} cut at {cuts:?}: waited past the last byte"
            );
        }
    }
}

/// What the drain goes by: a response whose head is in says whether the
/// connection may be reused before its body ends (`Connection: close`,
/// HTTP/1.0 and a body running until the end of stream rule it out);
/// before its head, nothing rules it out.
#[test]
fn may_keep_alive_once_the_head_is_in() {
    let cases: [(&[u8], bool); 6] = [
        (b"HTTP/1.1 200 OK\r\nContent-Le", true),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", true),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
            true,
        ),
        (
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 10\r\n\r\nabc",
            false,
        ),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 10\r\n\r\nabc", false),
        (b"HTTP/1.1 200 OK\r\n\r\nuntil the end", false),
    ];
    for (wire, keep) in cases {
        let mut parser = ResponseParser::new(LIMITS, false);
        let mut buf = wire.to_vec();
        assert_eq!(parser.feed(&mut buf, false), Ok(None), "{wire:?}");
        assert_eq!(
            parser.may_keep_alive(),
            keep,
            "{}",
            String::from_utf8_lossy(wire)
        );
    }
}

/// Feeds `wire` in pieces of `piece` bytes, discarding the body from the
/// piece that starts at `discard_at` on (as the drain does with a
/// response a branch had begun to read): the status and reusability, or
/// the failure, and the most the buffer held after the discard began.
fn feed_discarding(wire: &[u8], piece: usize, discard_at: usize) -> (Fed, usize) {
    let mut parser = ResponseParser::new(LIMITS, false);
    let mut buf = Vec::new();
    let mut most = 0;
    for (i, bytes) in wire.chunks(piece).enumerate() {
        if i * piece == discard_at {
            parser.discard_body(&mut buf);
        }
        buf.extend_from_slice(bytes);
        let fed = parser.feed(&mut buf, false);
        if i * piece >= discard_at {
            most = most.max(buf.len());
        }
        match fed {
            Ok(Some(a)) => {
                if i * piece >= discard_at {
                    assert!(a.body.is_empty(), "a discarded body is not located");
                }
                return (Ok((a.status, Vec::new(), a.reusable)), most);
            }
            Ok(None) => {}
            Err(e) => return (Err(e), most),
        }
    }
    (Err(ResponseError::Bad("incomplete")), most)
}

/// A body discarded as it is decoded, from any point of the response on:
/// the same end, the same reusability and the same limits as when it is
/// kept, and the buffer never holds much more than the head and a piece.
#[test]
fn discarded_bodies_end_where_kept_ones_do() {
    let mut chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..10 {
        chunked.extend_from_slice(b"190\r\n");
        chunked.extend_from_slice(&[b'c'; 400]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let mut length = b"HTTP/1.1 200 OK\r\nContent-Length: 4000\r\n\r\n".to_vec();
    length.extend_from_slice(&[b'l'; 4000]);
    let mut trailing = length.clone();
    trailing.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    let mut over = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..3 {
        over.extend_from_slice(b"800\r\n");
        over.extend_from_slice(&[b'o'; 2048]);
        over.extend_from_slice(b"\r\n");
    }
    over.extend_from_slice(b"0\r\n\r\n");
    let cases: [(&[u8], Fed); 4] = [
        (&chunked, Ok((200, Vec::new(), true))),
        (&length, Ok((200, Vec::new(), true))),
        (&trailing, Ok((200, Vec::new(), false))),
        (&over, Err(ResponseError::Bad("chunked body over limit"))),
    ];
    for (wire, want) in cases {
        let kept = feed_pieces(wire, &[], false).0;
        assert_eq!(
            kept.clone().map(|(s, _, r)| (s, r)),
            want.clone().map(|(s, _, r)| (s, r)),
        );
        for piece in [1, 7, 100, 512] {
            // Fed in the same pieces, kept: with small pieces the bytes
            // after a response may come only after it ended.
            let cuts: Vec<usize> = (piece..wire.len()).step_by(piece).collect();
            let kept = feed_pieces(wire, &cuts, false)
                .0
                .map(|(s, _, r)| (s, Vec::new(), r));
            for discard_at in (0..wire.len()).step_by(piece).step_by(3) {
                let (got, most) = feed_discarding(wire, piece, discard_at);
                assert_eq!(got, kept, "pieces of {piece}, discarding from {discard_at}");
                // The head (at most 64 bytes here), a piece, a chunk-size
                // line cut short, and what was read before the discard.
                let bound = 64 + piece + 8 + discard_at.min(wire.len());
                let bound = if discard_at == 0 {
                    64 + piece + 8
                } else {
                    bound
                };
                assert!(most <= bound, "held {most} bytes (pieces of {piece})");
            }
        }
    }
}

/// A body taken piece by piece as it is decoded (as a streamed client
/// response takes it), fed split at every byte, adds up to the body, and
/// the head stays where the parser says it is.
#[test]
fn shotgun_taking_the_body_as_it_comes() {
    let cases: [(&[u8], bool, &[u8]); 3] = [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world", false, b"hello world"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
            false,
            b"abcde",
        ),
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close", true, b"until close"),
    ];
    for (wire, eof, body) in cases {
        let head_len = wire
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("head")
            + 4;
        for split in 0..=wire.len() {
            let mut parser = ResponseParser::new(LIMITS, false);
            let mut buf = Vec::new();
            let mut taken = Vec::new();
            let mut done = false;
            for (piece, last) in [(&wire[..split], false), (&wire[split..], eof)] {
                buf.extend_from_slice(piece);
                let answer = parser.feed(&mut buf, last).expect("valid");
                if let Some(head) = parser.head() {
                    assert_eq!(&buf[head], &wire[..head_len], "split at {split}");
                }
                match answer {
                    Some(answer) => {
                        taken.extend_from_slice(&buf[answer.body]);
                        // Nothing is fed after the answer.
                        done = true;
                        break;
                    }
                    None => {
                        taken.extend_from_slice(&buf[parser.body_so_far()]);
                        parser.take_body(&mut buf);
                    }
                }
            }
            assert!(done, "{:?} split at {split}", String::from_utf8_lossy(wire));
            assert_eq!(
                taken,
                body,
                "{:?} split at {split}",
                String::from_utf8_lossy(wire)
            );
        }
    }
}
