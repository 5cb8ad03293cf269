//! A sans-IO HTTP/2 server connection: bytes in, events out, and an
//! output buffer the caller writes to the socket.
//!
//! [`Connection::receive`] checks the client preface, reads whole frames
//! and turns them into [`Event`]s: the fields of a request as they are
//! decoded, the end of its head, its body, resets, capacity to send. It
//! answers on its own what the protocol answers (SETTINGS ACK, PING ACK,
//! WINDOW_UPDATE once the application releases received data, RST_STREAM
//! and GOAWAY on errors) by appending frames to [`Connection::output`].
//! The application answers with [`Connection::send_headers`] and
//! [`Connection::send_data`], within the peer's flow control windows.
//!
//! # Limits
//!
//! - A frame above [`Config::max_frame_size`] ends the connection with
//!   FRAME_SIZE_ERROR, whatever its type (§4.2 allows a stream error for
//!   some; a connection error is always allowed, §5.4.1).
//! - SETTINGS_MAX_CONCURRENT_STREAMS: a stream over the limit is refused
//!   with RST_STREAM(REFUSED_STREAM) after its field block is decoded, so
//!   the HPACK context stays in step.
//! - A field block split over CONTINUATION frames is buffered up to the
//!   header list size limit and [`Config::max_continuation_frames`]
//!   frames; past either the connection ends with ENHANCE_YOUR_CALM (the
//!   CONTINUATION flood). A block in one frame is decoded in place.
//! - A request head must follow RFC 9113 §8.1.1, §8.2 and §8.3.1 (and
//!   RFC 8441 §4 for `:protocol`, allowed only with
//!   [`Config::enable_connect_protocol`]): pseudo-header fields known,
//!   once each, first, and those the method needs; lowercase token
//!   names; no connection-specific field; values without controls or
//!   edge whitespace; a `content-length` that the DATA frames match. A
//!   stream that breaks a rule is reset with PROTOCOL_ERROR: its fields
//!   already passed on end with [`Event::Reset`], not
//!   [`Event::Headers`].
//! - Streams the peer resets before they are answered, streams with a
//!   malformed head, and streams refused for the concurrency limit,
//!   count towards [`Config::max_rapid_resets`]; each stream answered in
//!   full takes one off. Past the bound the connection ends with ENHANCE_YOUR_CALM (the
//!   rapid reset attack, CVE-2023-44487).
//!
//! # Memory
//!
//! A connection allocates its stream store on the first request, the
//! HPACK table on the peer's first indexed field, and a block buffer only
//! for a block split over CONTINUATION. [`Connection::release_idle`]
//! frees what an idle connection does not need.

mod check;
mod recv;
mod send;
mod streams;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_load;
#[cfg(test)]
mod tests_rules;

use std::fmt;

use crate::frame::{self, ErrorCode, Setting, StreamId};
use crate::hpack;

pub use send::SendError;

/// What a server announces and enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: what a client may send on a stream
    /// before the application releases it.
    pub initial_window_size: u32,
    /// The connection's receive window (65,535 unless raised with a
    /// WINDOW_UPDATE at the start).
    pub connection_window_size: u32,
    /// SETTINGS_MAX_FRAME_SIZE.
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE, enforced while decoding.
    pub max_header_list_size: u32,
    /// SETTINGS_HEADER_TABLE_SIZE: the HPACK table the peer may fill,
    /// and so what a connection may keep for it (h2load's requests fill
    /// 160 octets; a table filled to 4096 keeps about 3.5 KiB). Lower
    /// saves memory per connection; the peer's blocks grow instead, as
    /// fewer fields can be sent as an index.
    pub header_table_size: u32,
    /// CONTINUATION frames allowed after one HEADERS.
    pub max_continuation_frames: u32,
    /// Streams the peer may reset unanswered, open past the
    /// concurrency limit, or open with a malformed head, net of streams
    /// answered.
    pub max_rapid_resets: u32,
    /// SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441 §3): requests may be
    /// an extended CONNECT, with a `:protocol` (a WebSocket over HTTP/2).
    pub enable_connect_protocol: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_concurrent_streams: 100,
            initial_window_size: 65_535,
            connection_window_size: 65_535,
            max_frame_size: frame::DEFAULT_MAX_FRAME_SIZE,
            max_header_list_size: 16 * 1024,
            header_table_size: 4096,
            max_continuation_frames: 16,
            max_rapid_resets: 100,
            enable_connect_protocol: false,
        }
    }
}

/// What the peer's frames mean to the application.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// One field of a request head or of trailers, in order.
    Field {
        /// The stream.
        stream: StreamId,
        /// The field name, lowercase if the peer follows RFC 9113 §8.2.1.
        name: &'a [u8],
        /// The value.
        value: &'a [u8],
        /// Sent "never indexed": forward it as such.
        sensitive: bool,
    },
    /// The end of a field block: a new request's head, or trailers.
    Headers {
        /// The stream.
        stream: StreamId,
        /// No body follows.
        end_stream: bool,
        /// Trailers of a stream already open, not a new request.
        trailers: bool,
        /// The list exceeded [`Config::max_header_list_size`]: only the
        /// fields within it were passed on. Answer 431.
        too_large: bool,
    },
    /// A piece of a request body. Hand its length back with
    /// [`Connection::release`] once consumed, so the peer may send more.
    Data {
        /// The stream.
        stream: StreamId,
        /// The bytes, padding removed.
        data: &'a [u8],
        /// The last piece.
        end_stream: bool,
    },
    /// A stream ended abruptly: reset by the peer, or by this end after
    /// a stream error. Whatever the application holds for it is void.
    Reset {
        /// The stream.
        stream: StreamId,
        /// The error code.
        code: ErrorCode,
        /// Whether the peer sent the RST_STREAM.
        remote: bool,
    },
    /// A send window grew: retry [`Connection::send_data`]. Stream 0
    /// means the connection's window, or every stream's.
    SendCapacity {
        /// The stream, or 0.
        stream: StreamId,
    },
    /// The peer is closing the connection: no stream above
    /// `last_stream` will be processed by it.
    GoAway {
        /// The last stream the peer may have processed.
        last_stream: StreamId,
        /// Why.
        code: ErrorCode,
    },
}

/// A connection error: GOAWAY has been written to the output; write it
/// out and close the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionError {
    /// The code sent in GOAWAY.
    pub code: ErrorCode,
    /// The rule broken.
    pub reason: &'static str,
}

impl fmt::Display for ConnectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "HTTP/2 connection error {:?}: {}",
            self.code, self.reason
        )
    }
}

impl std::error::Error for ConnectionError {}

/// A field block waiting for its CONTINUATION frames.
#[derive(Debug)]
struct Pending {
    stream: StreamId,
    end_stream: bool,
    self_dependent: bool,
    block: Vec<u8>,
    frames: u32,
}

/// One server connection's HTTP/2 state.
#[derive(Debug)]
pub struct Connection {
    config: Config,
    /// Bytes of the client preface matched so far.
    preface: usize,
    /// The peer's first frame, which must be SETTINGS, has arrived.
    peer_settings_seen: bool,
    /// Own SETTINGS frames sent and not yet acknowledged.
    settings_unacked: u32,
    /// The stream receive window in force: the protocol's 65,535 until
    /// the peer acknowledges [`Config::initial_window_size`].
    local_initial_window: u32,
    peer_initial_window: u32,
    peer_max_frame_size: u32,
    decoder: hpack::Decoder,
    encoder: hpack::Encoder,
    streams: streams::Streams,
    /// The highest stream id the client has used.
    last_stream: StreamId,
    /// GOAWAY sent: new streams are ignored.
    going_away: bool,
    /// A connection error happened: nothing more is read.
    failed: Option<ConnectionError>,
    conn_recv_window: i64,
    conn_recv_unacked: u32,
    conn_send_window: i64,
    pending: Option<Pending>,
    rapid_resets: u32,
    /// The last streams this end reset: a frame still in flight on one
    /// is a stream error, where a HEADERS frame on any other old id is
    /// an unexpected stream identifier (§5.1.1).
    reset_ids: [StreamId; 8],
    out: Vec<u8>,
}

impl Connection {
    /// A connection about to read the client preface. The server's own
    /// preface (its SETTINGS) is already in [`Connection::output`].
    pub fn new(config: Config) -> Connection {
        let mut config = config;
        config.max_frame_size = config
            .max_frame_size
            .clamp(frame::DEFAULT_MAX_FRAME_SIZE, frame::MAX_MAX_FRAME_SIZE);
        config.initial_window_size = config.initial_window_size.min(frame::MAX_WINDOW_SIZE);
        config.connection_window_size = config
            .connection_window_size
            .clamp(65_535, frame::MAX_WINDOW_SIZE);
        let mut decoder = hpack::Decoder::new();
        decoder.set_max_header_list_size(config.max_header_list_size as usize);
        let mut conn = Connection {
            config,
            preface: 0,
            peer_settings_seen: false,
            settings_unacked: 1,
            local_initial_window: 65_535,
            peer_initial_window: 65_535,
            peer_max_frame_size: frame::DEFAULT_MAX_FRAME_SIZE,
            decoder,
            encoder: hpack::Encoder::new(),
            streams: streams::Streams::default(),
            last_stream: StreamId::ZERO,
            going_away: false,
            failed: None,
            conn_recv_window: config.connection_window_size as i64,
            conn_recv_unacked: 0,
            conn_send_window: 65_535,
            pending: None,
            rapid_resets: 0,
            reset_ids: [StreamId::ZERO; 8],
            out: Vec::new(),
        };
        let settings = [
            Setting::EnablePush(false),
            Setting::MaxConcurrentStreams(config.max_concurrent_streams),
            Setting::InitialWindowSize(config.initial_window_size),
            Setting::MaxFrameSize(config.max_frame_size),
            Setting::MaxHeaderListSize(config.max_header_list_size),
            Setting::HeaderTableSize(config.header_table_size),
            Setting::EnableConnectProtocol(true),
        ];
        // The last is announced only when enabled (RFC 8441 §3).
        let announced = settings.len() - usize::from(!config.enable_connect_protocol);
        frame::write_settings(&mut conn.out, &settings[..announced]);
        if config.connection_window_size > 65_535 {
            let raise = config.connection_window_size - 65_535;
            frame::write_window_update(&mut conn.out, StreamId::ZERO, raise);
        }
        conn
    }

    /// Bytes to write to the socket. Remove what was written, e.g. with
    /// `drain(..n)` or `clear()`.
    pub fn output(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// The number of open streams.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Whether `stream` is open, and if so which ends have ended it:
    /// `(received END_STREAM, sent END_STREAM)`.
    pub fn stream_ends(&self, stream: StreamId) -> Option<(bool, bool)> {
        self.streams
            .find(stream)
            .map(|s| (s.recv_closed, s.send_closed))
    }

    /// Whether the client's preface and first SETTINGS have arrived.
    pub fn handshaken(&self) -> bool {
        self.peer_settings_seen
    }

    /// Whether GOAWAY was sent, by [`Connection::go_away`] or for a
    /// connection error.
    pub fn is_going_away(&self) -> bool {
        self.going_away
    }

    /// Bytes the connection keeps allocated: output, streams, HPACK.
    pub fn allocated(&self) -> usize {
        self.out.capacity()
            + self.streams.allocated()
            + self.decoder.allocated()
            + self.pending.as_ref().map_or(0, |p| p.block.capacity())
    }

    /// Frees the buffers an idle connection does not need: an empty
    /// output buffer, the stream store when no stream is open, and the
    /// HPACK decoder's scratch. The HPACK table stays: the peer's
    /// encoder may refer to it.
    pub fn release_idle(&mut self) {
        if self.out.is_empty() {
            self.out = Vec::new();
        }
        self.streams.release_if_empty();
        self.decoder.release_scratch();
    }

    /// Ends the connection with `code`: GOAWAY with the last stream seen,
    /// so the client knows which requests it may retry (§6.8). Streams
    /// already open may still be answered.
    pub fn go_away(&mut self, code: ErrorCode, debug: &[u8]) {
        self.going_away = true;
        frame::write_goaway(&mut self.out, self.last_stream, code, debug);
    }

    /// Writes RST_STREAM and remembers the stream as reset.
    fn write_rst(&mut self, stream: StreamId, code: ErrorCode) {
        frame::write_rst(&mut self.out, stream, code);
        self.reset_ids.rotate_right(1);
        self.reset_ids[0] = stream;
    }

    /// Whether `stream` is one of the last this end reset.
    fn recently_reset(&self, stream: StreamId) -> bool {
        self.reset_ids.contains(&stream)
    }

    /// Records a connection error: GOAWAY written, nothing more read.
    fn fail(&mut self, code: ErrorCode, reason: &'static str) -> ConnectionError {
        let error = ConnectionError { code, reason };
        if self.failed.is_none() {
            self.go_away(code, reason.as_bytes());
            self.failed = Some(error);
        }
        error
    }
}
