//! A [`Response`] on an HTTP/2 stream: made for the stream's task, sent
//! as HEADERS and DATA frames instead of HTTP/1 bytes.

use std::io;

use super::{effective_status, invalid, no_body_status, Response, Sink, Streaming};
use crate::http::date::SharedDate;
use crate::http::h2::StreamOut;

impl<'r> Response<'r> {
    /// A response to the request of one HTTP/2 stream.
    pub(crate) fn new_h2(
        out: &'r mut StreamOut,
        date: &'r SharedDate,
        headers: &'r mut Vec<u8>,
        body: &'r mut Vec<u8>,
        head_only: bool,
    ) -> Self {
        headers.clear();
        body.clear();
        Self {
            sink: Sink::H2(out),
            date,
            status: 200,
            headers,
            body,
            version: 2,
            head_only,
            keep_alive: true,
            streaming: None,
            declared: None,
            left: 0,
            upgrade: None,
            trailers: Vec::new(),
        }
    }

    /// [`flush`](Self::flush) on HTTP/2: the head as a HEADERS frame the
    /// first time, then what was written as DATA, as the stream's and the
    /// connection's flow-control windows let it go. HTTP/2 frames the
    /// body itself, so a body of unknown length needs no chunked coding.
    pub(super) async fn flush_h2(&mut self) -> io::Result<()> {
        if self
            .owed()
            .is_some_and(|owed| self.body.len() as u64 > owed)
        {
            return Err(invalid("body longer than its declared Content-Length").into());
        }
        let Sink::H2(out) = &mut self.sink else {
            return Ok(());
        };
        if self.streaming.is_none() {
            let status = effective_status(self.status);
            let (streaming, length) = if no_body_status(status) {
                (Streaming::NoBody, None)
            } else if self.head_only {
                (Streaming::NoBody, self.declared)
            } else if let Some(len) = self.declared {
                self.left = len;
                (Streaming::Length, Some(len))
            } else {
                (Streaming::Chunked, None)
            };
            out.send_head(
                status,
                self.headers,
                length,
                self.date,
                streaming == Streaming::NoBody,
            )?;
            self.streaming = Some(streaming);
        }
        let fits = match self.streaming {
            Some(Streaming::Length) => self
                .body
                .len()
                .min(usize::try_from(self.left).unwrap_or(usize::MAX)),
            Some(Streaming::Chunked) => self.body.len(),
            _ => 0,
        };
        if fits > 0 {
            out.send_data(&self.body[..fits], false).await?;
            if self.streaming == Some(Streaming::Length) {
                self.left -= fits as u64;
            }
        }
        self.body.clear();
        Ok(())
    }

    /// Sends what the service left once it returned well: the whole
    /// response, or a streamed one's rest and its end.
    pub(crate) async fn finish_h2(&mut self) -> io::Result<u16> {
        let status = effective_status(self.status);
        // Trailers end the stream with a HEADERS frame of their own, after
        // any body; a response with no body then still has a stream to end.
        let trailers = !self.trailers.is_empty();
        if self.streaming.is_some() {
            self.flush_h2().await?;
            if self.streaming != Some(Streaming::NoBody) {
                if let Sink::H2(out) = &mut self.sink {
                    if trailers {
                        out.send_trailers(&self.trailers)?;
                    } else {
                        out.send_data(&[], true).await?;
                    }
                }
            }
            return Ok(status);
        }
        let bodyless = no_body_status(status);
        let length = if bodyless { None } else { self.whole_length() };
        let send_body = !self.head_only && !bodyless && !self.body.is_empty();
        let then_trailers = trailers && !self.head_only && !bodyless;
        let Sink::H2(out) = &mut self.sink else {
            return Ok(status);
        };
        out.send_head(
            status,
            self.headers,
            length,
            self.date,
            !send_body && !then_trailers,
        )?;
        if send_body {
            out.send_data(self.body, !then_trailers).await?;
        }
        if then_trailers {
            out.send_trailers(&self.trailers)?;
        }
        Ok(status)
    }

    /// Whether the client reset the stream or left, so that nothing more
    /// reaches it.
    pub(crate) fn client_gone(&self) -> bool {
        self.sink.write_failed()
    }

    /// Whether the head went out, after which an error can only reset
    /// the stream.
    pub(crate) fn head_sent(&self) -> bool {
        self.streaming.is_some()
    }
}
