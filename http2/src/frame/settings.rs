//! SETTINGS (§6.5): the parameters each end announces, checked once on
//! parse so that iterating them later cannot fail.

use super::DEFAULT_MAX_FRAME_SIZE;
use super::{flags, ErrorCode, FrameError, FrameHeader, Role, MAX_MAX_FRAME_SIZE, MAX_WINDOW_SIZE};

/// One known setting (§6.5.2, RFC 8441 §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// 0x1 SETTINGS_HEADER_TABLE_SIZE: the HPACK table the sender's decoder keeps.
    HeaderTableSize(u32),
    /// 0x2 SETTINGS_ENABLE_PUSH.
    EnablePush(bool),
    /// 0x3 SETTINGS_MAX_CONCURRENT_STREAMS.
    MaxConcurrentStreams(u32),
    /// 0x4 SETTINGS_INITIAL_WINDOW_SIZE, at most 2^31-1.
    InitialWindowSize(u32),
    /// 0x5 SETTINGS_MAX_FRAME_SIZE, 16384 to 2^24-1.
    MaxFrameSize(u32),
    /// 0x6 SETTINGS_MAX_HEADER_LIST_SIZE.
    MaxHeaderListSize(u32),
    /// 0x8 SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441).
    EnableConnectProtocol(bool),
}

impl Setting {
    /// The identifier and value on the wire.
    pub fn to_wire(self) -> (u16, u32) {
        match self {
            Setting::HeaderTableSize(v) => (0x1, v),
            Setting::EnablePush(v) => (0x2, v as u32),
            Setting::MaxConcurrentStreams(v) => (0x3, v),
            Setting::InitialWindowSize(v) => (0x4, v),
            Setting::MaxFrameSize(v) => (0x5, v),
            Setting::MaxHeaderListSize(v) => (0x6, v),
            Setting::EnableConnectProtocol(v) => (0x8, v as u32),
        }
    }

    /// The setting an identifier and value name: `Ok(None)` for an
    /// unknown identifier, which a receiver ignores (§6.5.2).
    ///
    /// # Errors
    ///
    /// A value out of its range: PROTOCOL_ERROR, or FLOW_CONTROL_ERROR
    /// for SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1. As a client,
    /// SETTINGS_ENABLE_PUSH of 1 is a PROTOCOL_ERROR too (§6.5.2).
    pub fn from_wire(id: u16, value: u32, role: Role) -> Result<Option<Setting>, FrameError> {
        let protocol = |reason| FrameError::connection(ErrorCode::ProtocolError, reason);
        let flag = |reason| match value {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(protocol(reason)),
        };
        Ok(Some(match id {
            0x1 => Setting::HeaderTableSize(value),
            0x2 => {
                let push = flag("SETTINGS_ENABLE_PUSH not 0 or 1")?;
                if push && role == Role::Client {
                    return Err(protocol("server sent SETTINGS_ENABLE_PUSH of 1"));
                }
                Setting::EnablePush(push)
            }
            0x3 => Setting::MaxConcurrentStreams(value),
            0x4 if value > MAX_WINDOW_SIZE => {
                return Err(FrameError::connection(
                    ErrorCode::FlowControlError,
                    "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                ))
            }
            0x4 => Setting::InitialWindowSize(value),
            0x5 if !(DEFAULT_MAX_FRAME_SIZE..=MAX_MAX_FRAME_SIZE).contains(&value) => {
                return Err(protocol("SETTINGS_MAX_FRAME_SIZE out of 16384..=16777215"))
            }
            0x5 => Setting::MaxFrameSize(value),
            0x6 => Setting::MaxHeaderListSize(value),
            0x8 => {
                Setting::EnableConnectProtocol(flag("SETTINGS_ENABLE_CONNECT_PROTOCOL not 0 or 1")?)
            }
            _ => return Ok(None),
        }))
    }
}

/// A SETTINGS frame: an acknowledgement, or a list of checked values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings<'a> {
    /// ACK: this acknowledges the peer's SETTINGS and carries none.
    pub ack: bool,
    payload: &'a [u8],
    role: Role,
}

impl<'a> Settings<'a> {
    pub(super) fn parse(
        header: FrameHeader,
        payload: &'a [u8],
        role: Role,
    ) -> Result<Self, FrameError> {
        if !header.stream.is_zero() {
            return Err(FrameError::connection(
                ErrorCode::ProtocolError,
                "SETTINGS on a stream",
            ));
        }
        let ack = header.has(flags::ACK);
        if ack && !payload.is_empty() {
            return Err(FrameError::connection(
                ErrorCode::FrameSizeError,
                "SETTINGS ACK with a payload",
            ));
        }
        if payload.len() % 6 != 0 {
            return Err(FrameError::connection(
                ErrorCode::FrameSizeError,
                "SETTINGS length not a multiple of 6",
            ));
        }
        let settings = Settings { ack, payload, role };
        // Check every value now, so that iterating cannot fail later.
        for (id, value) in settings.raw() {
            Setting::from_wire(id, value, role)?;
        }
        Ok(settings)
    }

    fn raw(&self) -> impl Iterator<Item = (u16, u32)> + 'a {
        self.payload.chunks_exact(6).map(|c| {
            (
                u16::from_be_bytes([c[0], c[1]]),
                u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
            )
        })
    }

    /// The known settings, in the order sent; unknown ones are skipped.
    pub fn iter(&self) -> SettingsIter<'a> {
        SettingsIter {
            chunks: self.payload.chunks_exact(6),
            role: self.role,
        }
    }
}

/// The known settings of a [`Settings`] frame, in the order sent.
#[derive(Clone, Debug)]
pub struct SettingsIter<'a> {
    chunks: std::slice::ChunksExact<'a, u8>,
    role: Role,
}

impl Iterator for SettingsIter<'_> {
    type Item = Setting;

    fn next(&mut self) -> Option<Setting> {
        for c in self.chunks.by_ref() {
            let id = u16::from_be_bytes([c[0], c[1]]);
            let value = u32::from_be_bytes([c[2], c[3], c[4], c[5]]);
            // Checked in `Settings::parse`: only unknown ids give `Ok(None)`.
            if let Ok(Some(setting)) = Setting::from_wire(id, value, self.role) {
                return Some(setting);
            }
        }
        None
    }
}
