//! HTTP/2 frames (RFC 9113 §4 and §6): the 9-byte header, each frame
//! type's payload, and the encoders a connection writes with.
//!
//! Parsing borrows: a [`Frame`] points into the caller's input and holds
//! no allocation. Each type's rules are checked when it is parsed, and a
//! frame that breaks one gives a [`FrameError`] naming the RFC error code
//! and its [`Scope`]: a stream error resets one stream, a connection
//! error ends the connection with GOAWAY. Unknown frame types come back
//! as [`Frame::Unknown`], which a receiver ignores (§4.1, §5.5).
//!
//! What a single frame cannot show is left to the connection: stream
//! states, the order of HEADERS and CONTINUATION, flow control windows.

mod error;
mod parse;
mod settings;
mod write;

#[cfg(test)]
mod tests;

pub use error::{ErrorCode, FrameError, Scope};
pub use parse::{
    Continuation, Data, GoAway, Headers, Ping, Priority, PrioritySpec, PushPromise, RstStream,
    WindowUpdate,
};
pub use settings::{Setting, Settings, SettingsIter};
pub use write::{
    write_continuation, write_data, write_goaway, write_headers, write_ping, write_priority,
    write_rst, write_settings, write_settings_ack, write_window_update,
};

/// Length of every frame header (§4.1).
pub const HEADER_LEN: usize = 9;
/// The initial SETTINGS_MAX_FRAME_SIZE, and the smallest allowed (§6.5.2).
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;
/// The largest SETTINGS_MAX_FRAME_SIZE allowed: 2^24-1 (§6.5.2).
pub const MAX_MAX_FRAME_SIZE: u32 = 16_777_215;
/// The largest flow control window and SETTINGS_INITIAL_WINDOW_SIZE: 2^31-1 (§6.9.1).
pub const MAX_WINDOW_SIZE: u32 = 0x7fff_ffff;
/// The client connection preface that opens every HTTP/2 connection (§3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame flags (§6). One bit may mean different things in different
/// frame types: `ACK` and `END_STREAM` are both 0x1.
pub mod flags {
    /// DATA, HEADERS: the last frame the sender sends on this stream.
    pub const END_STREAM: u8 = 0x1;
    /// SETTINGS, PING: this frame acknowledges the peer's.
    pub const ACK: u8 = 0x1;
    /// HEADERS, PUSH_PROMISE, CONTINUATION: the field block ends here.
    pub const END_HEADERS: u8 = 0x4;
    /// DATA, HEADERS, PUSH_PROMISE: a pad length byte and padding follow.
    pub const PADDED: u8 = 0x8;
    /// HEADERS: the deprecated priority fields follow.
    pub const PRIORITY: u8 = 0x20;
}

/// A stream identifier: 31 bits, 0 for the connection itself (§5.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId(pub u32);

impl StreamId {
    /// The connection's own "stream", which connection-level frames carry.
    pub const ZERO: StreamId = StreamId(0);

    /// Whether this is stream 0, the connection.
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// Whether a client opened (or may open) this stream: odd ids (§5.1.1).
    pub fn is_client_initiated(self) -> bool {
        self.0 & 1 == 1
    }
}

/// The frame types of RFC 9113 §6, by their type octet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// 0x0, §6.1.
    Data,
    /// 0x1, §6.2.
    Headers,
    /// 0x2, §6.3.
    Priority,
    /// 0x3, §6.4.
    RstStream,
    /// 0x4, §6.5.
    Settings,
    /// 0x5, §6.6.
    PushPromise,
    /// 0x6, §6.7.
    Ping,
    /// 0x7, §6.8.
    GoAway,
    /// 0x8, §6.9.
    WindowUpdate,
    /// 0x9, §6.10.
    Continuation,
    /// Any other type octet: ignored by a receiver (§4.1).
    Unknown(u8),
}

impl Kind {
    /// The kind a type octet names.
    pub fn from_u8(byte: u8) -> Kind {
        match byte {
            0 => Kind::Data,
            1 => Kind::Headers,
            2 => Kind::Priority,
            3 => Kind::RstStream,
            4 => Kind::Settings,
            5 => Kind::PushPromise,
            6 => Kind::Ping,
            7 => Kind::GoAway,
            8 => Kind::WindowUpdate,
            9 => Kind::Continuation,
            other => Kind::Unknown(other),
        }
    }

    /// The type octet on the wire.
    pub fn to_u8(self) -> u8 {
        match self {
            Kind::Data => 0,
            Kind::Headers => 1,
            Kind::Priority => 2,
            Kind::RstStream => 3,
            Kind::Settings => 4,
            Kind::PushPromise => 5,
            Kind::Ping => 6,
            Kind::GoAway => 7,
            Kind::WindowUpdate => 8,
            Kind::Continuation => 9,
            Kind::Unknown(other) => other,
        }
    }
}

/// The 9-byte header every frame starts with (§4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload length, 24 bits; the header's 9 bytes are not counted.
    pub length: u32,
    /// The frame type.
    pub kind: Kind,
    /// Type-specific flags; unknown bits are ignored (§4.1).
    pub flags: u8,
    /// The stream; the reserved high bit is cleared on parse.
    pub stream: StreamId,
}

impl FrameHeader {
    /// Reads a header from the first 9 bytes of `input`, or `None` when
    /// fewer have arrived.
    pub fn parse(input: &[u8]) -> Option<FrameHeader> {
        let h: &[u8; HEADER_LEN] = input.get(..HEADER_LEN)?.try_into().ok()?;
        Some(FrameHeader {
            length: u32::from_be_bytes([0, h[0], h[1], h[2]]),
            kind: Kind::from_u8(h[3]),
            flags: h[4],
            stream: StreamId(u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff),
        })
    }

    /// Appends this header to `dst`.
    ///
    /// # Panics
    ///
    /// If `length` does not fit in 24 bits: an encoder bug, not input.
    pub fn write(&self, dst: &mut Vec<u8>) {
        dst.extend_from_slice(&self.encode());
    }

    /// The header's 9 bytes, for a writer that fills in a header after
    /// its payload.
    ///
    /// # Panics
    ///
    /// If `length` does not fit in 24 bits: an encoder bug, not input.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        assert!(
            self.length <= MAX_MAX_FRAME_SIZE,
            "frame length over 2^24-1"
        );
        let len = self.length.to_be_bytes();
        let stream = (self.stream.0 & 0x7fff_ffff).to_be_bytes();
        [
            len[1],
            len[2],
            len[3],
            self.kind.to_u8(),
            self.flags,
            stream[0],
            stream[1],
            stream[2],
            stream[3],
        ]
    }

    /// Whether `flag` (one of [`flags`]) is set.
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// Which end of the connection is reading: the rules for PUSH_PROMISE
/// and SETTINGS_ENABLE_PUSH differ (§6.5.2, §8.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A server reading a client's frames.
    Server,
    /// A client reading a server's frames.
    Client,
}

/// One parsed frame, borrowing its payload from the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// DATA (§6.1).
    Data(Data<'a>),
    /// HEADERS (§6.2).
    Headers(Headers<'a>),
    /// PRIORITY (§6.3): deprecated, parsed for its rules and ignored.
    Priority(Priority),
    /// RST_STREAM (§6.4).
    RstStream(RstStream),
    /// SETTINGS (§6.5), values already checked.
    Settings(Settings<'a>),
    /// PUSH_PROMISE (§6.6), only ever parsed for [`Role::Client`].
    PushPromise(PushPromise<'a>),
    /// PING (§6.7).
    Ping(Ping),
    /// GOAWAY (§6.8).
    GoAway(GoAway<'a>),
    /// WINDOW_UPDATE (§6.9).
    WindowUpdate(WindowUpdate),
    /// CONTINUATION (§6.10).
    Continuation(Continuation<'a>),
    /// A frame of an unknown type, to be ignored (§4.1).
    Unknown(FrameHeader),
}

/// Parses one frame from the start of `input`.
///
/// Returns `Ok(None)` until the whole frame has arrived, then the frame
/// and the number of bytes it took. After a stream error the frame is
/// still [`HEADER_LEN`] plus its header's length bytes long: a receiver
/// that only resets the stream skips them and goes on. `max_frame_size` is the
/// SETTINGS_MAX_FRAME_SIZE this end announced; a longer frame is refused
/// from its header alone, before its payload arrives.
///
/// # Errors
///
/// Any rule of §4.2 or §6 the frame breaks; see [`parse`].
pub fn decode(
    input: &[u8],
    max_frame_size: u32,
    role: Role,
) -> Result<Option<(Frame<'_>, usize)>, FrameError> {
    let Some(header) = FrameHeader::parse(input) else {
        return Ok(None);
    };
    check_length(&header, max_frame_size)?;
    let end = HEADER_LEN + header.length as usize;
    let Some(payload) = input.get(HEADER_LEN..end) else {
        return Ok(None);
    };
    parse(header, payload, role).map(|frame| Some((frame, end)))
}

/// Refuses a frame longer than `max_frame_size` (§4.2).
///
/// The error is a connection error for the frames that change the
/// connection's state (field blocks, SETTINGS, anything on stream 0)
/// and a stream error otherwise, as §4.2 says.
///
/// # Errors
///
/// FRAME_SIZE_ERROR when `header.length > max_frame_size`.
pub fn check_length(header: &FrameHeader, max_frame_size: u32) -> Result<(), FrameError> {
    if header.length <= max_frame_size {
        return Ok(());
    }
    let whole_connection = header.stream.is_zero()
        || matches!(
            header.kind,
            Kind::Headers | Kind::PushPromise | Kind::Continuation | Kind::Settings
        );
    Err(if whole_connection {
        FrameError::connection(
            ErrorCode::FrameSizeError,
            "frame longer than SETTINGS_MAX_FRAME_SIZE",
        )
    } else {
        FrameError::stream(
            header.stream,
            ErrorCode::FrameSizeError,
            "frame longer than SETTINGS_MAX_FRAME_SIZE",
        )
    })
}

/// Parses the payload of a frame whose header has been read.
///
/// # Errors
///
/// A [`FrameError`] for every rule the frame type breaks: a stream id
/// where none is allowed or none where one is needed (PROTOCOL_ERROR), a
/// length the type does not allow (FRAME_SIZE_ERROR), padding longer than
/// the payload, a zero window increment, SETTINGS values out of range,
/// and PUSH_PROMISE sent to a server.
pub fn parse<'a>(
    header: FrameHeader,
    payload: &'a [u8],
    role: Role,
) -> Result<Frame<'a>, FrameError> {
    if payload.len() != header.length as usize {
        return Err(FrameError::connection(
            ErrorCode::FrameSizeError,
            "payload shorter than the header's length",
        ));
    }
    Ok(match header.kind {
        Kind::Data => Frame::Data(Data::parse(header, payload)?),
        Kind::Headers => Frame::Headers(Headers::parse(header, payload)?),
        Kind::Priority => Frame::Priority(Priority::parse(header, payload)?),
        Kind::RstStream => Frame::RstStream(RstStream::parse(header, payload)?),
        Kind::Settings => Frame::Settings(Settings::parse(header, payload, role)?),
        Kind::PushPromise => Frame::PushPromise(PushPromise::parse(header, payload, role)?),
        Kind::Ping => Frame::Ping(Ping::parse(header, payload)?),
        Kind::GoAway => Frame::GoAway(GoAway::parse(header, payload)?),
        Kind::WindowUpdate => Frame::WindowUpdate(WindowUpdate::parse(header, payload)?),
        Kind::Continuation => Frame::Continuation(Continuation::parse(header, payload)?),
        Kind::Unknown(_) => Frame::Unknown(header),
    })
}
