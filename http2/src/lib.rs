//! percore's HTTP/2 wire layer, with no I/O: the frames of RFC 9113 and
//! the header compression of RFC 7541 (HPACK).
//!
//! # Why a crate of its own
//!
//! An idle connection served by the `h2` crate keeps about 30 KB: fixed
//! read and write buffers, an HPACK buffer, a stream store. This crate is
//! the foundation of a connection that keeps almost nothing while idle:
//!
//! - [`frame`] parses a frame in place. A parsed frame borrows the input
//!   slice; nothing is copied or allocated. Every validity rule RFC 9113
//!   §4 and §6 state is checked, and a refusal names its RFC error code
//!   and whether it ends the stream or the connection
//!   ([`frame::FrameError`]). Encoders append to a caller's `Vec<u8>`.
//! - [`hpack`] decodes header blocks field by field into a callback, with
//!   the header list size limit enforced as it goes, and Huffman strings
//!   decoded on the stack when short. Its dynamic table allocates nothing
//!   until the first insert and keeps its entries in one byte buffer. The
//!   encoder, made for a server's answers, never indexes: it keeps no
//!   table at all.
//! - [`server`] is a sans-IO server connection on top of both: preface
//!   and SETTINGS exchange, field blocks joined across CONTINUATION,
//!   stream states, flow control both ways, the request rules of RFC
//!   9113 §8 (pseudo-header fields, `content-length` against DATA) and
//!   RFC 8441's extended CONNECT, and the limits that bound a
//!   connection's memory and work (concurrent streams, CONTINUATION
//!   floods, rapid resets).
//!
//! Being plain functions over byte slices, both are driven in their tests
//! by the examples of RFC 7541 Appendix C, every malformed case the RFCs
//! name, and random and mutated input that must only ever give `Ok` or
//! `Err`, never a panic.
//!
//! # Reading frames
//!
//! ```
//! use percore_http2::frame::{self, Frame, Role};
//!
//! let mut wire = Vec::new();
//! frame::write_ping(&mut wire, *b"12345678", false);
//! let (parsed, used) = frame::decode(&wire, frame::DEFAULT_MAX_FRAME_SIZE, Role::Server)
//!     .unwrap()
//!     .expect("a whole frame");
//! assert_eq!(used, wire.len());
//! assert!(matches!(parsed, Frame::Ping(ping) if ping.data == *b"12345678" && !ping.ack));
//! ```
//!
//! # Header blocks
//!
//! ```
//! use percore_http2::hpack::{Decoder, Encoder};
//!
//! let mut block = Vec::new();
//! let mut fields = Encoder::new().block(&mut block);
//! fields.status(200);
//! fields.field(b"content-type", b"text/plain", false);
//!
//! let mut decoder = Decoder::new();
//! let mut seen = Vec::new();
//! decoder
//!     .decode(&block, |name, value, _sensitive| seen.push((name.to_vec(), value.to_vec())))
//!     .unwrap();
//! assert_eq!(seen[0], (b":status".to_vec(), b"200".to_vec()));
//! ```

pub mod frame;
pub mod hpack;
pub mod server;
