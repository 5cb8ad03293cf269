//! The chunked transfer coding (RFC 9112 §7.1) as a byte-level state
//! machine, so any split of the input gives the same result and nothing
//! needs to be buffered.
//!
//! ```text
//! chunked-body    = *chunk last-chunk trailer-section CRLF
//! chunk           = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//! chunk-size      = 1*HEXDIG
//! last-chunk      = 1*("0") [ chunk-ext ] CRLF
//! chunk-ext       = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//! trailer-section = *( field-line CRLF )
//! ```
//!
//! Framing lines must end in CRLF. RFC 9112 §2.2 lets a recipient accept a
//! bare LF, but inside a body that leniency is what smuggling payloads
//! (HTTP Garden transducer #13) rely on, so a bare LF or CR is a 400 here.

use super::chars::is_tchar;
use super::{Decoded, HttpError, Limits};

/// Most hex digits in a chunk size: 16 fill a `u64` exactly, so the value
/// can never overflow.
const MAX_SIZE_DIGITS: u8 = 16;

/// Chunked decoder state plus the running totals its limits need.
#[derive(Debug, Clone)]
pub(crate) struct Chunked {
    state: State,
    /// Body bytes announced so far, checked against `max_body`.
    total: u64,
    max_body: u64,
    /// Bytes of chunk extension on the current size line.
    ext_len: usize,
    max_ext: usize,
    /// Bytes of trailer section so far, including the final CRLF.
    trailer_len: usize,
    max_trailer: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading the hex digits of a chunk size.
    Size { digits: u8, value: u64 },
    /// Whitespace after the size; only `;` may follow (the BWS of chunk-ext).
    SizeWs { value: u64 },
    /// Inside chunk extensions, up to the CR.
    Ext { value: u64 },
    /// CR seen at the end of a size line; LF must follow.
    SizeLf { value: u64 },
    /// This many bytes of chunk data are still to come.
    Data { remaining: u64 },
    /// Chunk data ended; CR must follow.
    DataCr,
    /// CR after chunk data seen; LF must follow.
    DataLf,
    /// At the start of a trailer line or of the final blank line.
    TrailerStart,
    /// Inside a trailer field name.
    TrailerName,
    /// Inside a trailer field value.
    TrailerValue,
    /// CR at the end of a trailer line; LF must follow.
    TrailerLf,
    /// CR of the final blank line; LF ends the body.
    EndLf,
}

fn malformed(reason: &'static str) -> HttpError {
    HttpError::bad_request(reason)
}

impl Chunked {
    pub(crate) fn new(limits: &Limits) -> Self {
        Self {
            state: State::Size {
                digits: 0,
                value: 0,
            },
            total: 0,
            max_body: limits.max_body,
            ext_len: 0,
            max_ext: limits.max_chunk_ext,
            trailer_len: 0,
            max_trailer: limits.max_trailer_bytes,
        }
    }

    /// Consumes framing bytes until a run of chunk data, the end of the
    /// body, or the end of `input`, whichever comes first.
    pub(crate) fn decode(&mut self, input: &[u8]) -> Result<Decoded, HttpError> {
        let mut i = 0;
        while i < input.len() {
            if let State::Data { remaining } = self.state {
                let avail = input.len() - i;
                let take = usize::try_from(remaining).map_or(avail, |r| r.min(avail));
                // `take <= remaining`, so this cannot underflow.
                let left = remaining - take as u64;
                self.state = if left == 0 {
                    State::DataCr
                } else {
                    State::Data { remaining: left }
                };
                return Ok(Decoded {
                    consumed: i + take,
                    data: i..i + take,
                    done: false,
                });
            }
            let b = input[i];
            i += 1;
            if self.step(b)? {
                return Ok(Decoded {
                    consumed: i,
                    data: i..i,
                    done: true,
                });
            }
        }
        Ok(Decoded {
            consumed: i,
            data: i..i,
            done: false,
        })
    }

    /// Advances over one framing byte; `Ok(true)` when the body ended.
    fn step(&mut self, b: u8) -> Result<bool, HttpError> {
        self.state = match self.state {
            State::Size { digits, value } => match hex(b) {
                Some(d) if digits < MAX_SIZE_DIGITS => State::Size {
                    digits: digits + 1,
                    value: (value << 4) | d,
                },
                Some(_) => return Err(malformed("chunk size has too many digits")),
                // `+1`, `;ext` and an empty line all lack the 1*HEXDIG.
                None if digits == 0 => return Err(malformed("chunk size is not hex")),
                None => match b {
                    b'\r' => State::SizeLf { value },
                    b';' => {
                        self.ext_len = 0;
                        State::Ext { value }
                    }
                    // The whitespace before `;` is part of the extensions
                    // (BWS) and counts towards their limit.
                    b' ' | b'\t' => {
                        self.ext_len = 0;
                        self.ext_byte()?;
                        State::SizeWs { value }
                    }
                    // `0_2e`, `0x1`, a bare LF, ...
                    _ => return Err(malformed("invalid byte after chunk size")),
                },
            },
            State::SizeWs { value } => match b {
                b' ' | b'\t' => {
                    self.ext_byte()?;
                    State::SizeWs { value }
                }
                b';' => State::Ext { value },
                _ => return Err(malformed("invalid byte after chunk size")),
            },
            State::Ext { value } => match b {
                b'\r' => State::SizeLf { value },
                // chunk-ext is tokens, quoted strings and BWS: visible
                // ASCII, SP, HTAB, obs-text. A CTL or a bare LF is not.
                b'\t' | 0x20..=0x7e | 0x80..=0xff => {
                    self.ext_byte()?;
                    State::Ext { value }
                }
                _ => return Err(malformed("invalid byte in chunk extension")),
            },
            State::SizeLf { value } => match b {
                b'\n' if value == 0 => State::TrailerStart,
                b'\n' => {
                    self.total = self.total.saturating_add(value);
                    if self.total > self.max_body {
                        return Err(HttpError::too_large("chunked body over limit"));
                    }
                    State::Data { remaining: value }
                }
                _ => return Err(malformed("chunk size line lacks CRLF")),
            },
            // `decode` handles data in bulk and never steps in this state.
            State::Data { remaining } => State::Data { remaining },
            State::DataCr => match b {
                b'\r' => State::DataLf,
                _ => return Err(malformed("chunk data not followed by CRLF")),
            },
            State::DataLf => match b {
                b'\n' => State::Size {
                    digits: 0,
                    value: 0,
                },
                _ => return Err(malformed("chunk data not followed by CRLF")),
            },
            trailer => return self.trailer_step(trailer, b),
        };
        Ok(false)
    }

    /// Counts one byte of a size line's extensions against their limit.
    fn ext_byte(&mut self) -> Result<(), HttpError> {
        self.ext_len += 1;
        if self.ext_len > self.max_ext {
            return Err(malformed("chunk extensions too long"));
        }
        Ok(())
    }

    /// Trailer fields (RFC 9112 §7.1.2) are parsed as field lines and then
    /// dropped: we never merge them into the head, and a trailer such as
    /// `X:POST / HTTP/1.1` stays a field value, never a new request.
    fn trailer_step(&mut self, state: State, b: u8) -> Result<bool, HttpError> {
        self.trailer_len += 1;
        if self.trailer_len > self.max_trailer {
            return Err(HttpError::fields_too_large("trailer section too large"));
        }
        self.state = match (state, b) {
            (State::TrailerStart, b'\r') => State::EndLf,
            // A leading SP/HTAB would be obs-fold, a `:` an empty name.
            (State::TrailerStart | State::TrailerName, t) if is_tchar(t) => State::TrailerName,
            (State::TrailerName, b':') => State::TrailerValue,
            (State::TrailerValue, b'\r') => State::TrailerLf,
            (State::TrailerValue, b'\t' | 0x20..=0x7e | 0x80..=0xff) => State::TrailerValue,
            (State::TrailerLf, b'\n') => State::TrailerStart,
            (State::EndLf, b'\n') => return Ok(true),
            _ => return Err(malformed("malformed trailer section")),
        };
        Ok(false)
    }
}

fn hex(b: u8) -> Option<u64> {
    match b {
        b'0'..=b'9' => Some(u64::from(b - b'0')),
        b'a'..=b'f' => Some(u64::from(b - b'a' + 10)),
        b'A'..=b'F' => Some(u64::from(b - b'A' + 10)),
        _ => None,
    }
}
