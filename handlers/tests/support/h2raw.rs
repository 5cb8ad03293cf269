//! A raw HTTP/2 client, for what curl does not show: frames, written by
//! hand (HPACK's static table and literals without indexing) and read
//! back until the server closes.

use std::io::{self, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub(crate) const HEADERS: u8 = 1;
pub(crate) const RST_STREAM: u8 = 3;
pub(crate) const SETTINGS: u8 = 4;
pub(crate) const GOAWAY: u8 = 7;
pub(crate) const ENHANCE_YOUR_CALM: u32 = 0xb;

pub(crate) fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = len.to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A `GET path` HEADERS frame that ends its stream, in HPACK's static
/// table and literals without indexing.
pub(crate) fn get_frame(stream: u32, path: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x86]; // :method GET, :scheme http
    block.push(0x04); // :path, literal
    block.push(path.len() as u8);
    block.extend_from_slice(path.as_bytes());
    block.extend_from_slice(&[0x01, 0x09]); // :authority, literal
    block.extend_from_slice(b"localhost");
    frame(HEADERS, 0x5, stream, &block)
}

/// Connects and sends the preface and empty settings.
pub(crate) fn raw_h2(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut hello = PREFACE.to_vec();
    hello.extend(frame(SETTINGS, 0, 0, &[]));
    s.write_all(&hello).expect("preface");
    s
}

/// Frames read until the peer closes: (type, flags, stream, payload).
pub(crate) fn frames_until_close(s: &mut TcpStream) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let mut all = Vec::new();
    // A reset ends it as a close does; a minute of silence is a hang.
    if let Err(e) = s.read_to_end(&mut all) {
        assert!(
            !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "the server neither answered nor closed: {e}"
        );
    }
    let mut frames = Vec::new();
    let mut at = 0;
    while at + 9 <= all.len() {
        let len = u32::from_be_bytes([0, all[at], all[at + 1], all[at + 2]]) as usize;
        let (kind, flags) = (all[at + 3], all[at + 4]);
        let stream = u32::from_be_bytes(all[at + 5..at + 9].try_into().unwrap()) & 0x7fff_ffff;
        let end = (at + 9 + len).min(all.len());
        frames.push((kind, flags, stream, all[at + 9..end].to_vec()));
        at = end;
    }
    frames
}

/// A frame as [`frames_until_close`] reads it: (type, flags, stream,
/// payload).
pub(crate) type Frame = (u8, u8, u32, Vec<u8>);

/// The error code of the first GOAWAY in `frames`, if any.
pub(crate) fn goaway_code(frames: &[Frame]) -> Option<u32> {
    let f = frames.iter().find(|f| f.0 == GOAWAY)?;
    Some(u32::from_be_bytes(f.3.get(4..8)?.try_into().ok()?))
}

/// The error codes of the RST_STREAM frames in `frames` for `stream`.
pub(crate) fn resets(frames: &[Frame], stream: u32) -> Vec<u32> {
    frames
        .iter()
        .filter(|f| f.0 == RST_STREAM && f.2 == stream)
        .filter_map(|f| Some(u32::from_be_bytes(f.3.get(..4)?.try_into().ok()?)))
        .collect()
}

/// Whether `frames` hold a response (a HEADERS frame) on `stream`.
pub(crate) fn answered(frames: &[Frame], stream: u32) -> bool {
    frames.iter().any(|f| f.0 == HEADERS && f.2 == stream)
}
