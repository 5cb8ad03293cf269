//! Writing: answers within the peer's windows, and the window updates
//! that follow the application's consumption of request bodies.

use std::fmt;

use super::Connection;
use crate::frame::{
    self, flags, ErrorCode, FrameHeader, Kind, StreamId, HEADER_LEN, MAX_WINDOW_SIZE,
};
use crate::hpack::Block;

/// Why an answer could not be sent on a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// No such stream is open: never opened, finished, or reset.
    UnknownStream,
    /// This end already ended the stream (END_STREAM sent).
    StreamClosed,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendError::UnknownStream => "no such open stream",
            SendError::StreamClosed => "stream already ended by this end",
        })
    }
}

impl std::error::Error for SendError {}

impl Connection {
    /// Sends a field block on `stream`: the response head (or trailers,
    /// with `end_stream`). `fields` writes the fields, starting with
    /// `:status`. The block goes out as HEADERS, with CONTINUATION frames
    /// if it exceeds the peer's SETTINGS_MAX_FRAME_SIZE.
    ///
    /// # Errors
    ///
    /// [`SendError`] if the stream is not open for sending.
    pub fn send_headers<F>(
        &mut self,
        stream: StreamId,
        end_stream: bool,
        fields: F,
    ) -> Result<(), SendError>
    where
        F: FnOnce(&mut Block<'_>),
    {
        let s = self.streams.get(stream).ok_or(SendError::UnknownStream)?;
        if s.send_closed {
            return Err(SendError::StreamClosed);
        }
        s.answered = true;
        s.send_closed = end_stream;
        // Encode in place after a header to be filled in: no copy unless
        // the block needs CONTINUATION frames.
        let at = self.out.len();
        self.out.extend_from_slice(&[0; HEADER_LEN]);
        fields(&mut self.encoder.block(&mut self.out));
        let len = self.out.len() - at - HEADER_LEN;
        if len <= self.peer_max_frame_size as usize {
            let flags = flags::END_HEADERS | if end_stream { flags::END_STREAM } else { 0 };
            let header = FrameHeader {
                length: len as u32,
                kind: Kind::Headers,
                flags,
                stream,
            };
            self.out[at..at + HEADER_LEN].copy_from_slice(&header.encode());
        } else {
            let block = self.out.split_off(at + HEADER_LEN);
            self.out.truncate(at);
            frame::write_headers(
                &mut self.out,
                stream,
                &block,
                end_stream,
                self.peer_max_frame_size,
            );
        }
        if end_stream {
            self.close_if_done(stream);
        }
        Ok(())
    }

    /// Sends as much of `data` on `stream` as the connection's and the
    /// stream's send windows allow, in frames of at most the peer's
    /// SETTINGS_MAX_FRAME_SIZE, and returns how many bytes went out.
    /// `end_stream` takes effect only once all of `data` is sent. After
    /// a short count, wait for [`Event::SendCapacity`](super::Event) and
    /// send the rest.
    ///
    /// # Errors
    ///
    /// [`SendError`] if the stream is not open for sending.
    pub fn send_data(
        &mut self,
        stream: StreamId,
        data: &[u8],
        end_stream: bool,
    ) -> Result<usize, SendError> {
        let window = self.conn_send_window;
        let max_frame = self.peer_max_frame_size as usize;
        let s = self.streams.get(stream).ok_or(SendError::UnknownStream)?;
        if s.send_closed {
            return Err(SendError::StreamClosed);
        }
        let allowed = (data.len() as i64).min(window).min(s.send_window).max(0) as usize;
        let ends = end_stream && allowed == data.len();
        s.send_window -= allowed as i64;
        s.send_closed = ends;
        self.conn_send_window -= allowed as i64;
        let mut rest = &data[..allowed];
        while !rest.is_empty() {
            let (piece, tail) = rest.split_at(rest.len().min(max_frame));
            frame::write_data(&mut self.out, stream, piece, ends && tail.is_empty());
            rest = tail;
        }
        if ends {
            if data.is_empty() {
                frame::write_data(&mut self.out, stream, &[], true);
            }
            self.close_if_done(stream);
        }
        Ok(allowed)
    }

    /// How many bytes [`Connection::send_data`] would accept on `stream` now.
    pub fn send_capacity(&mut self, stream: StreamId) -> usize {
        let window = self.conn_send_window;
        self.streams
            .get(stream)
            .filter(|s| !s.send_closed)
            .map_or(0, |s| window.min(s.send_window).max(0) as usize)
    }

    /// Resets `stream` with `code` (RST_STREAM), e.g. CANCEL when the
    /// application gives up on it. Nothing happens if it is not open.
    pub fn reset(&mut self, stream: StreamId, code: ErrorCode) {
        if self.streams.remove(stream).is_some() {
            self.write_rst(stream, code);
        }
    }

    /// Hands back `len` bytes of DATA the application has consumed on
    /// `stream`, so the peer may send more. WINDOW_UPDATE frames go out
    /// once half a window is owed, not for every byte.
    pub fn release(&mut self, stream: StreamId, len: u32) {
        self.release_connection(len);
        let half = (self.local_initial_window / 2).max(1);
        let Some(s) = self.streams.get(stream) else {
            return;
        };
        if s.recv_closed {
            return;
        }
        s.recv_unacked = s.recv_unacked.saturating_add(len);
        if s.recv_unacked >= half {
            let grant = s.recv_unacked.min(MAX_WINDOW_SIZE);
            s.recv_window += grant as i64;
            s.recv_unacked = 0;
            frame::write_window_update(&mut self.out, stream, grant);
        }
    }

    /// Hands back `len` bytes of the connection's receive window.
    pub(super) fn release_connection(&mut self, len: u32) {
        self.conn_recv_unacked = self.conn_recv_unacked.saturating_add(len);
        if self.conn_recv_unacked >= (self.config.connection_window_size / 2).max(1) {
            let grant = self.conn_recv_unacked.min(MAX_WINDOW_SIZE);
            self.conn_recv_window += grant as i64;
            self.conn_recv_unacked = 0;
            frame::write_window_update(&mut self.out, StreamId::ZERO, grant);
        }
    }

    /// Forgets `stream` once both ends have ended it (§5.1 closed). An
    /// answered stream takes one off the rapid-reset count.
    pub(super) fn close_if_done(&mut self, stream: StreamId) {
        let Some(s) = self.streams.get(stream) else {
            return;
        };
        if s.recv_closed && s.send_closed {
            let answered = s.answered;
            self.streams.remove(stream);
            if answered {
                self.rapid_resets = self.rapid_resets.saturating_sub(1);
            }
        }
    }
}
