//! HTTP/2 abuse on both backends (FAULTS L3–L5), with raw frames: floods
//! of frames that carry nothing are cut with GOAWAY `ENHANCE_YOUR_CALM`
//! after a bounded number of bytes; a client that never opens its window
//! has its streams cancelled at the write timeout while another client is
//! served; malformed frames and requests get RFC 9113's errors and never
//! reach the service. (Features `h2` and `json`, which `./test.sh`
//! enables.)
#![cfg(all(feature = "h2", feature = "json"))]

use crate::support;

use std::io::Write as _;
use std::net::TcpStream;

use percore_handlers::http::{Routed, Router, Routes};
use percore_test_kit::*;
use support::h2raw::*;
use support::http::*;

const DATA: u8 = 0;
const PRIORITY: u8 = 2;
const PING: u8 = 6;
const WINDOW_UPDATE: u8 = 8;
const PROTOCOL_ERROR: u32 = 1;
const STREAM_CLOSED: u32 = 5;
const FRAME_SIZE_ERROR: u32 = 6;
const CANCEL: u32 = 8;

/// The bytes a flood may send in all: far past the point where it must
/// be cut (the kernel's buffers take a few MiB of it before then).
const FLOOD_BYTES: usize = 32 << 20;

async fn big(_: &(), _: &mut Routed<'_, '_>, res: &mut Response<'_>) -> std::io::Result<()> {
    res.send(200, None, &[b'x'; 64 * 1024])?;
    Ok(())
}

async fn small(_: &(), _: &mut Routed<'_, '_>, res: &mut Response<'_>) -> std::io::Result<()> {
    res.send(200, None, b"small")?;
    Ok(())
}

fn routes() -> Routes<(), impl percore_handlers::http::router::Chain<()>> {
    Router::new(())
        .get("/big", big)
        .get("/small", small)
        .post("/small", small)
        .build()
        .expect("the test routes do not conflict")
}

/// A HEADERS frame for `method path` on `stream` with `fields` (name,
/// value) as literals, ending the stream if `end`.
fn headers(stream: u32, post: bool, path: &str, fields: &[(&str, &str)], end: bool) -> Vec<u8> {
    let mut block = vec![if post { 0x83 } else { 0x82 }, 0x86, 0x04, path.len() as u8];
    block.extend_from_slice(path.as_bytes());
    block.extend_from_slice(&[0x01, 0x09]);
    block.extend_from_slice(b"localhost");
    for (name, value) in fields {
        block.extend_from_slice(&[0x00, name.len() as u8]);
        block.extend_from_slice(name.as_bytes());
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    }
    frame(HEADERS, 0x4 | u8::from(end), stream, &block)
}

/// Sends `opening`, then `unit` over and over (up to [`FLOOD_BYTES`]) from
/// a thread while this one reads what comes back until the server
/// closes. Returns the frames and the flood bytes the server let in.
fn flood(server: &TestServer, opening: &[u8], unit: &[u8]) -> (Vec<Frame>, usize) {
    let mut s = raw_h2(server.addr);
    s.write_all(opening).expect("opening frames");
    let mut writer = s.try_clone().expect("clone");
    let batch: Vec<u8> = unit
        .iter()
        .copied()
        .cycle()
        .take(unit.len() * (64 * 1024 / unit.len()))
        .collect();
    let sender = std::thread::spawn(move || {
        let mut sent = 0;
        while sent < FLOOD_BYTES && writer.write_all(&batch).is_ok() {
            sent += batch.len();
        }
        sent
    });
    let frames = frames_until_close(&mut s);
    drop(s);
    (frames, sender.join().expect("the flood's thread"))
}

backend_tests! {
    parallel;
    /// FAULTS L3: PING, SETTINGS, WINDOW_UPDATE, PRIORITY, empty DATA and
    /// unknown zero-length frames, each in a loop on its own connection:
    /// each connection gets GOAWAY `ENHANCE_YOUR_CALM` and is closed
    /// before the flood is through, and is counted; a client after each
    /// is served.
    fn floods_are_cut_off(backend) {
        let server = TestServer::start(backend, Config::default(), routes);
        let open_post = headers(1, true, "/small", &[], false);
        let cases: [(&str, Vec<u8>, Vec<u8>); 6] = [
            ("PING", Vec::new(), frame(PING, 0, 0, &[1; 8])),
            ("SETTINGS", Vec::new(), frame(SETTINGS, 0, 0, &[])),
            ("WINDOW_UPDATE", Vec::new(), frame(WINDOW_UPDATE, 0, 0, &1u32.to_be_bytes())),
            ("PRIORITY", Vec::new(), frame(PRIORITY, 0, 3, &[0, 0, 0, 1, 16])),
            ("empty DATA", open_post, frame(DATA, 0, 1, &[])),
            ("unknown type", Vec::new(), frame(0x20, 0, 0, &[])),
        ];
        for (i, (name, opening, unit)) in cases.iter().enumerate() {
            let (frames, sent) = flood(&server, opening, unit);
            assert_eq!(goaway_code(&frames), Some(ENHANCE_YOUR_CALM), "{backend} {name}: {} frames back", frames.len());
            assert!(sent < FLOOD_BYTES, "{backend} {name}: the whole flood went in");
            assert_eq!(server.http_stats().h2_cut, i as u64 + 1, "{backend} {name}");
            let mut ok = raw_h2(server.addr);
            ok.write_all(&get_frame(1, "/small")).expect("a request");
            ok.write_all(&frame(GOAWAY, 0, 0, &[0; 8])).expect("goodbye");
            assert!(answered(&frames_until_close(&mut ok), 1), "{backend}: not served after the {name} flood");
        }
    }

    /// The HTTP/2 counters add up: five requests on one connection are
    /// five streams, none open once answered; a flood is a cut and a
    /// GOAWAY.
    fn the_counters_add_up(backend) {
        let server = TestServer::start(backend, Config::default(), routes);
        let mut s = raw_h2(server.addr);
        for id in [1, 3, 5, 7, 9] {
            s.write_all(&get_frame(id, "/small")).expect("a request");
        }
        s.write_all(&frame(GOAWAY, 0, 0, &[0; 8])).expect("goodbye");
        let frames = frames_until_close(&mut s);
        assert!([1, 3, 5, 7, 9].iter().all(|&id| answered(&frames, id)), "{frames:?}");
        let stats = wait_until(std::time::Duration::from_secs(60), "the streams' ends counted", || server.http_stats(), |s| s.h2_streams_ended == 5);
        assert_eq!((stats.h2_connections, stats.h2_streams, stats.h2_streams_reset), (1, 5, 0), "{stats}");
        assert_eq!((stats.h2_cut, stats.h2_goaways), (0, 0), "{stats}");
        let (frames, _) = flood(&server, &[], &frame(PING, 0, 0, &[1; 8]));
        assert_eq!(goaway_code(&frames), Some(ENHANCE_YOUR_CALM));
        let stats = server.http_stats();
        assert_eq!((stats.h2_connections, stats.h2_cut, stats.h2_goaways), (2, 1, 1), "{stats}");
    }

    /// `Config::h2` is what the server announces: its first SETTINGS
    /// frame carries the configured concurrent streams and stream window.
    fn the_settings_are_the_configs(backend) {
        let mut config = Config::default();
        config.h2.max_concurrent_streams = 7;
        config.h2.stream_window = 1000;
        let server = TestServer::start(backend, config, routes);
        let mut s = raw_h2(server.addr);
        s.write_all(&frame(GOAWAY, 0, 0, &[0; 8])).expect("goodbye");
        let frames = frames_until_close(&mut s);
        let settings = &frames.iter().find(|f| f.0 == SETTINGS && f.1 == 0).expect("the server's SETTINGS").3;
        let value = |id: u16| {
            settings.chunks(6).find(|c| u16::from_be_bytes([c[0], c[1]]) == id).map(|c| u32::from_be_bytes([c[2], c[3], c[4], c[5]]))
        };
        assert_eq!(value(3), Some(7), "{backend}: SETTINGS_MAX_CONCURRENT_STREAMS");
        assert_eq!(value(4), Some(1000), "{backend}: SETTINGS_INITIAL_WINDOW_SIZE");
    }

    /// FAULTS L4: a client whose window is zero (and never opens) asks
    /// 100 streams of 64 KiB: each is cancelled (RST_STREAM CANCEL) at the
    /// write timeout, the connection closes when idle, and a client
    /// meanwhile is served.
    fn a_client_that_never_reads_is_cancelled(backend) {
        let server = TestServer::start(backend, short_config(), routes);
        let mut s = TcpStream::connect(server.addr).expect("connect");
        let mut hello = PREFACE.to_vec();
        // SETTINGS_INITIAL_WINDOW_SIZE = 0.
        hello.extend(frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 0]));
        for i in 0..100 {
            hello.extend(get_frame(2 * i + 1, "/big"));
        }
        s.write_all(&hello).expect("the requests");
        let mut other = raw_h2(server.addr);
        other.write_all(&get_frame(1, "/small")).expect("a request");
        other.write_all(&frame(GOAWAY, 0, 0, &[0; 8])).expect("goodbye");
        assert!(answered(&frames_until_close(&mut other), 1), "{backend}: the other client was not served");
        s.set_read_timeout(Some(std::time::Duration::from_secs(60))).expect("timeout");
        let frames = frames_until_close(&mut s);
        for i in 0..100 {
            assert_eq!(resets(&frames, 2 * i + 1), [CANCEL], "{backend}: stream {}", 2 * i + 1);
        }
    }

    /// FAULTS L5: malformed frames and requests, each on its own
    /// connection, get RFC 9113's answer (a connection error by GOAWAY with
    /// its code; a stream error by RST_STREAM with its code, or GOAWAY
    /// `PROTOCOL_ERROR` in its place), and the service never answers the
    /// stream at fault.
    fn bad_frames_get_the_rfcs_errors(backend) {
        let server = TestServer::start(backend, Config::default(), routes);
        let get = |id| headers(id, false, "/small", &[], true);
        let mut big_data = headers(1, true, "/small", &[], false);
        big_data.extend(frame(DATA, 0, 1, &vec![0; 20_000]));
        let mut closed = get(1);
        closed.extend(frame(DATA, 0x1, 1, b"late"));
        let mut decreasing = get(5);
        decreasing.extend(get(3));
        let mut short_body = headers(1, true, "/small", &[("content-length", "10")], false);
        short_body.extend(frame(DATA, 0x1, 1, b"five!"));
        // (case, frames, the stream at fault, connection error?, code)
        let cases: Vec<(&str, Vec<u8>, u32, bool, u32)> = vec![
            ("an even stream id", get(2), 2, true, PROTOCOL_ERROR),
            ("a decreasing stream id", decreasing, 3, true, PROTOCOL_ERROR),
            ("DATA on a closed stream", closed, 0, false, STREAM_CLOSED),
            ("a frame over SETTINGS_MAX_FRAME_SIZE", big_data, 1, true, FRAME_SIZE_ERROR),
            ("an unknown pseudo-header", headers(1, false, "/small", &[(":foo", "x")], true), 1, false, PROTOCOL_ERROR),
            ("an uppercase field name", headers(1, false, "/small", &[("X-Up", "x")], true), 1, false, PROTOCOL_ERROR),
            ("a connection field", headers(1, false, "/small", &[("connection", "close")], true), 1, false, PROTOCOL_ERROR),
            ("transfer-encoding", headers(1, false, "/small", &[("transfer-encoding", "chunked")], true), 1, false, PROTOCOL_ERROR),
            ("content-length unlike DATA", short_body, 1, false, PROTOCOL_ERROR),
        ];
        for (name, frames, stream, connection, code) in cases {
            let mut s = raw_h2(server.addr);
            s.write_all(&frames).expect("the frames");
            // A stream error leaves the connection open: end it.
            let _ = s.write_all(&frame(GOAWAY, 0, 0, &[0; 8]));
            let got = frames_until_close(&mut s);
            if connection {
                assert_eq!(goaway_code(&got), Some(code), "{backend}, {name}: {got:?}");
            } else {
                // A stream error, or the connection error that RFC 9113
                // §5.4.1 allows in its place (the server resets the
                // stream; `a_malformed_request_resets_only_its_stream`
                // checks that exactly).
                let on = stream.max(1);
                let any = resets(&got, on) == [code] || matches!(goaway_code(&got), Some(c) if c == code || c == PROTOCOL_ERROR);
                assert!(any, "{backend}, {name}: {got:?}");
            }
            if stream != 0 {
                let served = got.iter().any(|f| f.0 == HEADERS && f.2 == stream && f.3.first() == Some(&0x88));
                assert!(!served, "{backend}, {name}: the service answered stream {stream}");
            }
        }
    }

    /// A malformed request (RFC 9113 §8.1.1: an uppercase field name, a
    /// body shorter than its `content-length`) resets its own stream with
    /// `PROTOCOL_ERROR` and reaches no service; the connection goes on,
    /// serving the requests around them, and is not counted as cut.
    fn a_malformed_request_resets_only_its_stream(backend) {
        let server = TestServer::start(backend, Config::default(), routes);
        let mut s = raw_h2(server.addr);
        let mut wire = headers(1, false, "/small", &[("X-Up", "x")], true);
        wire.extend(headers(3, false, "/small", &[], true));
        wire.extend(headers(5, true, "/small", &[("content-length", "10")], false));
        wire.extend(frame(DATA, 0x1, 5, b"five!"));
        wire.extend(headers(7, false, "/small", &[], true));
        wire.extend(frame(GOAWAY, 0, 0, &[0, 0, 0, 7, 0, 0, 0, 0]));
        s.write_all(&wire).expect("the frames");
        let got = frames_until_close(&mut s);
        for stream in [1, 5] {
            assert_eq!(resets(&got, stream), [PROTOCOL_ERROR], "{backend}, stream {stream}: {got:?}");
            assert!(!answered(&got, stream), "{backend}: stream {stream} was answered: {got:?}");
        }
        for stream in [3, 7] {
            let ok = got.iter().any(|f| f.0 == HEADERS && f.2 == stream && f.3.first() == Some(&0x88));
            assert!(ok, "{backend}: stream {stream} not served: {got:?}");
        }
        assert_eq!(goaway_code(&got), None, "{backend}: {got:?}");
        assert_eq!(server.http_stats().h2_cut, 0, "{backend}");
    }
}
