//! Frame encoders: each appends a whole frame, header and payload, to a
//! caller's buffer, so a connection batches its output in one `Vec`.

use super::{flags, ErrorCode, FrameHeader, Kind, PrioritySpec, Setting, StreamId};

fn header(dst: &mut Vec<u8>, length: usize, kind: Kind, flags: u8, stream: StreamId) {
    let length = u32::try_from(length).unwrap_or(u32::MAX);
    FrameHeader {
        length,
        kind,
        flags,
        stream,
    }
    .write(dst);
}

/// Appends a DATA frame. The caller splits content by the peer's
/// SETTINGS_MAX_FRAME_SIZE and its flow control windows.
///
/// # Panics
///
/// If `data` is longer than 2^24-1 bytes, which no frame can carry.
pub fn write_data(dst: &mut Vec<u8>, stream: StreamId, data: &[u8], end_stream: bool) {
    let flags = if end_stream { flags::END_STREAM } else { 0 };
    header(dst, data.len(), Kind::Data, flags, stream);
    dst.extend_from_slice(data);
}

/// Appends a field block as one HEADERS frame, followed by as many
/// CONTINUATION frames as `max_frame_size` (the peer's
/// SETTINGS_MAX_FRAME_SIZE) requires. END_HEADERS is set on the last.
pub fn write_headers(
    dst: &mut Vec<u8>,
    stream: StreamId,
    block: &[u8],
    end_stream: bool,
    max_frame_size: u32,
) {
    let max = (max_frame_size as usize).max(1);
    let (first, mut rest) = block.split_at(block.len().min(max));
    let mut flags = if end_stream { flags::END_STREAM } else { 0 };
    if rest.is_empty() {
        flags |= flags::END_HEADERS;
    }
    header(dst, first.len(), Kind::Headers, flags, stream);
    dst.extend_from_slice(first);
    while !rest.is_empty() {
        let (piece, tail) = rest.split_at(rest.len().min(max));
        write_continuation(dst, stream, piece, tail.is_empty());
        rest = tail;
    }
}

/// Appends one CONTINUATION frame.
///
/// # Panics
///
/// If `block` is longer than 2^24-1 bytes, which no frame can carry.
pub fn write_continuation(dst: &mut Vec<u8>, stream: StreamId, block: &[u8], end_headers: bool) {
    let flags = if end_headers { flags::END_HEADERS } else { 0 };
    header(dst, block.len(), Kind::Continuation, flags, stream);
    dst.extend_from_slice(block);
}

/// Appends a PRIORITY frame.
pub fn write_priority(dst: &mut Vec<u8>, stream: StreamId, spec: PrioritySpec) {
    header(dst, 5, Kind::Priority, 0, stream);
    let word = spec.dependency.0 & 0x7fff_ffff | (spec.exclusive as u32) << 31;
    dst.extend_from_slice(&word.to_be_bytes());
    dst.push(spec.weight);
}

/// Appends an RST_STREAM frame.
pub fn write_rst(dst: &mut Vec<u8>, stream: StreamId, code: ErrorCode) {
    header(dst, 4, Kind::RstStream, 0, stream);
    dst.extend_from_slice(&code.to_u32().to_be_bytes());
}

/// Appends a SETTINGS frame carrying `settings`.
pub fn write_settings(dst: &mut Vec<u8>, settings: &[Setting]) {
    header(dst, settings.len() * 6, Kind::Settings, 0, StreamId::ZERO);
    for setting in settings {
        let (id, value) = setting.to_wire();
        dst.extend_from_slice(&id.to_be_bytes());
        dst.extend_from_slice(&value.to_be_bytes());
    }
}

/// Appends the acknowledgement of the peer's SETTINGS.
pub fn write_settings_ack(dst: &mut Vec<u8>) {
    header(dst, 0, Kind::Settings, flags::ACK, StreamId::ZERO);
}

/// Appends a PING, or with `ack` the answer to one.
pub fn write_ping(dst: &mut Vec<u8>, data: [u8; 8], ack: bool) {
    header(
        dst,
        8,
        Kind::Ping,
        if ack { flags::ACK } else { 0 },
        StreamId::ZERO,
    );
    dst.extend_from_slice(&data);
}

/// Appends a GOAWAY frame. Debug data past the first 16,376 bytes is
/// left out, so that the frame fits the smallest maximum frame size.
pub fn write_goaway(dst: &mut Vec<u8>, last_stream: StreamId, code: ErrorCode, debug: &[u8]) {
    let debug = &debug[..debug.len().min(super::DEFAULT_MAX_FRAME_SIZE as usize - 8)];
    header(dst, 8 + debug.len(), Kind::GoAway, 0, StreamId::ZERO);
    dst.extend_from_slice(&(last_stream.0 & 0x7fff_ffff).to_be_bytes());
    dst.extend_from_slice(&code.to_u32().to_be_bytes());
    dst.extend_from_slice(debug);
}

/// Appends a WINDOW_UPDATE frame; `stream` 0 is the connection's window.
pub fn write_window_update(dst: &mut Vec<u8>, stream: StreamId, increment: u32) {
    header(dst, 4, Kind::WindowUpdate, 0, stream);
    dst.extend_from_slice(&(increment & 0x7fff_ffff).to_be_bytes());
}
