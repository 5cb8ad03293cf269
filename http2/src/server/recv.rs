//! Reading: the preface, then frame by frame into events.

use super::check::HeadCheck;
use super::streams::Stream;
use super::{Connection, ConnectionError, Event, Pending};
use crate::frame::{
    self, Continuation, Data, ErrorCode, Frame, FrameHeader, Headers, Role, RstStream, Scope,
    Settings, StreamId, WindowUpdate, HEADER_LEN, MAX_WINDOW_SIZE, PREFACE,
};
use crate::hpack::HpackError;

/// What becomes of a field block's stream once the block is decoded.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fate {
    Open,
    Trailers,
    Refuse(ErrorCode),
    Ignore,
}

impl Connection {
    /// Reads as many whole frames from `input` as it holds, calling `on`
    /// for each event, and returns how many bytes were used. Keep the
    /// rest (a partial frame) and pass it again with more bytes.
    ///
    /// Frames the protocol answers on its own (PING, SETTINGS) and stream
    /// errors append to [`Connection::output`]: stop passing input while
    /// the output waits to be written, so that a peer that does not read
    /// cannot grow it.
    ///
    /// # Errors
    ///
    /// A connection error: GOAWAY is in [`Connection::output`]; write it
    /// and close. Every later call returns the same error.
    pub fn receive<F>(&mut self, input: &[u8], mut on: F) -> Result<usize, ConnectionError>
    where
        F: FnMut(Event<'_>),
    {
        if let Some(error) = self.failed {
            return Err(error);
        }
        let mut pos = 0;
        if self.preface < PREFACE.len() {
            let want = &PREFACE[self.preface..];
            let n = want.len().min(input.len());
            if input[..n] != want[..n] {
                return Err(self.fail(ErrorCode::ProtocolError, "invalid connection preface"));
            }
            self.preface += n;
            pos = n;
        }
        if self.preface < PREFACE.len() {
            return Ok(pos);
        }
        while let Some(header) = FrameHeader::parse(&input[pos..]) {
            if frame::check_length(&header, self.config.max_frame_size).is_err() {
                return Err(self.fail(
                    ErrorCode::FrameSizeError,
                    "frame above SETTINGS_MAX_FRAME_SIZE",
                ));
            }
            let end = pos + HEADER_LEN + header.length as usize;
            let Some(payload) = input.get(pos + HEADER_LEN..end) else {
                break;
            };
            match frame::parse(header, payload, Role::Server) {
                Ok(frame) => self.on_frame(frame, &mut on)?,
                Err(e) => match e.scope {
                    Scope::Connection => return Err(self.fail(e.code, e.reason)),
                    // Inside a field block, or before SETTINGS, any other
                    // frame is a connection error already (§6.10, §3.4).
                    Scope::Stream(_) if self.pending.is_some() || !self.peer_settings_seen => {
                        return Err(self.fail(ErrorCode::ProtocolError, "unexpected frame"));
                    }
                    // RST_STREAM must not be sent on an idle stream (§6.4).
                    Scope::Stream(id) if self.is_idle(id) => {
                        return Err(self.fail(e.code, e.reason));
                    }
                    Scope::Stream(id) => self.stream_error(id, e.code, &mut on),
                },
            }
            pos = end;
        }
        Ok(pos)
    }

    fn on_frame<F>(&mut self, frame: Frame<'_>, on: &mut F) -> Result<(), ConnectionError>
    where
        F: FnMut(Event<'_>),
    {
        if let Some(pending) = &self.pending {
            // §6.10: a field block's frames are contiguous.
            if !matches!(frame, Frame::Continuation(c) if c.stream == pending.stream) {
                return Err(self.fail(ErrorCode::ProtocolError, "frame inside a field block"));
            }
        }
        if !self.peer_settings_seen && !matches!(frame, Frame::Settings(s) if !s.ack) {
            // §3.4: the client preface ends with a SETTINGS frame.
            return Err(self.fail(ErrorCode::ProtocolError, "first frame is not SETTINGS"));
        }
        match frame {
            Frame::Data(data) => self.on_data(data, on),
            Frame::Headers(headers) => self.on_headers(headers, on),
            Frame::Continuation(cont) => self.on_continuation(cont, on),
            Frame::RstStream(rst) => self.on_rst(rst, on),
            Frame::Settings(settings) => self.on_settings(settings, on),
            Frame::Ping(ping) => {
                if !ping.ack {
                    frame::write_ping(&mut self.out, ping.data, true);
                }
                Ok(())
            }
            Frame::GoAway(goaway) => {
                on(Event::GoAway {
                    last_stream: goaway.last_stream,
                    code: goaway.code,
                });
                Ok(())
            }
            Frame::WindowUpdate(update) => self.on_window_update(update, on),
            // Deprecated (§5.3.2) and unknown (§5.5) frames are ignored;
            // PUSH_PROMISE never parses for a server.
            Frame::Priority(_) | Frame::Unknown(_) | Frame::PushPromise(_) => Ok(()),
        }
    }

    fn on_headers<F>(&mut self, headers: Headers<'_>, on: &mut F) -> Result<(), ConnectionError>
    where
        F: FnMut(Event<'_>),
    {
        let self_dependent = headers.depends_on_itself();
        if headers.end_headers {
            return self.on_block(
                headers.stream,
                headers.end_stream,
                self_dependent,
                headers.block,
                on,
            );
        }
        if headers.block.len() > self.block_limit() {
            return Err(self.fail(ErrorCode::EnhanceYourCalm, "field block too large"));
        }
        self.pending = Some(Pending {
            stream: headers.stream,
            end_stream: headers.end_stream,
            self_dependent,
            block: headers.block.to_vec(),
            frames: 0,
        });
        Ok(())
    }

    fn on_continuation<F>(
        &mut self,
        cont: Continuation<'_>,
        on: &mut F,
    ) -> Result<(), ConnectionError>
    where
        F: FnMut(Event<'_>),
    {
        let Some(mut pending) = self.pending.take() else {
            return Err(self.fail(
                ErrorCode::ProtocolError,
                "CONTINUATION without a field block",
            ));
        };
        pending.frames += 1;
        if pending.frames > self.config.max_continuation_frames
            || pending.block.len() + cont.block.len() > self.block_limit()
        {
            return Err(self.fail(ErrorCode::EnhanceYourCalm, "CONTINUATION flood"));
        }
        pending.block.extend_from_slice(cont.block);
        if !cont.end_headers {
            self.pending = Some(pending);
            return Ok(());
        }
        self.on_block(
            pending.stream,
            pending.end_stream,
            pending.self_dependent,
            &pending.block,
            on,
        )
    }

    /// The most bytes a field block split over frames may take: an
    /// encoded list is never longer than its decoded size, plus the size
    /// updates at its start.
    fn block_limit(&self) -> usize {
        self.config.max_header_list_size as usize + 64
    }

    /// A whole field block: decode it (always, to keep the HPACK
    /// context), then open the stream, refuse it, or end its trailers.
    fn on_block<F>(
        &mut self,
        stream: StreamId,
        end_stream: bool,
        self_dependent: bool,
        block: &[u8],
        on: &mut F,
    ) -> Result<(), ConnectionError>
    where
        F: FnMut(Event<'_>),
    {
        if !stream.is_client_initiated() {
            return Err(self.fail(ErrorCode::ProtocolError, "HEADERS on a server stream id"));
        }
        let recently_reset = self.recently_reset(stream);
        let mut fate = match self.streams.get(stream) {
            Some(s) if s.recv_closed => Fate::Refuse(ErrorCode::StreamClosed),
            Some(_) => Fate::Trailers,
            // A stream this end reset: the client may not know yet.
            None if stream <= self.last_stream && recently_reset => {
                Fate::Refuse(ErrorCode::StreamClosed)
            }
            // An old id, never opened or closed by both ends: §5.1.1.
            None if stream <= self.last_stream => {
                return Err(self.fail(
                    ErrorCode::ProtocolError,
                    "HEADERS on a closed or unused stream id",
                ));
            }
            None => {
                self.last_stream = stream;
                if self.going_away {
                    Fate::Ignore
                } else if self.streams.len() >= self.config.max_concurrent_streams as usize {
                    Fate::Refuse(ErrorCode::RefusedStream)
                } else {
                    Fate::Open
                }
            }
        };
        if self_dependent && matches!(fate, Fate::Open | Fate::Trailers) {
            fate = Fate::Refuse(ErrorCode::ProtocolError);
        }
        if fate == Fate::Trailers && !end_stream {
            // §8.1: trailers end the stream.
            fate = Fate::Refuse(ErrorCode::ProtocolError);
        }
        let deliver = matches!(fate, Fate::Open | Fate::Trailers);
        let mut check = match fate {
            Fate::Trailers => HeadCheck::trailers(),
            _ => HeadCheck::request(self.config.enable_connect_protocol),
        };
        let result = self.decoder.decode(block, |name, value, sensitive| {
            if deliver {
                check.field(name, value);
                on(Event::Field {
                    stream,
                    name,
                    value,
                    sensitive,
                });
            }
        });
        let too_large = match result {
            Ok(()) => false,
            Err(HpackError::HeaderListTooLarge) => true,
            Err(_) => return Err(self.fail(ErrorCode::CompressionError, "HPACK decoding failed")),
        };
        // A list cut short for its size is answered 431 by the
        // application; what is missing of it cannot be judged. A block
        // refused or ignored is not judged either.
        let verdict = if too_large || !deliver {
            Ok(None)
        } else {
            check.finish()
        };
        let verdict = verdict.and_then(|length| match fate {
            Fate::Open if end_stream && length.is_some_and(|n| n > 0) => {
                Err("content-length with no DATA")
            }
            Fate::Trailers if self.length_left(stream).is_some_and(|n| n > 0) => {
                Err("content-length longer than the DATA")
            }
            _ => Ok(length),
        });
        let length = match verdict {
            Ok(length) => length,
            Err(_) if fate == Fate::Open => {
                // Its fields went out: the application hears the end.
                self.write_rst(stream, ErrorCode::ProtocolError);
                on(Event::Reset {
                    stream,
                    code: ErrorCode::ProtocolError,
                    remote: false,
                });
                return self.count_rapid_reset();
            }
            Err(_) => {
                self.stream_error(stream, ErrorCode::ProtocolError, on);
                return Ok(());
            }
        };
        match fate {
            Fate::Open => {
                self.streams.insert(Stream {
                    length_left: length,
                    id: stream,
                    recv_closed: end_stream,
                    send_closed: false,
                    answered: false,
                    recv_window: self.local_initial_window as i64,
                    recv_unacked: 0,
                    send_window: self.peer_initial_window as i64,
                });
                on(Event::Headers {
                    stream,
                    end_stream,
                    trailers: false,
                    too_large,
                });
            }
            Fate::Trailers => {
                if let Some(s) = self.streams.get(stream) {
                    s.recv_closed = true;
                }
                on(Event::Headers {
                    stream,
                    end_stream,
                    trailers: true,
                    too_large,
                });
                self.close_if_done(stream);
            }
            Fate::Refuse(code) => {
                self.stream_error(stream, code, on);
                // Streams refused for the limit cost a decode and a frame
                // each: they count as rapid resets do.
                if code == ErrorCode::RefusedStream {
                    self.count_rapid_reset()?;
                }
            }
            Fate::Ignore => {}
        }
        Ok(())
    }

    fn on_data<F>(&mut self, data: Data<'_>, on: &mut F) -> Result<(), ConnectionError>
    where
        F: FnMut(Event<'_>),
    {
        let len = data.flow_len as i64;
        if len > self.conn_recv_window {
            return Err(self.fail(
                ErrorCode::FlowControlError,
                "DATA beyond the connection window",
            ));
        }
        self.conn_recv_window -= len;
        let padding = data.flow_len - data.data.len() as u32;
        let idle = self.is_idle(data.stream);
        let payload = data.data.len() as u64;
        let code = match self.streams.get(data.stream) {
            Some(s) if !s.recv_closed && len <= s.recv_window => {
                s.recv_window -= len;
                s.recv_closed = data.end_stream;
                match &mut s.length_left {
                    // §8.1.1: the body is longer or shorter than said.
                    Some(left) if payload > *left => Some(ErrorCode::ProtocolError),
                    Some(left) if data.end_stream && payload != *left => {
                        Some(ErrorCode::ProtocolError)
                    }
                    Some(left) => {
                        *left -= payload;
                        None
                    }
                    None => None,
                }
            }
            Some(s) if !s.recv_closed => Some(ErrorCode::FlowControlError),
            Some(_) => Some(ErrorCode::StreamClosed),
            None if idle => {
                return Err(self.fail(ErrorCode::ProtocolError, "DATA on an idle stream"));
            }
            None => Some(ErrorCode::StreamClosed),
        };
        if let Some(code) = code {
            // Refused data still counted against the connection window
            // (§6.9): give it back at once.
            self.release_connection(data.flow_len);
            self.stream_error(data.stream, code, on);
            return Ok(());
        }
        // Padding is flow controlled but never reaches the application.
        self.release(data.stream, padding);
        on(Event::Data {
            stream: data.stream,
            data: data.data,
            end_stream: data.end_stream,
        });
        if data.end_stream {
            self.close_if_done(data.stream);
        }
        Ok(())
    }

    fn on_rst<F>(&mut self, rst: RstStream, on: &mut F) -> Result<(), ConnectionError>
    where
        F: FnMut(Event<'_>),
    {
        match self.streams.remove(rst.stream) {
            Some(stream) => {
                if !stream.answered {
                    self.count_rapid_reset()?;
                }
                on(Event::Reset {
                    stream: rst.stream,
                    code: rst.code,
                    remote: true,
                });
                Ok(())
            }
            None if self.is_idle(rst.stream) => {
                Err(self.fail(ErrorCode::ProtocolError, "RST_STREAM on an idle stream"))
            }
            None => Ok(()),
        }
    }

    fn on_settings<F>(&mut self, settings: Settings<'_>, on: &mut F) -> Result<(), ConnectionError>
    where
        F: FnMut(Event<'_>),
    {
        if settings.ack {
            if self.settings_unacked > 0 {
                self.settings_unacked -= 1;
                self.apply_own_settings();
            }
            return Ok(());
        }
        self.peer_settings_seen = true;
        let mut more_capacity = false;
        for setting in settings.iter() {
            match setting {
                frame::Setting::HeaderTableSize(size) => self.encoder.set_peer_table_size(size),
                frame::Setting::InitialWindowSize(size) => {
                    // §6.9.2: the change applies to every open stream.
                    let delta = size as i64 - self.peer_initial_window as i64;
                    self.peer_initial_window = size;
                    let mut overflow = false;
                    for s in self.streams.iter_mut() {
                        s.send_window += delta;
                        overflow |= s.send_window > MAX_WINDOW_SIZE as i64;
                    }
                    if overflow {
                        return Err(self.fail(ErrorCode::FlowControlError, "window above 2^31-1"));
                    }
                    more_capacity |= delta > 0;
                }
                frame::Setting::MaxFrameSize(size) => self.peer_max_frame_size = size,
                // Push, CONNECT and the peer's own stream limit concern
                // what a server sends only as a client would read it.
                _ => {}
            }
        }
        frame::write_settings_ack(&mut self.out);
        if more_capacity {
            on(Event::SendCapacity {
                stream: StreamId::ZERO,
            });
        }
        Ok(())
    }

    /// The peer acknowledged this end's SETTINGS: they now bind it too.
    fn apply_own_settings(&mut self) {
        self.decoder
            .set_max_table_size(self.config.header_table_size as usize);
        let delta = self.config.initial_window_size as i64 - self.local_initial_window as i64;
        self.local_initial_window = self.config.initial_window_size;
        for s in self.streams.iter_mut() {
            s.recv_window += delta;
        }
    }

    fn on_window_update<F>(
        &mut self,
        update: WindowUpdate,
        on: &mut F,
    ) -> Result<(), ConnectionError>
    where
        F: FnMut(Event<'_>),
    {
        let increment = update.increment as i64;
        if update.stream.is_zero() {
            self.conn_send_window += increment;
            if self.conn_send_window > MAX_WINDOW_SIZE as i64 {
                return Err(self.fail(ErrorCode::FlowControlError, "window above 2^31-1"));
            }
            on(Event::SendCapacity {
                stream: StreamId::ZERO,
            });
            return Ok(());
        }
        let idle = self.is_idle(update.stream);
        match self.streams.get(update.stream) {
            Some(s) => {
                s.send_window += increment;
                if s.send_window > MAX_WINDOW_SIZE as i64 {
                    self.stream_error(update.stream, ErrorCode::FlowControlError, on);
                } else {
                    on(Event::SendCapacity {
                        stream: update.stream,
                    });
                }
                Ok(())
            }
            None if idle => {
                Err(self.fail(ErrorCode::ProtocolError, "WINDOW_UPDATE on an idle stream"))
            }
            None => Ok(()),
        }
    }

    /// What is left of `stream`'s announced body length.
    fn length_left(&mut self, stream: StreamId) -> Option<u64> {
        self.streams.get(stream).and_then(|s| s.length_left)
    }

    /// Counts a stream that ended before it was answered, ending the
    /// connection past [`Config::max_rapid_resets`](super::Config).
    fn count_rapid_reset(&mut self) -> Result<(), ConnectionError> {
        self.rapid_resets += 1;
        if self.rapid_resets > self.config.max_rapid_resets {
            return Err(self.fail(
                ErrorCode::EnhanceYourCalm,
                "too many streams reset or refused",
            ));
        }
        Ok(())
    }

    /// Whether `stream` is idle (§5.1): above every id the client used,
    /// or an even id, which only a server could open and this one never
    /// does.
    fn is_idle(&self, stream: StreamId) -> bool {
        !stream.is_client_initiated() || stream > self.last_stream
    }

    /// Resets `stream` with `code`, telling the application if it knew
    /// the stream.
    pub(super) fn stream_error<F>(&mut self, stream: StreamId, code: ErrorCode, on: &mut F)
    where
        F: FnMut(Event<'_>),
    {
        self.write_rst(stream, code);
        if self.streams.remove(stream).is_some() {
            on(Event::Reset {
                stream,
                code,
                remote: false,
            });
        }
    }
}
