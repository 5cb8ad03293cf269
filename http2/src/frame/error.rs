//! The error codes of RFC 9113 §7 and the typed refusal of a frame.

use std::fmt;

use super::StreamId;

/// An HTTP/2 error code (§7), as RST_STREAM and GOAWAY carry it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 0x0: graceful shutdown, or no error.
    NoError,
    /// 0x1: a protocol rule was broken.
    ProtocolError,
    /// 0x2: the endpoint failed on its own.
    InternalError,
    /// 0x3: the flow control protocol was broken.
    FlowControlError,
    /// 0x4: SETTINGS were not acknowledged in time.
    SettingsTimeout,
    /// 0x5: a frame arrived on a half-closed stream.
    StreamClosed,
    /// 0x6: a frame had a wrong size.
    FrameSizeError,
    /// 0x7: the stream was refused before any processing.
    RefusedStream,
    /// 0x8: the stream is no longer needed.
    Cancel,
    /// 0x9: the HPACK context cannot be kept.
    CompressionError,
    /// 0xa: a CONNECT tunnel's connection failed.
    ConnectError,
    /// 0xb: the peer is generating excessive load.
    EnhanceYourCalm,
    /// 0xc: the transport's security is too weak.
    InadequateSecurity,
    /// 0xd: the endpoint requires HTTP/1.1.
    Http11Required,
    /// A code this crate does not know, kept as received (§7: it must
    /// not trigger any special behaviour).
    Unknown(u32),
}

impl ErrorCode {
    /// The code a 32-bit wire value names.
    pub fn from_u32(code: u32) -> ErrorCode {
        match code {
            0x0 => ErrorCode::NoError,
            0x1 => ErrorCode::ProtocolError,
            0x2 => ErrorCode::InternalError,
            0x3 => ErrorCode::FlowControlError,
            0x4 => ErrorCode::SettingsTimeout,
            0x5 => ErrorCode::StreamClosed,
            0x6 => ErrorCode::FrameSizeError,
            0x7 => ErrorCode::RefusedStream,
            0x8 => ErrorCode::Cancel,
            0x9 => ErrorCode::CompressionError,
            0xa => ErrorCode::ConnectError,
            0xb => ErrorCode::EnhanceYourCalm,
            0xc => ErrorCode::InadequateSecurity,
            0xd => ErrorCode::Http11Required,
            other => ErrorCode::Unknown(other),
        }
    }

    /// The 32-bit wire value.
    pub fn to_u32(self) -> u32 {
        match self {
            ErrorCode::NoError => 0x0,
            ErrorCode::ProtocolError => 0x1,
            ErrorCode::InternalError => 0x2,
            ErrorCode::FlowControlError => 0x3,
            ErrorCode::SettingsTimeout => 0x4,
            ErrorCode::StreamClosed => 0x5,
            ErrorCode::FrameSizeError => 0x6,
            ErrorCode::RefusedStream => 0x7,
            ErrorCode::Cancel => 0x8,
            ErrorCode::CompressionError => 0x9,
            ErrorCode::ConnectError => 0xa,
            ErrorCode::EnhanceYourCalm => 0xb,
            ErrorCode::InadequateSecurity => 0xc,
            ErrorCode::Http11Required => 0xd,
            ErrorCode::Unknown(other) => other,
        }
    }
}

/// How far an error reaches (§5.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Answer with GOAWAY and close the connection (§5.4.1).
    Connection,
    /// Answer with RST_STREAM on this stream; the connection goes on (§5.4.2).
    Stream(StreamId),
}

/// A frame that breaks a rule of RFC 9113: what to answer, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameError {
    /// The code to send in GOAWAY or RST_STREAM.
    pub code: ErrorCode,
    /// Whether the connection or only one stream ends.
    pub scope: Scope,
    /// The rule broken, for logs and GOAWAY debug data.
    pub reason: &'static str,
}

impl FrameError {
    /// A connection error (§5.4.1).
    pub fn connection(code: ErrorCode, reason: &'static str) -> FrameError {
        FrameError {
            code,
            scope: Scope::Connection,
            reason,
        }
    }

    /// A stream error on `stream` (§5.4.2).
    pub fn stream(stream: StreamId, code: ErrorCode, reason: &'static str) -> FrameError {
        FrameError {
            code,
            scope: Scope::Stream(stream),
            reason,
        }
    }

    /// Whether the whole connection must end.
    pub fn is_connection_error(&self) -> bool {
        self.scope == Scope::Connection
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.scope {
            Scope::Connection => write!(f, "connection error {:?}: {}", self.code, self.reason),
            Scope::Stream(id) => {
                write!(f, "stream {} error {:?}: {}", id.0, self.code, self.reason)
            }
        }
    }
}

impl std::error::Error for FrameError {}
