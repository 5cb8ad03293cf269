//! The WebSocket families: connections open, messages and bytes each
//! way, closes by code and slow readers dropped, one sample per core.

use super::families::{per_core, PerCore};
use super::text::{Kind, Text};
use crate::ws::WsStats;

pub(super) fn ws(text: &mut Text<'_>, rows: &[(String, WsStats)]) {
    use Kind::{Counter as C, Gauge as G};
    let families: &[PerCore<WsStats>] = &[
        ("percore_ws_open", G, "WebSockets open.", |s| {
            s.open() as f64
        }),
        ("percore_ws_opened_total", C, "WebSockets accepted.", |s| {
            s.opened as f64
        }),
        (
            "percore_ws_h2_opened_total",
            C,
            "WebSockets accepted on an HTTP/2 stream (extended CONNECT), of those accepted.",
            |s| s.opened_h2 as f64,
        ),
        (
            "percore_ws_messages_received_total",
            C,
            "Data messages received.",
            |s| s.messages_in as f64,
        ),
        (
            "percore_ws_messages_sent_total",
            C,
            "Data messages queued to be sent.",
            |s| s.messages_out as f64,
        ),
        (
            "percore_ws_received_bytes_total",
            C,
            "Payload bytes of the data messages received.",
            |s| s.bytes_in as f64,
        ),
        (
            "percore_ws_sent_bytes_total",
            C,
            "Payload bytes of the data messages queued to be sent.",
            |s| s.bytes_out as f64,
        ),
        (
            "percore_ws_slow_dropped_total",
            C,
            "WebSockets dropped because their client read too slowly for its send queue.",
            |s| s.slow_dropped as f64,
        ),
    ];
    per_core(text, rows, families);
    let name = "percore_ws_closes_total";
    text.family(
        name,
        Kind::Counter,
        "WebSockets ended, by the close code that ended them (1006: without one).",
    );
    for (core, s) in rows {
        for (code, n) in WsStats::CODES.iter().zip(s.closes) {
            text.sample(name, &[("core", core), ("code", &code.to_string())], n);
        }
        text.sample(name, &[("core", core), ("code", "other")], s.closes_other);
    }
}
