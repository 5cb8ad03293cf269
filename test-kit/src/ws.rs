//! A raw blocking WebSocket client: frames are built and read byte by
//! byte, so a test can send what no library would (unmasked frames,
//! reserved bits, bad UTF-8) and see exactly what the server answers.

use std::io::{self, Read, Write};

/// The key of RFC 6455 §1.3.
pub const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
/// The `Sec-WebSocket-Accept` value for [`KEY`].
pub const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

/// The opening handshake's request for `path`, with `extra` fields.
pub fn upgrade_request(path: &str, extra: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
    .into_bytes()
}

/// A raw WebSocket client over a blocking stream.
#[derive(Debug)]
pub struct WsClient<S> {
    /// The connection, for raw reads and writes.
    pub stream: S,
    buf: Vec<u8>,
}

/// A frame as the server sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The FIN bit.
    pub fin: bool,
    /// The opcode (1 text, 2 binary, 8 close, 9 ping, 10 pong).
    pub opcode: u8,
    /// The payload (server frames are never masked).
    pub payload: Vec<u8>,
}

impl Frame {
    /// The code of a close frame (1005 when it has none).
    pub fn close_code(&self) -> u16 {
        assert_eq!(self.opcode, 8, "not a close frame: {self:?}");
        match self.payload.get(..2) {
            Some(b) => u16::from_be_bytes([b[0], b[1]]),
            None => 1005,
        }
    }
}

impl<S: Read + Write> WsClient<S> {
    /// A client on `stream`, before its handshake.
    pub fn new(stream: S) -> Self {
        Self {
            stream,
            buf: Vec::new(),
        }
    }

    /// Sends the handshake for `path` and reads the 101's head; panics
    /// on another answer.
    pub fn handshake(&mut self, path: &str, extra: &str) -> String {
        self.stream
            .write_all(&upgrade_request(path, extra))
            .expect("send handshake");
        let head = self.read_head();
        assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
        // Field names are case-insensitive (hyper writes them lower case).
        let accept = format!("sec-websocket-accept: {ACCEPT}\r\n");
        assert!(
            head.to_ascii_lowercase()
                .contains(&accept.to_ascii_lowercase()),
            "{head}"
        );
        head
    }

    /// Reads an HTTP response head (up to its blank line).
    pub fn read_head(&mut self) -> String {
        loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head: Vec<u8> = self.buf.drain(..end + 4).collect();
                return String::from_utf8(head).expect("ASCII head");
            }
            self.fill().expect("read head");
        }
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 64 * 1024];
        let n = self.stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "eof"));
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// What was read past the last head or frame, taken.
    pub fn take_buffered(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// Sends a masked frame.
    pub fn send_frame(&mut self, fin: bool, opcode: u8, payload: &[u8]) {
        let bytes = client_frame(fin, 0, opcode, true, payload);
        self.stream.write_all(&bytes).expect("send frame");
    }

    /// Sends raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send raw");
    }

    /// The next frame; `Err` at EOF or a reset.
    pub fn frame(&mut self) -> io::Result<Frame> {
        let (rsv, frame) = self.frame_with_rsv()?;
        assert_eq!(rsv, 0, "server frames have no reserved bits");
        Ok(frame)
    }

    /// The next frame and its reserved bits (RSV1 is `0b100`: a message
    /// compressed by an extension); `Err` at EOF or a reset.
    pub fn frame_with_rsv(&mut self) -> io::Result<(u8, Frame)> {
        loop {
            if let Some((rsv, frame, len)) = parse_frame(&self.buf) {
                self.buf.drain(..len);
                return Ok((rsv, frame));
            }
            self.fill()?;
        }
    }

    /// The next frame that is not a ping (pings are answered, as a client
    /// must).
    pub fn data_frame(&mut self) -> io::Result<Frame> {
        loop {
            let f = self.frame()?;
            if f.opcode == 9 {
                self.send_frame(true, 10, &f.payload);
                continue;
            }
            return Ok(f);
        }
    }

    /// Whether the server closes the stream next (EOF or a reset, with
    /// nothing but frames before it, which are returned).
    pub fn until_closed(&mut self) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Ok(f) = self.frame() {
            frames.push(f);
        }
        frames
    }
}

/// A client frame with `rsv` bits (0..8), masked or not.
pub fn client_frame(fin: bool, rsv: u8, opcode: u8, masked: bool, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![(u8::from(fin) << 7) | (rsv << 4) | opcode];
    let mask_bit = if masked { 0x80 } else { 0 };
    match payload.len() {
        n @ 0..=125 => out.push(mask_bit | n as u8),
        n @ 126..=0xffff => {
            out.push(mask_bit | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(mask_bit | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    if masked {
        let mask = [0x37, 0xfa, 0x21, 0x3d];
        out.extend_from_slice(&mask);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    } else {
        out.extend_from_slice(payload);
    }
    out
}

/// A whole server frame at the start of `buf`, and its length; panics
/// on a masked one (servers must not mask) or one with reserved bits.
pub fn parse_server_frame(buf: &[u8]) -> Option<(Frame, usize)> {
    let (rsv, frame, len) = parse_frame(buf)?;
    assert_eq!(rsv, 0, "server frames have no reserved bits");
    Some((frame, len))
}

/// A whole server frame at the start of `buf`, its reserved bits and its
/// length; panics on a masked one.
fn parse_frame(buf: &[u8]) -> Option<(u8, Frame, usize)> {
    let [b0, b1, ..] = *buf else { return None };
    assert_eq!(b1 & 0x80, 0, "server frames are never masked");
    let (len, at) = match b1 & 0x7f {
        126 => (
            u16::from_be_bytes(buf.get(2..4)?.try_into().ok()?) as usize,
            4,
        ),
        127 => (
            u64::from_be_bytes(buf.get(2..10)?.try_into().ok()?) as usize,
            10,
        ),
        n => (n as usize, 2),
    };
    let payload = buf.get(at..at + len)?.to_vec();
    Some((
        (b0 >> 4) & 0x7,
        Frame {
            fin: b0 & 0x80 != 0,
            opcode: b0 & 0x0f,
            payload,
        },
        at + len,
    ))
}
