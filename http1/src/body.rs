//! Incremental body decoding: Content-Length and chunked, fed whatever
//! bytes arrived, reporting which of them are body data.

use std::ops::Range;

use super::chunked::Chunked;
use super::{BodyKind, HttpError, Limits};

/// The outcome of one [`BodyDecoder::decode`] call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// Bytes of the input that were used, always `<= input.len()`. The rest
    /// belongs to a later call or, once `done`, to the next request.
    pub consumed: usize,
    /// The body data found, as a range of the input (possibly empty). It
    /// always lies within `..consumed`.
    pub data: Range<usize>,
    /// The body is complete; `consumed` stops right after its last byte.
    pub done: bool,
}

/// State machine that delimits one request body.
///
/// Call [`decode`](Self::decode) with the unread input until `done`. Each
/// call returns at most one run of body data, so loop while input remains;
/// when a call is not `done` and consumed all input, read more. Errors are
/// sticky: once an error is returned, every later call returns it again.
#[derive(Debug, Clone)]
pub struct BodyDecoder {
    state: State,
}

#[derive(Debug, Clone)]
enum State {
    /// `Content-Length` framing: this many body bytes are still to come.
    Length { remaining: u64 },
    /// Chunked framing (RFC 9112 §7.1).
    Chunked(Chunked),
    /// The body is complete.
    Done,
    /// A framing error; the connection must close.
    Failed(HttpError),
}

impl BodyDecoder {
    /// A decoder for a body framed as `kind`, with the body limits of
    /// `limits`. A `Length` over [`Limits::max_body`] fails on the first
    /// call (though [`super::parse_head`] already refuses those).
    #[inline]
    pub fn new(kind: BodyKind, limits: &Limits) -> Self {
        let state = match kind {
            BodyKind::None | BodyKind::Length(0) => State::Done,
            BodyKind::Length(n) if n > limits.max_body => {
                State::Failed(HttpError::too_large("Content-Length over limit"))
            }
            BodyKind::Length(n) => State::Length { remaining: n },
            BodyKind::Chunked => State::Chunked(Chunked::new(limits)),
        };
        Self { state }
    }

    /// Whether the whole body has been decoded.
    #[inline]
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// For `Content-Length` bodies, the number of body bytes not yet seen.
    /// Lets the connection loop size its reads, or detect a body cut short
    /// by EOF (then the request must be dropped, not served).
    #[inline]
    pub fn remaining(&self) -> Option<u64> {
        match self.state {
            State::Length { remaining } => Some(remaining),
            State::Done => Some(0),
            _ => None,
        }
    }

    /// Decodes from `input`, the bytes after whatever was consumed before.
    ///
    /// # Errors
    ///
    /// 400 for malformed chunked framing, 413 when the body grows past
    /// [`Limits::max_body`], 431 for an oversized trailer section.
    pub fn decode(&mut self, input: &[u8]) -> Result<Decoded, HttpError> {
        match &mut self.state {
            State::Done => Ok(Decoded {
                consumed: 0,
                data: 0..0,
                done: true,
            }),
            State::Failed(err) => Err(err.clone()),
            State::Length { remaining } => {
                let take = usize::try_from(*remaining).map_or(input.len(), |r| r.min(input.len()));
                // `take <= remaining`, so this cannot underflow.
                *remaining -= take as u64;
                let done = *remaining == 0;
                if done {
                    self.state = State::Done;
                }
                Ok(Decoded {
                    consumed: take,
                    data: 0..take,
                    done,
                })
            }
            State::Chunked(chunked) => match chunked.decode(input) {
                Ok(out) => {
                    if out.done {
                        self.state = State::Done;
                    }
                    Ok(out)
                }
                Err(err) => {
                    self.state = State::Failed(err.clone());
                    Err(err)
                }
            },
        }
    }
}
