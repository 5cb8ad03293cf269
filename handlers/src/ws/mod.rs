//! WebSocket (RFC 6455) on percore's HTTP layer.
//!
//! A route accepts a client's upgrade with a [`Handshake`] and gets a
//! [`WebSocket`] in the connection's task; the same code runs over TCP,
//! Unix sockets and TLS, on io_uring and epoll, and over HTTP/1.1 (an
//! `Upgrade`, RFC 6455) or an HTTP/2 stream (an extended CONNECT, RFC
//! 8441, feature `h2`). [`hub`] broadcasts to the subscribers of a topic
//! on every core.
//!
//! # What the server does
//!
//! - **Handshake** (§4.2): `GET` with `Upgrade: websocket`, `Connection:
//!   upgrade`, `Sec-WebSocket-Version: 13` (else 426 naming it) and a
//!   16-byte `Sec-WebSocket-Key` (else 400); the route chooses a
//!   subprotocol and decides on the `Origin`. On HTTP/2 (RFC 8441 §5):
//!   `CONNECT` with `:protocol websocket` and the same version field, no
//!   key, and a 200 instead of the 101.
//! - **The byte stream** is the connection after its 101, or the HTTP/2
//!   stream's DATA frames (see [`Upgraded`](crate::http::Upgraded)): the
//!   reader and the writer below run on either, the HTTP/1.1 path with
//!   the connection's own reads and writes (no copy more). On HTTP/2 the
//!   stream's receive window is given back as the WebSocket reads, and
//!   frames go out as the client's windows allow, so the limits below
//!   bound memory the same way.
//! - **Framing** (§5): client frames must be masked, reserved bits and
//!   opcodes unused, control frames final and at most 125 bytes: else
//!   the connection is closed with 1002. Text must be UTF-8, checked as
//!   fragments arrive and across their boundaries (1007). A frame over
//!   [`WsConfig::max_frame`] or a message over
//!   [`WsConfig::max_message`] gets 1009 before its payload is read.
//! - **Control frames**: pings are answered with pongs; a client silent
//!   for [`WsConfig::ping_interval`] is pinged, and dropped if it stays
//!   silent for [`WsConfig::pong_timeout`]; one that sends no message for
//!   [`WsConfig::idle_timeout`] is closed (1001).
//! - **Closing** (§7): a client's close is answered with its code; when
//!   the route's future ends the server closes (1000, or 1011 if it
//!   failed), waits for the client's close within
//!   [`WsConfig::close_timeout`], then closes the stream; at the server's
//!   stop every WebSocket is closed with 1001.
//! - **Sending** never waits: frames are queued, bounded by
//!   [`WsConfig::max_send_queue`], and a client too slow for its queue is
//!   dropped (counted), so one slow reader cannot grow memory or hold up
//!   a broadcast.
//!
//! # Why a codec of our own
//!
//! The framing is a small sans-IO codec ([`frame`]) rather than
//! tungstenite's protocol core. tungstenite drives a blocking
//! `Read + Write` stream and owns its buffers: on percore's completion
//! I/O (owned buffers handed to the kernel) it would need an adapter
//! that copies every read into its buffer and every frame out of it, and
//! its send queue is unbounded unless capped by a count of messages. The
//! codec here decodes in place: a read is appended to one `BytesMut`, a
//! whole frame is unmasked where it lies and split off as the message's
//! `Bytes` (no copy for an unfragmented message; one for the fragments
//! of a fragmented one), and sends are encoded straight into the queue
//! the writer hands to the kernel. It is about 350 lines with its rules
//! tested one by one ([`frame`]'s tests, and the conformance table in
//! `handlers/tests/suite/ws_conformance.rs`).
//!
//! `permessage-deflate` (RFC 7692) is accepted with the `ws-deflate`
//! feature (see `Deflate` for the negotiation and its limits); without
//! it a client that asks for it gets a WebSocket without it, which RFC
//! 7692 allows.

mod close;
mod config;
#[cfg(feature = "ws-deflate")]
mod deflate;
pub mod frame;
mod handshake;
pub mod hub;
mod message;
mod outbox;
mod socket;
mod stats;

pub use close::{valid_code, CloseCode};
pub use config::WsConfig;
#[cfg(feature = "ws-deflate")]
pub use deflate::Deflate;
pub use handshake::{accept_key, Handshake};
pub use message::Message;
pub use outbox::Sender;
pub use socket::WebSocket;
pub use stats::{stats_reader, WsStats, WsStatsReader};
