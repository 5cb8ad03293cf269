//! The WebSocket framing (RFC 6455 §5), sans I/O: a [`Decoder`] that
//! takes a connection's input buffer and gives whole messages and control
//! frames, enforcing every rule a server must, and [`encode`], which
//! writes a server's (unmasked) frame.
//!
//! ```text
//!  0               1               2               3
//!  0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7
//! +-+-+-+-+-------+-+-------------+-------------------------------+
//! |F|R|R|R| opcode|M| Payload len |    Extended payload length    |
//! |I|S|S|S|  (4)  |A|     (7)     |             (16/64)           |
//! |N|V|V|V|       |S|             |   (if payload len==126/127)   |
//! | |1|2|3|       |K|             |                               |
//! +-+-+-+-+-------+-+-------------+ - - - - - - - - - - - - - - - +
//! |     Extended payload length continued, if payload len == 127  |
//! + - - - - - - - - - - - - - - - +-------------------------------+
//! |                               |Masking-key, if MASK set to 1  |
//! +-------------------------------+-------------------------------+
//! | Masking-key (continued)       |          Payload Data         |
//! +-------------------------------- - - - - - - - - - - - - - - - +
//! ```
//!
//! Driving it: append what the socket gave to the input (`BytesMut`),
//! call [`Decoder::decode`] until it gives `Ok(None)` (more input
//! needed), and on `Err` send a close frame with the [`Violation`]'s code
//! and stop reading. A frame is decoded only once all of it has arrived:
//! its payload is unmasked in place and split off the input, so an
//! unfragmented message is handed out with no copy; the fragments of a
//! fragmented one are gathered into one buffer.

use bytes::{Buf, Bytes, BytesMut};

use super::close::{valid_code, CloseCode};

/// Opcodes (RFC 6455 §5.2).
pub(crate) mod op {
    pub(crate) const CONTINUATION: u8 = 0x0;
    pub(crate) const TEXT: u8 = 0x1;
    pub(crate) const BINARY: u8 = 0x2;
    pub(crate) const CLOSE: u8 = 0x8;
    pub(crate) const PING: u8 = 0x9;
    pub(crate) const PONG: u8 = 0xA;
}

/// RFC 6455 §5.5: control frames carry at most 125 payload bytes.
pub const MAX_CONTROL_PAYLOAD: usize = 125;

/// A rule the peer broke: the close code it earns and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Violation {
    /// The close code to send (1002, 1007 or 1009).
    pub code: CloseCode,
    /// A short reason, sent in the close frame.
    pub reason: &'static str,
}

impl Violation {
    fn protocol(reason: &'static str) -> Self {
        Self {
            code: CloseCode::PROTOCOL,
            reason,
        }
    }

    pub(crate) fn too_big(reason: &'static str) -> Self {
        Self {
            code: CloseCode::TOO_BIG,
            reason,
        }
    }

    fn invalid_text() -> Self {
        Self::invalid_data("text is not valid UTF-8")
    }

    pub(crate) fn invalid_data(reason: &'static str) -> Self {
        Self {
            code: CloseCode::INVALID_DATA,
            reason,
        }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (close code {})", self.reason, self.code.0)
    }
}

impl std::error::Error for Violation {}

/// What one decoded frame meant.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// A whole data message: text (valid UTF-8) or binary.
    Message {
        /// Whether it is a text message.
        text: bool,
        /// Its payload, unmasked.
        data: Bytes,
    },
    /// A ping, whose payload the pong must echo.
    Ping(Bytes),
    /// A pong.
    Pong(Bytes),
    /// The peer's close frame: its code and reason, if it sent one.
    Close(Option<(CloseCode, Bytes)>),
}

/// The receiving side of a connection's framing: the limits, and the
/// message being gathered from fragments.
#[derive(Debug)]
pub struct Decoder {
    max_frame: usize,
    max_message: usize,
    /// The fragmented message in progress: whether it is text, and its
    /// payload so far.
    partial: Option<bool>,
    message: BytesMut,
    /// Of a text message in `message`, the bytes known to be valid UTF-8.
    checked: usize,
    /// The message in progress is compressed (its first frame had RSV1).
    compressed: bool,
    /// With `permessage-deflate` negotiated, what inflates messages.
    #[cfg(feature = "ws-deflate")]
    inflater: Option<super::deflate::Inflater>,
}

impl Decoder {
    /// A decoder that refuses frames over `max_frame` payload bytes and
    /// messages over `max_message` (both with 1009).
    pub fn new(max_frame: usize, max_message: usize) -> Self {
        Self {
            max_frame,
            max_message,
            partial: None,
            message: BytesMut::new(),
            checked: 0,
            compressed: false,
            #[cfg(feature = "ws-deflate")]
            inflater: None,
        }
    }

    /// Lets messages arrive compressed (RSV1 on their first frame), as
    /// `permessage-deflate` negotiated.
    #[cfg(feature = "ws-deflate")]
    pub(crate) fn with_inflater(mut self, inflater: super::deflate::Inflater) -> Self {
        self.inflater = Some(inflater);
        self
    }

    /// Whether a message's first frame may carry RSV1 (RFC 7692 §6).
    fn inflates(&self) -> bool {
        #[cfg(feature = "ws-deflate")]
        return self.inflater.is_some();
        #[cfg(not(feature = "ws-deflate"))]
        false
    }

    /// A whole message's payload as the application sees it: inflated
    /// when it came compressed, and checked for UTF-8 when `text`.
    fn payload(
        &mut self,
        text: bool,
        compressed: bool,
        data: BytesMut,
    ) -> Result<Bytes, Violation> {
        #[cfg(feature = "ws-deflate")]
        if compressed {
            let limit = self.max_message;
            let inflater = self
                .inflater
                .as_mut()
                .ok_or(Violation::protocol("reserved bits set"))?;
            let data = inflater.inflate(&data, limit)?;
            if text && std::str::from_utf8(&data).is_err() {
                return Err(Violation::invalid_text());
            }
            return Ok(Bytes::from(data));
        }
        debug_assert!(!compressed, "RSV1 is refused without an inflater");
        if text && std::str::from_utf8(&data).is_err() {
            return Err(Violation::invalid_text());
        }
        Ok(data.freeze())
    }

    /// Decodes the next frame at the start of `input`, taking its bytes
    /// out of it. `Ok(None)`: the frame is incomplete (or a fragment was
    /// gathered), decode again after more input arrives. A fragment that
    /// is not the last gives `Ok(None)` too, with its bytes taken: call
    /// again while `input` is not empty.
    ///
    /// # Errors
    ///
    /// The [`Violation`] of a frame that breaks RFC 6455 or the limits;
    /// the connection must then be closed with its code.
    pub fn decode(&mut self, input: &mut BytesMut) -> Result<Option<Event>, Violation> {
        loop {
            let Some(head) = Head::parse(input)? else {
                return Ok(None);
            };
            self.check(&head)?;
            let end = head
                .len
                .checked_add(head.head_len)
                .ok_or(Violation::too_big("frame too large"))?;
            if input.len() < end {
                // Room for the rest now: one allocation, not a doubling
                // per read (`end` is within the frame limit).
                input.reserve(end - input.len());
                return Ok(None);
            }
            let mut frame = input.split_to(end);
            frame.advance(head.head_len);
            unmask(&mut frame, head.mask);
            if let Some(event) = self.frame(&head, frame)? {
                return Ok(Some(event));
            }
            if input.is_empty() {
                return Ok(None);
            }
        }
    }

    /// The rules a frame's head alone can break.
    fn check(&self, head: &Head) -> Result<(), Violation> {
        // RSV1 marks a compressed message, on its first frame only
        // (RFC 7692 §6): never on a continuation or a control frame.
        let rsv1_allowed = self.inflates() && matches!(head.opcode, op::TEXT | op::BINARY);
        if head.rsv & 0b011 != 0 || (head.rsv & 0b100 != 0 && !rsv1_allowed) {
            return Err(Violation::protocol("reserved bits set"));
        }
        if !head.masked {
            return Err(Violation::protocol("client frame not masked"));
        }
        match head.opcode {
            op::CLOSE | op::PING | op::PONG => {
                if !head.fin {
                    return Err(Violation::protocol("fragmented control frame"));
                }
                if head.len > MAX_CONTROL_PAYLOAD {
                    return Err(Violation::protocol("control frame over 125 bytes"));
                }
            }
            op::CONTINUATION if self.partial.is_none() => {
                return Err(Violation::protocol("continuation without a message"));
            }
            op::TEXT | op::BINARY if self.partial.is_some() => {
                return Err(Violation::protocol("new message inside a fragmented one"));
            }
            op::CONTINUATION | op::TEXT | op::BINARY => {}
            _ => return Err(Violation::protocol("reserved opcode")),
        }
        if head.opcode < op::CLOSE {
            if head.len > self.max_frame {
                return Err(Violation::too_big("frame over the size limit"));
            }
            if self.message.len().saturating_add(head.len) > self.max_message {
                return Err(Violation::too_big("message over the size limit"));
            }
        }
        Ok(())
    }

    /// The meaning of a whole, unmasked frame.
    fn frame(&mut self, head: &Head, payload: BytesMut) -> Result<Option<Event>, Violation> {
        match head.opcode {
            op::PING => Ok(Some(Event::Ping(payload.freeze()))),
            op::PONG => Ok(Some(Event::Pong(payload.freeze()))),
            op::CLOSE => close_event(payload).map(Some),
            op::TEXT | op::BINARY if head.fin => {
                let text = head.opcode == op::TEXT;
                let data = self.payload(text, head.rsv != 0, payload)?;
                Ok(Some(Event::Message { text, data }))
            }
            _ => {
                if self.partial.is_none() {
                    self.compressed = head.rsv != 0;
                }
                let text = *self.partial.get_or_insert(head.opcode == op::TEXT);
                if self.message.is_empty() {
                    // The first fragment's buffer becomes the message's:
                    // the next ones are appended to it.
                    self.message = payload;
                } else {
                    self.message.extend_from_slice(&payload);
                }
                // Compressed text is checked once inflated.
                if text && !self.compressed {
                    self.check_text(head.fin)?;
                }
                if !head.fin {
                    return Ok(None);
                }
                self.partial = None;
                self.checked = 0;
                let data = std::mem::take(&mut self.message);
                // Plain text was checked as it came: not again.
                let data = self.payload(text && self.compressed, self.compressed, data)?;
                Ok(Some(Event::Message { text, data }))
            }
        }
    }

    /// Checks the text gathered so far, as it arrives: invalid UTF-8 is
    /// refused at the fragment that brings it (fail fast), and a
    /// sequence cut by a fragment's end is checked when it completes.
    fn check_text(&mut self, fin: bool) -> Result<(), Violation> {
        match std::str::from_utf8(&self.message[self.checked..]) {
            Ok(_) => {
                self.checked = self.message.len();
                Ok(())
            }
            // The end cuts a sequence that may still be completed.
            Err(e) if e.error_len().is_none() && !fin => {
                self.checked += e.valid_up_to();
                Ok(())
            }
            Err(_) => Err(Violation::invalid_text()),
        }
    }
}

/// A close frame's payload: empty, or a valid code and a UTF-8 reason.
fn close_event(payload: BytesMut) -> Result<Event, Violation> {
    match payload.len() {
        0 => Ok(Event::Close(None)),
        1 => Err(Violation::protocol("close frame with a one-byte payload")),
        _ => {
            let code = CloseCode(u16::from_be_bytes([payload[0], payload[1]]));
            if !valid_code(code.0) {
                return Err(Violation::protocol("invalid close code"));
            }
            if std::str::from_utf8(&payload[2..]).is_err() {
                return Err(Violation::invalid_text());
            }
            let mut reason = payload.freeze();
            reason.advance(2);
            Ok(Event::Close(Some((code, reason))))
        }
    }
}

/// A frame's head, parsed.
#[derive(Debug, Clone, Copy)]
struct Head {
    fin: bool,
    rsv: u8,
    opcode: u8,
    masked: bool,
    mask: [u8; 4],
    /// Payload length; within `usize` (a larger one is refused).
    len: usize,
    /// Bytes of the head, mask included.
    head_len: usize,
}

impl Head {
    /// The head at the start of `buf`, `None` if incomplete.
    fn parse(buf: &[u8]) -> Result<Option<Head>, Violation> {
        let [b0, b1, ..] = *buf else {
            return Ok(None);
        };
        let masked = b1 & 0x80 != 0;
        let (len, mut at) = match b1 & 0x7f {
            126 => match buf.get(2..4) {
                Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
                None => return Ok(None),
            },
            127 => match buf.get(2..10) {
                Some(b) => {
                    let len = u64::from_be_bytes(b.try_into().unwrap_or_default());
                    // RFC 6455 §5.2: the most significant bit must be 0.
                    if len >> 63 != 0 {
                        return Err(Violation::protocol("payload length with its top bit set"));
                    }
                    (len, 10)
                }
                None => return Ok(None),
            },
            n => (u64::from(n), 2),
        };
        let mut mask = [0; 4];
        if masked {
            match buf.get(at..at + 4) {
                Some(m) => mask.copy_from_slice(m),
                None => return Ok(None),
            }
            at += 4;
        }
        Ok(Some(Head {
            fin: b0 & 0x80 != 0,
            rsv: (b0 >> 4) & 0x7,
            opcode: b0 & 0x0f,
            masked,
            mask,
            // Over `usize` is over any limit: refused by `check`.
            len: usize::try_from(len).unwrap_or(usize::MAX),
            head_len: at,
        }))
    }
}

/// Unmasks (or masks) `data` in place with `mask` (RFC 6455 §5.3), eight
/// bytes at a time.
pub fn unmask(data: &mut [u8], mask: [u8; 4]) {
    let wide = u64::from_ne_bytes([
        mask[0], mask[1], mask[2], mask[3], mask[0], mask[1], mask[2], mask[3],
    ]);
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let v = u64::from_ne_bytes((&*chunk).try_into().unwrap_or_default()) ^ wide;
        chunk.copy_from_slice(&v.to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= mask[i & 3];
    }
}

/// Appends a server frame (final, unmasked) with `opcode` and `payload`
/// to `out`.
pub fn encode(out: &mut Vec<u8>, opcode: u8, payload: &[u8]) {
    encode_head(out, opcode, payload.len());
    out.extend_from_slice(payload);
}

/// Appends the head of a server frame (final, unmasked) of `len` bytes.
pub fn encode_head(out: &mut Vec<u8>, opcode: u8, len: usize) {
    out.reserve(10 + len);
    out.push(0x80 | opcode);
    match len {
        0..=125 => out.push(len as u8),
        126..=0xffff => {
            out.push(126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            out.push(127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;
