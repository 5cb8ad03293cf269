//! `permessage-deflate` (RFC 7692): the negotiation in the handshake, and
//! the coders that compress what is sent and inflate what is received.
//!
//! # Negotiation
//!
//! A client offers the extension in `Sec-WebSocket-Extensions`, perhaps
//! several times with other parameters, in its order of preference. The
//! server accepts the first offer it can honour (§5.1):
//!
//! - `server_no_context_takeover` and `client_no_context_takeover` are
//!   honoured, and the server asks for both itself unless
//!   [`Deflate::context_takeover`] is set (RFC 7692 §7.1.1 lets it).
//! - `client_max_window_bits`, with or without a value, is accepted: the
//!   server inflates with the full 32 KiB window, which decodes what any
//!   smaller window made, so it needs no answer.
//! - `server_max_window_bits` is accepted only at 15. The compressor
//!   (flate2 on miniz_oxide) always uses a 32 KiB window and cannot be
//!   held to a smaller one, so an offer asking for less is declined: the
//!   next offer is tried, and if none is left the WebSocket opens without
//!   the extension, as RFC 7692 §5.1 allows.
//! - An offer with an unknown or repeated parameter, or a value out of
//!   its range (8 to 15, no leading zero), is declined the same way.
//!
//! # Coders
//!
//! A message's first frame carries RSV1 when its payload is deflated.
//! Sending, a message is compressed whole with a sync flush and the
//! `00 00 ff ff` that ends it is stripped (§7.2.1); one shorter than
//! [`Deflate::min_size`] goes out as it is. Receiving, the `00 00 ff ff`
//! is appended and the payload inflated into a buffer that never grows
//! past the message limit: a message that inflates beyond it is refused
//! with 1009 after at most the limit's worth of output (a zip bomb costs
//! its limit, no more). Text is checked for UTF-8 once inflated.
//!
//! With context takeover a connection keeps its own coders (allocated
//! at its first compressed message: about 300 KiB to send, 40 KiB to
//! receive, with miniz_oxide). Without it every message starts afresh,
//! so the coders are the core's, shared by all its connections and reset
//! per message: a connection then costs nothing more than one without
//! the extension. That is the default.

use std::cell::RefCell;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::frame::{encode_head, Violation};

/// The bytes a sync flush ends with, stripped from a sent message and put
/// back at the end of a received one (RFC 7692 §7.2.1, §7.2.2).
const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// The one window size the compressor can honour (2^15 bytes).
const WINDOW_BITS: u8 = 15;

/// How a WebSocket may use `permessage-deflate`: the server accepts a
/// client's offer when [`WsConfig::deflate`](super::WsConfig::deflate)
/// is `Some` (the default with the `ws-deflate` feature).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Deflate {
    /// Keep each direction's window from one message to the next: better
    /// compression for a stream of alike messages, at the cost of a
    /// connection's own coders (about 340 KiB once it has sent and
    /// received a compressed message). `false` (the default) asks the
    /// client for `client_no_context_takeover` and answers with
    /// `server_no_context_takeover`, and the core's shared coders serve
    /// every connection.
    pub context_takeover: bool,
    /// The compression level, 0 (none) to 9 (best). 1: the fastest.
    pub level: u32,
    /// Messages shorter than this many bytes are sent uncompressed, where
    /// compressing gains little. 64.
    pub min_size: usize,
}

impl Default for Deflate {
    fn default() -> Self {
        Self {
            context_takeover: false,
            level: 1,
            min_size: 64,
        }
    }
}

/// A client's offer the server can honour: what it asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Offer {
    server_no_context_takeover: bool,
    client_no_context_takeover: bool,
    /// It named `server_max_window_bits` (15): the answer must too.
    server_max_window_bits: bool,
}

impl Offer {
    /// The first offer of `permessage-deflate` among the values of the
    /// request's `Sec-WebSocket-Extensions` fields that the server can
    /// honour, if any.
    pub(crate) fn first<'a>(values: impl Iterator<Item = &'a [u8]>) -> Option<Offer> {
        values
            .filter_map(|v| std::str::from_utf8(v).ok())
            .flat_map(|v| v.split(','))
            .find_map(Offer::parse)
    }

    /// One extension of the list: `name *( ";" param [ "=" value ] )`.
    fn parse(extension: &str) -> Option<Offer> {
        let mut parts = extension.split(';');
        let name = parts.next()?.trim();
        if !name.eq_ignore_ascii_case("permessage-deflate") {
            return None;
        }
        let mut offer = Offer::default();
        let mut seen = [false; 4];
        for param in parts {
            let (key, value) = match param.split_once('=') {
                Some((k, v)) => (k.trim(), Some(unquote(v.trim())?)),
                None => (param.trim(), None),
            };
            let index = match key.to_ascii_lowercase().as_str() {
                "server_no_context_takeover" if value.is_none() => {
                    offer.server_no_context_takeover = true;
                    0
                }
                "client_no_context_takeover" if value.is_none() => {
                    offer.client_no_context_takeover = true;
                    1
                }
                "server_max_window_bits" => {
                    // Only the window the compressor has: declined else.
                    if window_bits(value?)? != WINDOW_BITS {
                        return None;
                    }
                    offer.server_max_window_bits = true;
                    2
                }
                "client_max_window_bits" => {
                    if let Some(value) = value {
                        window_bits(value)?;
                    }
                    3
                }
                _ => return None,
            };
            if std::mem::replace(&mut seen[index], true) {
                return None; // a parameter twice (§7.1)
            }
        }
        Some(offer)
    }
}

/// A parameter's value without the quotes of a quoted-string.
fn unquote(value: &str) -> Option<&str> {
    match value.strip_prefix('"') {
        Some(rest) => rest.strip_suffix('"'),
        None => Some(value),
    }
}

/// A window size's value: 8 to 15, no leading zero (§7.1.2).
fn window_bits(value: &str) -> Option<u8> {
    if value.starts_with('0') || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok().filter(|b| (8..=15).contains(b))
}

/// The extension as accepted: how each direction is coded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Negotiated {
    /// The server keeps its compressor's window between messages.
    server_takeover: bool,
    /// The client keeps its window: the server's inflater must too.
    client_takeover: bool,
    answer_window_bits: bool,
    level: u32,
    min_size: usize,
}

impl Negotiated {
    pub(crate) fn new(offer: Offer, config: Deflate) -> Negotiated {
        Negotiated {
            server_takeover: config.context_takeover && !offer.server_no_context_takeover,
            client_takeover: config.context_takeover && !offer.client_no_context_takeover,
            answer_window_bits: offer.server_max_window_bits,
            level: config.level.min(9),
            min_size: config.min_size,
        }
    }

    /// The `Sec-WebSocket-Extensions` value of the 101.
    pub(crate) fn answer(&self) -> String {
        let mut answer = String::from("permessage-deflate");
        if !self.server_takeover {
            answer.push_str("; server_no_context_takeover");
        }
        if !self.client_takeover {
            answer.push_str("; client_no_context_takeover");
        }
        if self.answer_window_bits {
            answer.push_str("; server_max_window_bits=15");
        }
        answer
    }

    pub(crate) fn deflater(&self) -> Deflater {
        Deflater {
            own: None,
            takeover: self.server_takeover,
            level: self.level,
            min_size: self.min_size,
        }
    }

    pub(crate) fn inflater(&self) -> Inflater {
        Inflater {
            own: None,
            takeover: self.client_takeover,
        }
    }
}

thread_local! {
    /// The core's compressor for connections without context takeover
    /// (at the level it was made with), and its scratch output.
    static COMPRESS: RefCell<Option<(u32, Compress)>> = const { RefCell::new(None) };
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// The core's inflater for connections without context takeover.
    static DECOMPRESS: RefCell<Option<Decompress>> = const { RefCell::new(None) };
}

/// The sending side: compresses a connection's messages.
pub(crate) struct Deflater {
    /// The connection's own compressor, with context takeover.
    own: Option<Box<Compress>>,
    takeover: bool,
    level: u32,
    min_size: usize,
}

impl Deflater {
    /// Appends a data frame of `payload` to `out`: deflated with RSV1
    /// set, or as it is when short (or when deflating fails, which a
    /// sync flush into a growing buffer does not).
    pub(crate) fn encode(&mut self, opcode: u8, payload: &[u8], out: &mut Vec<u8>) {
        let start = out.len();
        let deflated = payload.len() >= self.min_size
            && SCRATCH.with_borrow_mut(|scratch| {
                scratch.clear();
                if !self.compress(payload, scratch) {
                    return false;
                }
                encode_head(out, opcode, scratch.len());
                out.extend_from_slice(scratch);
                if scratch.capacity() > 1 << 20 {
                    *scratch = Vec::new(); // one large message keeps no memory
                }
                true
            });
        if deflated {
            out[start] |= 0x40; // RSV1: this message is compressed
        } else {
            encode_head(out, opcode, payload.len());
            out.extend_from_slice(payload);
        }
    }

    /// Deflates `payload` into `out`, without the tail; `false` on a
    /// compressor error.
    fn compress(&mut self, payload: &[u8], out: &mut Vec<u8>) -> bool {
        if self.takeover {
            let level = self.level;
            let c = self
                .own
                .get_or_insert_with(|| Box::new(Compress::new(Compression::new(level), false)));
            return sync_flush(c, payload, out);
        }
        COMPRESS.with_borrow_mut(|shared| {
            if shared
                .as_ref()
                .is_none_or(|(level, _)| *level != self.level)
            {
                let c = Compress::new(Compression::new(self.level), false);
                *shared = Some((self.level, c));
            }
            let Some((_, c)) = shared.as_mut() else {
                return false;
            };
            let done = sync_flush(c, payload, out);
            c.reset();
            done
        })
    }
}

/// Compresses all of `payload` into `out` with a sync flush, then strips
/// the flush's `00 00 ff ff`.
fn sync_flush(c: &mut Compress, payload: &[u8], out: &mut Vec<u8>) -> bool {
    out.reserve(payload.len() / 2 + 64);
    let start_in = c.total_in();
    loop {
        let taken = (c.total_in() - start_in) as usize;
        if c.compress_vec(&payload[taken..], out, FlushCompress::Sync)
            .is_err()
        {
            return false;
        }
        let taken = (c.total_in() - start_in) as usize;
        // The flush is complete once all input went in and the output
        // did not fill the room it had.
        if taken == payload.len() && out.len() < out.capacity() {
            break;
        }
        out.reserve(out.capacity().max(1024));
    }
    if !out.ends_with(&TAIL) {
        return false;
    }
    out.truncate(out.len() - TAIL.len());
    true
}

/// The receiving side: inflates a connection's compressed messages.
#[derive(Debug)]
pub(crate) struct Inflater {
    own: Option<Box<Decompress>>,
    takeover: bool,
}

impl std::fmt::Debug for Deflater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deflater")
            .field("takeover", &self.takeover)
            .finish_non_exhaustive()
    }
}

impl Inflater {
    /// Inflates a message's payload; at most `limit` bytes of output.
    ///
    /// # Errors
    ///
    /// 1009 for a message that inflates to more than `limit` bytes
    /// (found once `limit + 1` are out, never more), 1007 for data that
    /// is not DEFLATE.
    pub(crate) fn inflate(&mut self, payload: &[u8], limit: usize) -> Result<Vec<u8>, Violation> {
        if self.takeover {
            let d = self
                .own
                .get_or_insert_with(|| Box::new(Decompress::new(false)));
            return inflate(d, payload, limit);
        }
        DECOMPRESS.with_borrow_mut(|shared| {
            let d = shared.get_or_insert_with(|| Decompress::new(false));
            d.reset(false);
            inflate(d, payload, limit)
        })
    }
}

fn inflate(d: &mut Decompress, payload: &[u8], limit: usize) -> Result<Vec<u8>, Violation> {
    // The output may hold `limit + 1` bytes: one more is the proof that
    // the message is over the limit.
    let cap = limit.saturating_add(1);
    let mut out = Vec::with_capacity((payload.len().saturating_mul(2)).clamp(64, cap));
    for input in [payload, &TAIL[..]] {
        let start_in = d.total_in();
        loop {
            if out.len() == out.capacity() {
                if out.len() >= cap {
                    return Err(Violation::too_big("message over the size limit"));
                }
                let more = out.len().max(4096).min(cap - out.len());
                out.reserve_exact(more);
            }
            let taken = (d.total_in() - start_in) as usize;
            let before = out.len();
            let status = d
                .decompress_vec(&input[taken..], &mut out, FlushDecompress::Sync)
                .map_err(|_| Violation::invalid_data("compressed data is not DEFLATE"))?;
            if out.len() > limit {
                return Err(Violation::too_big("message over the size limit"));
            }
            let taken_now = (d.total_in() - start_in) as usize;
            if status == Status::StreamEnd {
                // A final block (BFINAL) ends the stream: what follows
                // starts a new one.
                d.reset(false);
                break;
            }
            let room = out.len() < out.capacity();
            if taken_now == input.len() && room {
                break;
            }
            if taken_now == taken && out.len() == before && room {
                // Neither input taken nor output made with room for it:
                // the data stops in the middle of a block.
                break;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "deflate_tests.rs"]
mod tests;
