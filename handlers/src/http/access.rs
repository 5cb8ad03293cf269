//! The access log: one INFO line per response, when
//! [`Config::access_log`](super::Config::access_log) is on, under the
//! target `percore_handlers::http::access` (so `RUST_LOG` can route or
//! silence it alone).

use std::time::Instant;

use percore::Connection;

/// Target of the access log's lines.
const TARGET: &str = "percore_handlers::http::access";

/// The request a response answers, for its line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Exchange<'a> {
    pub(crate) method: &'a str,
    pub(crate) target: &'a str,
    /// When the turn that read the request began (the core's clock).
    pub(crate) started: Instant,
}

/// Logs one response: the client, the request (`-` for a head that never
/// parsed, answered 400 or 408), the status, and the microseconds from
/// the read that brought the request to the response in the output.
pub(crate) fn log(conn: &Connection, exchange: Option<Exchange<'_>>, status: u16) {
    let peer = conn
        .peer_addr()
        .map_or_else(|_| "-".to_owned(), |addr| addr.to_string());
    let (method, target, micros) = match exchange {
        Some(e) => (
            e.method,
            e.target,
            Instant::now()
                .saturating_duration_since(e.started)
                .as_micros() as u64,
        ),
        None => ("-", "-", 0),
    };
    // Display, not Debug: no quotes. A target cannot hold a space or a
    // control byte (the parser refused those), so the line stays one line
    // of space-separated `key=value` fields.
    tracing::info!(target: TARGET, peer = %peer, method = %method, target = %target, status, micros);
}
