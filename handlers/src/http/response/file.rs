//! [`Response::send_file`]: a body (or its rest) from a file, with
//! `sendfile` where that is cheaper and cannot block the core.

use std::io;

use percore::fs::File;

use super::{effective_status, invalid, no_body_status, Response};

/// A range shorter than this is read and sent with the head in one send:
/// `sendfile` would cost a send of its own for the head and a packet more
/// than the copies it saves.
const SENDFILE_MIN: u64 = 16 * 1024;

/// The largest piece of a file read and written at once otherwise.
const CHUNK: usize = 64 * 1024;

impl Response<'_> {
    /// Sends bytes `pos..pos + len` of `file` as the body (or its rest,
    /// after bytes written before). The length must be declared first
    /// ([`set_content_length`](Self::set_content_length)) and cover them.
    ///
    /// A range of 16 KiB or more that is in the page cache, on a
    /// connection without TLS, goes out with `sendfile` after the head:
    /// the kernel moves the file's pages to the socket, with no copy
    /// through this process (about 0.4× the CPU of a read and a send per
    /// byte). Anything else is read with
    /// [`File::read_at`](percore::fs::File::read_at), which never blocks
    /// the core, and written 64 KiB at a time, each piece flushed before
    /// the next is read; a short body goes out with the head in one send.
    /// Either way a large file costs the connection no more memory than a
    /// small one. For `HEAD` (and 204, 304) nothing is read or sent.
    ///
    /// # Errors
    ///
    /// `InvalidInput` when no declared length covers the range (nothing is
    /// sent then); a read error; `UnexpectedEof` if the file ends before
    /// `pos + len` (it shrank: the body ends short and the connection
    /// closes); as [`flush`](Self::flush) for the sending.
    pub async fn send_file(&mut self, file: &File, pos: u64, len: u64) -> io::Result<()> {
        if self.head_only || no_body_status(effective_status(self.status)) {
            return Ok(());
        }
        let written = self.body.len() as u64;
        if self
            .owed()
            .is_none_or(|owed| owed < written.saturating_add(len))
        {
            return Err(invalid("send_file needs a declared Content-Length that covers it").into());
        }
        let wire = self.sink.h1().filter(|wire| !wire.conn.is_tls());
        if let Some(wire) = wire.filter(|_| len >= SENDFILE_MIN && file.cached(pos, len)) {
            self.flush().await?;
            wire.send_file(file, pos, len).await?;
            self.left -= len;
            return Ok(());
        }
        let end = pos.saturating_add(len);
        let mut buf = Vec::with_capacity(usize::try_from(len).unwrap_or(CHUNK).min(CHUNK));
        let mut pos = pos;
        while pos < end {
            buf.clear();
            let (read, back) = file.read_at(buf, pos).await;
            buf = back;
            let n = read?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the file shrank while it was sent",
                ));
            }
            let n = n.min(usize::try_from(end - pos).unwrap_or(usize::MAX));
            self.write(&buf[..n]);
            pos += n as u64;
            if len > CHUNK as u64 {
                self.flush().await?;
            }
        }
        Ok(())
    }
}
