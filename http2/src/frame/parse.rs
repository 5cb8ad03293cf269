//! The payload of each frame type (§6), parsed in place with its rules.

use super::{flags, ErrorCode, FrameError, FrameHeader, Role, StreamId};

fn protocol(reason: &'static str) -> FrameError {
    FrameError::connection(ErrorCode::ProtocolError, reason)
}

fn frame_size(reason: &'static str) -> FrameError {
    FrameError::connection(ErrorCode::FrameSizeError, reason)
}

fn need_stream(header: &FrameHeader, reason: &'static str) -> Result<(), FrameError> {
    if header.stream.is_zero() {
        return Err(protocol(reason));
    }
    Ok(())
}

fn need_zero(header: &FrameHeader, reason: &'static str) -> Result<(), FrameError> {
    if !header.stream.is_zero() {
        return Err(protocol(reason));
    }
    Ok(())
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// Strips the pad length byte and the padding of a PADDED frame (§6.1):
/// padding as long as the rest of the payload or longer is a connection
/// error of type PROTOCOL_ERROR. `fixed` is how many bytes of fields sit
/// between the pad length and the data (5 for HEADERS with PRIORITY, 4
/// for PUSH_PROMISE); they are returned at the start of the slice.
fn unpad<'a>(
    header: &FrameHeader,
    payload: &'a [u8],
    fixed: usize,
) -> Result<&'a [u8], FrameError> {
    if !header.has(flags::PADDED) {
        if payload.len() < fixed {
            return Err(frame_size("payload too short for its fields"));
        }
        return Ok(payload);
    }
    let Some((&pad, rest)) = payload.split_first() else {
        return Err(frame_size("PADDED frame without a pad length"));
    };
    if rest.len() < fixed {
        return Err(frame_size("payload too short for its fields"));
    }
    let Some(end) = rest
        .len()
        .checked_sub(pad as usize)
        .filter(|&end| end >= fixed)
    else {
        return Err(protocol("padding longer than the payload"));
    };
    Ok(&rest[..end])
}

/// DATA (§6.1): a piece of a stream's content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Data<'a> {
    /// The stream, never 0.
    pub stream: StreamId,
    /// END_STREAM: the sender's last frame on this stream.
    pub end_stream: bool,
    /// The content, padding removed.
    pub data: &'a [u8],
    /// The whole payload length, padding included: what flow control
    /// counts (§6.9.1).
    pub flow_len: u32,
}

impl<'a> Data<'a> {
    pub(super) fn parse(header: FrameHeader, payload: &'a [u8]) -> Result<Self, FrameError> {
        need_stream(&header, "DATA on stream 0")?;
        Ok(Data {
            stream: header.stream,
            end_stream: header.has(flags::END_STREAM),
            data: unpad(&header, payload, 0)?,
            flow_len: header.length,
        })
    }
}

/// The deprecated priority fields of HEADERS and PRIORITY (§5.3.2, §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrioritySpec {
    /// The stream this one depends on.
    pub dependency: StreamId,
    /// The exclusive bit.
    pub exclusive: bool,
    /// The weight, minus one, as sent.
    pub weight: u8,
}

impl PrioritySpec {
    fn parse(fields: &[u8]) -> PrioritySpec {
        let word = u32_at(fields, 0);
        PrioritySpec {
            dependency: StreamId(word & 0x7fff_ffff),
            exclusive: word >> 31 == 1,
            weight: fields[4],
        }
    }
}

/// HEADERS (§6.2): opens a stream, or carries trailers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Headers<'a> {
    /// The stream, never 0.
    pub stream: StreamId,
    /// END_STREAM.
    pub end_stream: bool,
    /// END_HEADERS: no CONTINUATION follows.
    pub end_headers: bool,
    /// The priority fields, when the PRIORITY flag was set. A stream
    /// that depends on itself is a stream error (§5.3.1), which the
    /// receiver raises after decoding the block to keep its HPACK state:
    /// see [`Headers::depends_on_itself`].
    pub priority: Option<PrioritySpec>,
    /// The field block fragment, padding removed.
    pub block: &'a [u8],
}

impl<'a> Headers<'a> {
    pub(super) fn parse(header: FrameHeader, payload: &'a [u8]) -> Result<Self, FrameError> {
        need_stream(&header, "HEADERS on stream 0")?;
        let has_priority = header.has(flags::PRIORITY);
        let fixed = if has_priority { 5 } else { 0 };
        let body = unpad(&header, payload, fixed)?;
        let priority = has_priority.then(|| PrioritySpec::parse(body));
        Ok(Headers {
            stream: header.stream,
            end_stream: header.has(flags::END_STREAM),
            end_headers: header.has(flags::END_HEADERS),
            priority,
            block: &body[fixed..],
        })
    }
}

impl Headers<'_> {
    /// Whether the priority fields name the frame's own stream, a stream
    /// error of type PROTOCOL_ERROR (§5.3.1).
    pub fn depends_on_itself(&self) -> bool {
        self.priority.is_some_and(|p| p.dependency == self.stream)
    }
}

/// PRIORITY (§6.3): deprecated; a receiver checks and ignores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Priority {
    /// The stream, never 0.
    pub stream: StreamId,
    /// The fields.
    pub spec: PrioritySpec,
}

impl Priority {
    pub(super) fn parse(header: FrameHeader, payload: &[u8]) -> Result<Self, FrameError> {
        need_stream(&header, "PRIORITY on stream 0")?;
        if payload.len() != 5 {
            return Err(FrameError::stream(
                header.stream,
                ErrorCode::FrameSizeError,
                "PRIORITY length is not 5",
            ));
        }
        let spec = PrioritySpec::parse(payload);
        // §5.3.1: a stream cannot depend on itself.
        if spec.dependency == header.stream {
            return Err(FrameError::stream(
                header.stream,
                ErrorCode::ProtocolError,
                "stream depends on itself",
            ));
        }
        Ok(Priority {
            stream: header.stream,
            spec,
        })
    }
}

/// RST_STREAM (§6.4): the immediate end of a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RstStream {
    /// The stream, never 0.
    pub stream: StreamId,
    /// Why.
    pub code: ErrorCode,
}

impl RstStream {
    pub(super) fn parse(header: FrameHeader, payload: &[u8]) -> Result<Self, FrameError> {
        need_stream(&header, "RST_STREAM on stream 0")?;
        if payload.len() != 4 {
            return Err(frame_size("RST_STREAM length is not 4"));
        }
        Ok(RstStream {
            stream: header.stream,
            code: ErrorCode::from_u32(u32_at(payload, 0)),
        })
    }
}

/// PUSH_PROMISE (§6.6): a server's announcement of a pushed stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PushPromise<'a> {
    /// The stream the promise is made on.
    pub stream: StreamId,
    /// The stream the server reserves.
    pub promised: StreamId,
    /// END_HEADERS.
    pub end_headers: bool,
    /// The field block fragment, padding removed.
    pub block: &'a [u8],
}

impl<'a> PushPromise<'a> {
    pub(super) fn parse(
        header: FrameHeader,
        payload: &'a [u8],
        role: Role,
    ) -> Result<Self, FrameError> {
        // §8.4: a client cannot push; a server that receives PUSH_PROMISE
        // treats it as a connection error of type PROTOCOL_ERROR.
        if role == Role::Server {
            return Err(protocol("PUSH_PROMISE sent to a server"));
        }
        need_stream(&header, "PUSH_PROMISE on stream 0")?;
        let body = unpad(&header, payload, 4)?;
        Ok(PushPromise {
            stream: header.stream,
            promised: StreamId(u32_at(body, 0) & 0x7fff_ffff),
            end_headers: header.has(flags::END_HEADERS),
            block: &body[4..],
        })
    }
}

/// PING (§6.7): a round trip measure and liveness check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ping {
    /// ACK: this answers a PING.
    pub ack: bool,
    /// The opaque data, echoed in the answer.
    pub data: [u8; 8],
}

impl Ping {
    pub(super) fn parse(header: FrameHeader, payload: &[u8]) -> Result<Self, FrameError> {
        need_zero(&header, "PING on a stream")?;
        let Ok(data) = payload.try_into() else {
            return Err(frame_size("PING length is not 8"));
        };
        Ok(Ping {
            ack: header.has(flags::ACK),
            data,
        })
    }
}

/// GOAWAY (§6.8): the connection is ending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoAway<'a> {
    /// The highest stream id the sender may have processed.
    pub last_stream: StreamId,
    /// Why.
    pub code: ErrorCode,
    /// Opaque diagnostic data.
    pub debug: &'a [u8],
}

impl<'a> GoAway<'a> {
    pub(super) fn parse(header: FrameHeader, payload: &'a [u8]) -> Result<Self, FrameError> {
        need_zero(&header, "GOAWAY on a stream")?;
        if payload.len() < 8 {
            return Err(frame_size("GOAWAY shorter than 8"));
        }
        Ok(GoAway {
            last_stream: StreamId(u32_at(payload, 0) & 0x7fff_ffff),
            code: ErrorCode::from_u32(u32_at(payload, 4)),
            debug: &payload[8..],
        })
    }
}

/// WINDOW_UPDATE (§6.9): more room in a flow control window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowUpdate {
    /// The stream, or 0 for the connection's window.
    pub stream: StreamId,
    /// The increment, 1 to 2^31-1.
    pub increment: u32,
}

impl WindowUpdate {
    pub(super) fn parse(header: FrameHeader, payload: &[u8]) -> Result<Self, FrameError> {
        if payload.len() != 4 {
            return Err(frame_size("WINDOW_UPDATE length is not 4"));
        }
        let increment = u32_at(payload, 0) & 0x7fff_ffff;
        if increment == 0 {
            let reason = "WINDOW_UPDATE increment of 0";
            return Err(match header.stream.is_zero() {
                true => protocol(reason),
                false => FrameError::stream(header.stream, ErrorCode::ProtocolError, reason),
            });
        }
        Ok(WindowUpdate {
            stream: header.stream,
            increment,
        })
    }
}

/// CONTINUATION (§6.10): the rest of a field block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Continuation<'a> {
    /// The stream, never 0.
    pub stream: StreamId,
    /// END_HEADERS: the block ends here.
    pub end_headers: bool,
    /// The field block fragment.
    pub block: &'a [u8],
}

impl<'a> Continuation<'a> {
    pub(super) fn parse(header: FrameHeader, payload: &'a [u8]) -> Result<Self, FrameError> {
        need_stream(&header, "CONTINUATION on stream 0")?;
        Ok(Continuation {
            stream: header.stream,
            end_headers: header.has(flags::END_HEADERS),
            block: payload,
        })
    }
}
