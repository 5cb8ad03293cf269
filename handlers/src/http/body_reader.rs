//! The request body as it arrives on an HTTP/1 connection: framed by the
//! grammar's decoder, read into the connection's input on demand, with the
//! `100 Continue` the client may wait for, and what is left of it once the
//! service has answered.

use std::io;
use std::ops::Range;
use std::pin::pin;
use std::time::Instant;

use percore::buf::RecvBuf;
use percore::future::{select, Either};

use super::failure::{failure_error, Failure};
use super::proto::{BodyDecoder, HttpError, Limits, RequestHead, CONTINUE_100};
use super::wire::{after, StopSlot, Waited, Wire};
use super::Config;

/// Where a run of body bytes lies.
#[derive(Debug, Clone, Copy)]
enum Src {
    /// In the input the head was parsed from.
    Input,
    /// In the lease read after the input ran out.
    Lease,
}

enum Step {
    Data(Src, Range<usize>),
    Done,
    NeedMore,
}

/// `Expect: 100-continue` progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    No,
    /// The client waits for `100 Continue` before it sends the body.
    Waiting,
    Sent,
}

/// What the body left behind, for the connection loop.
pub(crate) struct BodyEnd {
    /// Bytes of the input after the head that belonged to the body.
    pub(crate) input_used: usize,
    /// When reading went past the input: the last lease read and where the
    /// next request starts in it.
    pub(crate) lease: Option<(RecvBuf, usize)>,
    pub(crate) failure: Option<Failure>,
    /// Some of the body is still unread, so the next request's position is
    /// unknown: close after the response.
    pub(crate) abandoned: bool,
}

impl BodyEnd {
    /// Stands for the end of a body whose rest is yet to be read and
    /// dropped, while its answer is made: nothing failed or left so far.
    pub(crate) fn unknown() -> Self {
        Self {
            input_used: 0,
            lease: None,
            failure: None,
            abandoned: false,
        }
    }
}

/// Reads one request body from the input after the head, then from the
/// socket, through a [`BodyDecoder`].
pub(crate) struct BodyReader<'r> {
    pub(super) wire: &'r Wire,
    config: &'r Config,
    input: &'r [u8],
    input_used: usize,
    lease: Option<RecvBuf>,
    lease_used: usize,
    decoder: BodyDecoder,
    /// The connection's body buffer, for bodies that are not contiguous.
    gather: &'r mut Vec<u8>,
    /// `Some` once [`collect`](Self::collect) finished: the body is in the
    /// input (`Some(range)`) or in `gather` (`None`).
    collected: Option<Option<Range<usize>>>,
    expect: Expect,
    deadline: Option<Instant>,
    failure: Option<Failure>,
    /// Waiting for the client's next body bytes (set across the read's
    /// await, so it stays set if the call is cut off there).
    awaiting_client: bool,
}

impl<'r> BodyReader<'r> {
    pub(crate) fn new(
        wire: &'r Wire,
        config: &'r Config,
        head: &RequestHead<'_, '_>,
        max_body: u64,
        input: &'r [u8],
        gather: &'r mut Vec<u8>,
    ) -> Self {
        let limits = Limits {
            max_body,
            ..config.limits
        };
        Self {
            wire,
            config,
            input,
            input_used: 0,
            lease: None,
            lease_used: 0,
            decoder: BodyDecoder::new(head.body, &limits),
            gather,
            collected: None,
            expect: if head.expect_continue {
                Expect::Waiting
            } else {
                Expect::No
            },
            deadline: None,
            failure: None,
            awaiting_client: false,
        }
    }

    pub(super) async fn collect(&mut self) -> io::Result<&[u8]> {
        if self.collected.is_none() {
            self.collected = Some(self.gather_rest().await?);
        }
        Ok(match self.collected.clone().flatten() {
            Some(range) => self.input.get(range).unwrap_or_default(),
            None => self.gather.as_slice(),
        })
    }

    /// Reads the rest of the body; `Some(range)` when it lies whole in the
    /// input (the zero-copy case), else `None` with the bytes in `gather`.
    async fn gather_rest(&mut self) -> io::Result<Option<Range<usize>>> {
        self.gather.clear();
        if self.lease.is_none() && self.failure.is_none() {
            let rest = self.input.get(self.input_used..).unwrap_or_default();
            if self
                .decoder
                .remaining()
                .is_some_and(|n| n <= rest.len() as u64)
            {
                let decoded = self.decoder.decode(rest).map_err(|e| self.fail_with(e))?;
                let start = self.input_used;
                self.input_used += decoded.consumed;
                return Ok(Some(start + decoded.data.start..start + decoded.data.end));
            }
        }
        loop {
            match self.step()? {
                Step::Data(src, range) => {
                    let bytes = match src {
                        Src::Input => self.input.get(range),
                        Src::Lease => self.lease.as_deref().and_then(|l| l.get(range)),
                    };
                    self.gather.extend_from_slice(bytes.unwrap_or_default());
                }
                Step::Done => return Ok(None),
                Step::NeedMore => self.fill(None).await?,
            }
        }
    }

    pub(super) async fn chunk(&mut self) -> io::Result<Option<&[u8]>> {
        loop {
            match self.step()? {
                Step::Data(Src::Input, range) => return Ok(self.input.get(range)),
                Step::Data(Src::Lease, range) => {
                    return Ok(self.lease.as_deref().and_then(|l| l.get(range)))
                }
                Step::Done => return Ok(None),
                Step::NeedMore => self.fill(None).await?,
            }
        }
    }

    /// Decodes from the bytes at hand without waiting.
    fn step(&mut self) -> io::Result<Step> {
        if let Some(f) = &self.failure {
            return Err(failure_error(f.clone()));
        }
        loop {
            if self.decoder.is_done() {
                return Ok(Step::Done);
            }
            let (src, bytes, used) = match &self.lease {
                Some(lease) => (Src::Lease, &lease[..], &mut self.lease_used),
                None => (Src::Input, self.input, &mut self.input_used),
            };
            let rest = bytes.get(*used..).unwrap_or_default();
            if rest.is_empty() {
                return Ok(Step::NeedMore);
            }
            let start = *used;
            match self.decoder.decode(rest) {
                Ok(d) => {
                    *used += d.consumed;
                    if !d.data.is_empty() {
                        return Ok(Step::Data(src, start + d.data.start..start + d.data.end));
                    }
                    // No data and not done: framing bytes only; go on.
                }
                Err(e) => return Err(self.fail_with(e)),
            }
        }
    }

    /// Waits for more body bytes from the socket, first sending what the
    /// client may be waiting for: earlier pipelined responses, and
    /// `100 Continue` if it asked for one. Not after the response's head
    /// (RFC 9110 §15.2: interim answers come before the final one): the
    /// client has that head instead, and sends the body on seeing it or
    /// after its own wait; the expectation stays unmet, so a body left
    /// unread closes the connection. With `stop`, the wait also ends when
    /// the server begins to stop.
    async fn fill(&mut self, stop: Option<&StopSlot>) -> io::Result<()> {
        if self.expect == Expect::Waiting && !self.wire.head_out() {
            self.expect = Expect::Sent;
            self.wire
                .with_out(|out| out.extend_from_slice(CONTINUE_100));
        }
        if let Err(e) = self.wire.flush().await {
            self.failure = Some(Failure::Gone);
            return Err(e);
        }
        let deadline = self.next_read();
        let wire = self.wire;
        self.awaiting_client = true;
        let waited = wire.wait(wire.conn.read(), deadline, stop).await;
        self.awaiting_client = false;
        self.took(waited)
    }

    /// Returns the last lease, fully used, before another is read; the
    /// body's deadline.
    fn next_read(&mut self) -> Instant {
        self.lease = None;
        self.lease_used = 0;
        *self
            .deadline
            .get_or_insert_with(|| after(percore::time::now(), self.config.body_timeout))
    }

    /// Takes what a read of body bytes came to.
    fn took(&mut self, waited: Waited<io::Result<Option<RecvBuf>>>) -> io::Result<()> {
        match waited {
            Waited::Done(Ok(Some(buf))) => {
                self.lease = Some(buf);
                Ok(())
            }
            Waited::Done(Ok(None)) => {
                self.failure = Some(Failure::Gone);
                Err(failure_error(Failure::Gone))
            }
            Waited::Done(Err(e)) => {
                self.failure = Some(Failure::Gone);
                Err(e)
            }
            Waited::TimedOut | Waited::Stopped => {
                let e = HttpError::timeout("request body timed out");
                self.failure = Some(Failure::Refused(e.clone()));
                Err(failure_error(Failure::Refused(e)))
            }
        }
    }

    fn fail_with(&mut self, e: HttpError) -> io::Error {
        self.failure = Some(Failure::Refused(e.clone()));
        io::Error::new(io::ErrorKind::InvalidData, e)
    }

    /// Whether the body's reader was waiting for the client's bytes
    /// (when a call cut off by the stop was reading a slow body).
    pub(crate) fn awaiting_client(&self) -> bool {
        self.awaiting_client
    }

    /// The [`BodyEnd`] when nothing is left to read (no body, the service
    /// read all of it, or reading failed): the common case, without the
    /// await of [`finish`](Self::finish).
    pub(crate) fn end_now(&mut self) -> Option<BodyEnd> {
        (self.failure.is_some() || self.decoder.is_done()).then(|| self.end(false))
    }

    /// Decodes the body bytes at hand (after the service returned) and
    /// says whether the rest is still to come from the client, so that the
    /// answer can go out before it is read and dropped. Not when the body
    /// ended or failed (a refusal answers instead), nor for a client that
    /// waits for `100 Continue` (it may never send the rest: the
    /// connection closes after the answer).
    pub(crate) fn rest_to_come(&mut self) -> bool {
        if self.expect == Expect::Waiting {
            return false;
        }
        loop {
            match self.step() {
                Ok(Step::Data(..)) => {}
                Ok(Step::Done) | Err(_) => return false,
                Ok(Step::NeedMore) => return true,
            }
        }
    }

    /// Ends the body after the service returned. With `discard` (the
    /// answer is in the output), writes the answer while it reads and
    /// drops what the service left, bounded by the body limit and deadline
    /// and by the stop the slot watches, so that the connection can serve
    /// the next request; without, leaves it and asks for a close.
    pub(crate) async fn finish(&mut self, discard: Option<&StopSlot>) -> BodyEnd {
        if let Some(stop) = discard.filter(|_| self.expect != Expect::Waiting) {
            self.flush_dropping(stop).await;
        }
        let mut abandoned = false;
        loop {
            match self.step() {
                Ok(Step::Data(..)) => {}
                Ok(Step::Done) | Err(_) => break,
                // RFC 9110 §10.1.1: a server that answers without reading
                // the body of an `Expect: 100-continue` request must close
                // (or read it anyway, but the client may never send it).
                Ok(Step::NeedMore) if discard.is_none() || self.expect == Expect::Waiting => {
                    abandoned = true;
                    break;
                }
                Ok(Step::NeedMore) => {
                    if self.fill(discard).await.is_err() {
                        break;
                    }
                }
            }
        }
        self.end(abandoned)
    }

    /// Writes the pending output (the answer) while reading and dropping
    /// the body's rest; if the rest ends or fails first, the output is
    /// still written whole. Written before the rest is read, an answer
    /// larger than the socket buffers can hold would never get out to a
    /// client that sends its whole request before it reads (as many do):
    /// each side would wait for the other to read until the write timed
    /// out and reset the connection.
    async fn flush_dropping(&mut self, stop: &StopSlot) {
        let wire = self.wire;
        let mut flush = pin!(wire.flush());
        let flushed = 'flushed: loop {
            match self.step() {
                Ok(Step::Data(..)) => continue,
                Ok(Step::NeedMore) => {}
                // What follows the body is the next request's.
                Ok(Step::Done) => break flush.as_mut().await,
                // A body over the limit or malformed closes the connection
                // after the answer: what the client still sends meanwhile
                // is dropped, as the close's lingering does, the flush
                // polled first as below. (One that timed out, or was cut
                // short by the stop, is not waited on again.)
                Err(_) if matches!(self.failure, Some(Failure::Refused(ref e)) if e.status != 408) =>
                {
                    let until = after(percore::time::now(), self.config.linger_timeout);
                    loop {
                        let read = wire.wait(wire.conn.read(), until, Some(stop));
                        match select(read, flush.as_mut()).await {
                            Either::Right(flushed) => break 'flushed flushed,
                            Either::Left(Waited::Done(Ok(Some(_dropped)))) => {}
                            Either::Left(_) => break 'flushed flush.as_mut().await,
                        }
                    }
                }
                Err(_) => break flush.as_mut().await,
            }
            let deadline = self.next_read();
            let read = wire.wait(wire.conn.read(), deadline, Some(stop));
            // The flush is polled through its pin: whichever ends first,
            // it is never dropped half-written. It is the select's second
            // future, which a new select polls first: a read that is always
            // ready (a client that streams its rest) must not keep the
            // flush, and its timeout, waiting until the task's I/O budget
            // runs out every 128 reads.
            match select(read, flush.as_mut()).await {
                Either::Right(flushed) => break flushed,
                Either::Left(waited) => {
                    if self.took(waited).is_err() {
                        break flush.as_mut().await;
                    }
                }
            }
        };
        if flushed.is_err() {
            self.failure = Some(Failure::Gone);
        }
    }

    fn end(&mut self, abandoned: bool) -> BodyEnd {
        let lease = match self.lease.take() {
            Some(lease) if self.lease_used < lease.len() => Some((lease, self.lease_used)),
            _ => None,
        };
        BodyEnd {
            input_used: self.input_used,
            lease,
            failure: self.failure.clone(),
            abandoned,
        }
    }
}
