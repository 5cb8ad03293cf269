//! [`WsConfig`]: a WebSocket connection's limits and timeouts.

use std::time::Duration;

/// The limits and timeouts of a WebSocket connection (FAULTS M3, M4).
///
/// Memory per connection is bounded by `max_message` (what is gathered
/// of an incoming message; a frame is read whole, so at most
/// `max_frame` of input is buffered) plus `max_send_queue` (what waits to
/// be sent).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct WsConfig {
    /// The largest frame payload a client may send; a larger one closes
    /// the connection with 1009. 1 MiB.
    pub max_frame: usize,
    /// The largest message (all its fragments) a client may send; 1009
    /// beyond it. 1 MiB.
    pub max_message: usize,
    /// The most bytes of frames that may wait to be sent to a client. A
    /// send that would go past it finds a reader too slow for what it is
    /// sent: the connection is closed (the frames queued are dropped, and
    /// the socket reset), and counted as a slow reader dropped, rather
    /// than memory growing. 1 MiB.
    pub max_send_queue: usize,
    /// After this long without a byte from the client the server pings
    /// it. 30 s.
    pub ping_interval: Duration,
    /// A client silent this long after a ping is gone: the connection is
    /// closed (1001). 10 s.
    pub pong_timeout: Duration,
    /// A connection on which the client sent no message (pings and pongs
    /// do not count) for this long is closed with 1001. 5 min; `None`
    /// for no limit.
    pub idle_timeout: Option<Duration>,
    /// A write that makes no progress for this long (the client stopped
    /// reading, and the kernel's buffers are full) drops the connection.
    /// 30 s.
    pub write_timeout: Duration,
    /// How long the server waits for the client's close frame after
    /// sending its own, before it closes the connection anyway. 5 s.
    pub close_timeout: Duration,
    /// Whether and how `permessage-deflate` (RFC 7692) is accepted when a
    /// client offers it; `None` opens without it. On by default: building
    /// the `ws-deflate` feature is the choice to compress, and a route
    /// that serves data not worth compressing sets `None`. The limits
    /// above count a message inflated.
    #[cfg(feature = "ws-deflate")]
    pub deflate: Option<super::deflate::Deflate>,
}

impl Default for WsConfig {
    fn default() -> Self {
        Self {
            max_frame: 1 << 20,
            max_message: 1 << 20,
            max_send_queue: 1 << 20,
            ping_interval: Duration::from_secs(30),
            pong_timeout: Duration::from_secs(10),
            idle_timeout: Some(Duration::from_secs(300)),
            write_timeout: Duration::from_secs(30),
            close_timeout: Duration::from_secs(5),
            #[cfg(feature = "ws-deflate")]
            deflate: Some(super::deflate::Deflate::default()),
        }
    }
}
