//! Per-core WebSocket counters: connections open, messages and bytes
//! each way, closes by code, slow readers dropped. Written by their core
//! (the framework's single-writer [`Counter`]s), readable from any thread
//! through a [`WsStatsReader`], which the metrics exporter renders.

use std::fmt;
use std::sync::Arc;

use percore::runtime::Counter;

use super::close::CloseCode;

/// The close codes counted one by one; any other counts as `other`.
pub(crate) const CODES: [u16; 10] = [1000, 1001, 1002, 1003, 1006, 1007, 1008, 1009, 1011, 1005];

/// A copy of one core's WebSocket counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WsStats {
    /// WebSockets accepted on this core, over either HTTP version.
    pub opened: u64,
    /// Of `opened`, those on an HTTP/2 stream (extended CONNECT, RFC
    /// 8441).
    pub opened_h2: u64,
    /// WebSockets that ended (so `opened - closed` are open).
    pub closed: u64,
    /// Data messages received.
    pub messages_in: u64,
    /// Data messages queued to be sent.
    pub messages_out: u64,
    /// Payload bytes received in data messages.
    pub bytes_in: u64,
    /// Payload bytes of the data messages queued to be sent.
    pub bytes_out: u64,
    /// Connections ended, by the close code that ended them (the one the
    /// server sent, or the client's, whichever came first; 1006 for a
    /// connection that ended without one), in the order of `codes`.
    pub closes: [u64; CODES.len()],
    /// Connections ended with a code not in `codes`.
    pub closes_other: u64,
    /// Clients dropped because they read too slowly for their send queue.
    pub slow_dropped: u64,
}

impl WsStats {
    /// The close codes `closes` counts, in its order.
    pub const CODES: [u16; CODES.len()] = CODES;

    /// WebSockets open now.
    pub fn open(&self) -> u64 {
        self.opened.saturating_sub(self.closed)
    }

    /// Connections that ended with `code`.
    pub fn closes_with(&self, code: u16) -> u64 {
        match CODES.iter().position(|&c| c == code) {
            Some(i) => self.closes[i],
            None => self.closes_other,
        }
    }
}

impl fmt::Display for WsStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "open={} h2_opened={} in={}/{}B out={}/{}B slow_dropped={} closes:",
            self.open(),
            self.opened_h2,
            self.messages_in,
            self.bytes_in,
            self.messages_out,
            self.bytes_out,
            self.slow_dropped
        )?;
        for (code, n) in CODES.iter().zip(self.closes) {
            if n > 0 {
                write!(f, " {code}={n}")?;
            }
        }
        write!(f, " other={}", self.closes_other)
    }
}

/// Reads one core's WebSocket counters from any thread. Get one with
/// [`stats_reader`](super::stats_reader) on the core (in the server's
/// factory).
#[derive(Debug, Clone)]
pub struct WsStatsReader(Arc<Counters>);

impl WsStatsReader {
    /// The core's counters now.
    pub fn snapshot(&self) -> WsStats {
        let c = &self.0;
        WsStats {
            opened: c.opened.get(),
            opened_h2: c.opened_h2.get(),
            closed: c.closed.get(),
            messages_in: c.messages_in.get(),
            messages_out: c.messages_out.get(),
            bytes_in: c.bytes_in.get(),
            bytes_out: c.bytes_out.get(),
            closes: std::array::from_fn(|i| c.closes[i].get()),
            closes_other: c.closes_other.get(),
            slow_dropped: c.slow_dropped.get(),
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) opened: Counter,
    pub(crate) opened_h2: Counter,
    pub(crate) closed: Counter,
    pub(crate) messages_in: Counter,
    pub(crate) messages_out: Counter,
    pub(crate) bytes_in: Counter,
    pub(crate) bytes_out: Counter,
    closes: [Counter; CODES.len()],
    closes_other: Counter,
    pub(crate) slow_dropped: Counter,
}

impl Counters {
    pub(crate) fn close(&self, code: CloseCode) {
        match CODES.iter().position(|&c| c == code.0) {
            Some(i) => self.closes[i].add(1),
            None => self.closes_other.add(1),
        }
        self.closed.add(1);
    }
}

thread_local! {
    static COUNTERS: Arc<Counters> = Arc::default();
}

/// Runs `f` with this thread's (core's) counters.
pub(crate) fn with<R>(f: impl FnOnce(&Counters) -> R) -> R {
    COUNTERS.with(|c| f(c))
}

/// A reader of this core's WebSocket counters.
pub fn stats_reader() -> WsStatsReader {
    COUNTERS.with(|c| WsStatsReader(c.clone()))
}
