//! The metric families: each counter of the framework, the HTTP layer and
//! the fan-out proxy (the WebSocket layer's are in `ws.rs`), with its name, type and help, one sample per core.

use percore::runtime::HistogramSnapshot;
use percore::{StatsReader, StatsSnapshot};

use super::text::{Kind, Text};
use crate::http::HttpStats;
use crate::proxy::ProxyStats;

/// A family with one sample per core: `(name, kind, help, value)`.
pub(super) type PerCore<T> = (&'static str, Kind, &'static str, fn(&T) -> f64);

pub(super) fn per_core<T>(text: &mut Text<'_>, rows: &[(String, T)], families: &[PerCore<T>]) {
    for &(name, kind, help, value) in families {
        text.family(name, kind, help);
        for (core, row) in rows {
            text.sample(name, &[("core", core)], value(row));
        }
    }
}

pub(super) fn framework(text: &mut Text<'_>, cores: &[StatsSnapshot]) {
    text.family(
        "percore_core_info",
        Kind::Gauge,
        "A core's backend and io_uring set-up flags (none on epoll).",
    );
    for s in cores {
        let core = s.cpu.to_string();
        let backend = s.backend.to_string();
        let labels = [
            ("core", core.as_str()),
            ("backend", &backend),
            ("ring_flags", s.ring_flags.unwrap_or("none")),
        ];
        text.sample("percore_core_info", &labels, 1);
    }
    let rows: Vec<(String, StatsSnapshot)> = cores
        .iter()
        .map(|s| (s.cpu.to_string(), s.clone()))
        .collect();
    use Kind::{Counter as C, Gauge as G};
    let families: &[PerCore<StatsSnapshot>] = &[
        (
            "percore_connections_accepted_total",
            C,
            "Connections accepted.",
            |s| s.accepted as f64,
        ),
        ("percore_connections_active", G, "Connections open.", |s| {
            s.active as f64
        }),
        (
            "percore_requests_total",
            C,
            "Requests served (every listener's).",
            |s| s.requests as f64,
        ),
        ("percore_received_bytes_total", C, "Bytes received.", |s| {
            s.bytes_in as f64
        }),
        ("percore_sent_bytes_total", C, "Bytes sent.", |s| {
            s.bytes_out as f64
        }),
        (
            "percore_accept_errors_total",
            C,
            "Accept failures other than fd exhaustion.",
            |s| s.errors_accept as f64,
        ),
        (
            "percore_fd_limit_errors_total",
            C,
            "Accepts refused for lack of file descriptors.",
            |s| s.errors_fd_limit as f64,
        ),
        (
            "percore_io_errors_total",
            C,
            "Connections that ended with an I/O error.",
            |s| s.errors_io as f64,
        ),
        (
            "percore_driver_errors_total",
            C,
            "Failed io_uring_enter or epoll_wait calls.",
            |s| s.errors_driver as f64,
        ),
        (
            "percore_panics_total",
            C,
            "Panics caught in the core's tasks.",
            |s| s.panics as f64,
        ),
        (
            "percore_buffer_exhausted_total",
            C,
            "Receives that found the buffer ring empty.",
            |s| s.buffer_exhausted as f64,
        ),
        (
            "percore_read_pauses_total",
            C,
            "Multishot operations paused for a slow consumer.",
            |s| s.backpressure_pauses as f64,
        ),
        (
            "percore_multishot_rearms_total",
            C,
            "Multishot operations that ended and were re-armed.",
            |s| s.multishot_ended as f64,
        ),
        (
            "percore_bulk_reads_total",
            C,
            "Connections switched to single-shot reads (bulk streams).",
            |s| s.bulk_reads as f64,
        ),
        (
            "percore_accept_pauses_total",
            C,
            "Times accepting paused at the connection limit.",
            |s| s.accept_paused as f64,
        ),
        (
            "percore_accept_held_total",
            C,
            "Times accepting was held because the core was overloaded.",
            |s| s.accept_held as f64,
        ),
        (
            "percore_closed_unserved_total",
            C,
            "Connections closed unserved at a stop (connection limit).",
            |s| s.closed_unserved as f64,
        ),
        (
            "percore_tls_handshakes_total",
            C,
            "TLS handshakes completed.",
            |s| s.tls_handshakes as f64,
        ),
        (
            "percore_tls_failures_total",
            C,
            "TLS handshakes failed or timed out.",
            |s| s.tls_failures as f64,
        ),
        (
            "percore_tls_evicted_total",
            C,
            "TLS connections closed mid-handshake to make room (handshake limit).",
            |s| s.tls_evicted as f64,
        ),
        (
            "percore_tls_plain_http_total",
            C,
            "Plain HTTP requests sent to a TLS port, answered 400 and closed.",
            |s| s.tls_plain_http as f64,
        ),
        (
            "percore_tls_handshake_cpu_seconds_total",
            C,
            "CPU time spent in TLS handshakes.",
            |s| s.tls_handshake_time.as_secs_f64(),
        ),
        (
            "percore_sqes_submitted_total",
            C,
            "io_uring submission queue entries submitted.",
            |s| s.submissions as f64,
        ),
        (
            "percore_enters_total",
            C,
            "io_uring_enter or epoll_wait calls.",
            |s| s.enters as f64,
        ),
        (
            "percore_batched_waits_total",
            C,
            "Waits that held out for a batch of completions.",
            |s| s.batched_waits as f64,
        ),
        (
            "percore_syscalls_total",
            C,
            "Other I/O syscalls made directly (epoll).",
            |s| s.syscalls as f64,
        ),
        (
            "percore_ops_in_flight",
            G,
            "io_uring operations in flight at the last loop turn.",
            |s| s.in_flight as f64,
        ),
        (
            "percore_ring_buffers_out",
            G,
            "Provided-ring buffers outside the ring at the last loop turn.",
            |s| s.ring_buffers_out as f64,
        ),
        (
            "percore_cpu_seconds_total",
            C,
            "CPU time the core's thread has used.",
            |s| s.cpu_time.as_secs_f64(),
        ),
        (
            "percore_queue_delay_seconds",
            G,
            "How long the core's oldest ready work had waited when it last looked for more I/O (when tracked).",
            |s| s.queue_delay.as_secs_f64(),
        ),
        (
            "percore_stalls_total",
            C,
            "Loop turns that kept the core longer than the stall threshold (each logged once at WARN with a backtrace).",
            |s| s.stalls as f64,
        ),
        (
            "percore_steering_weight",
            G,
            "The core's share of new connections in the steering program attached now (0 when none steers).",
            |s| s.steering_weight_ppm as f64 / 1e6,
        ),
        (
            "percore_connections_moved_in_total",
            C,
            "Connections other cores moved here at a request boundary.",
            |s| s.moved_in as f64,
        ),
        (
            "percore_connections_moved_out_total",
            C,
            "Connections moved from here to other cores.",
            |s| s.moved_out as f64,
        ),
        (
            "percore_connection_moves_refused_total",
            C,
            "Moves from here that the target refused (stopping, full, busy): the connection stayed.",
            |s| s.moves_refused as f64,
        ),
    ];
    per_core(text, &rows, families);
    let name = "percore_stall_duration_seconds";
    text.family(
        name,
        Kind::Histogram,
        "How long each ended stall kept its core.",
    );
    for (core, s) in &rows {
        text.histogram(name, &[("core", core)], &s.stall_durations);
    }
}

pub(super) fn steering(text: &mut Text<'_>, server: &StatsReader) {
    let steering = server.steering();
    let name = "percore_steering_active";
    text.family(
        name,
        Kind::Gauge,
        "1 while a BPF program steers new connections to the cores with room, else 0.",
    );
    text.sample(name, &[], u8::from(steering.active));
    let name = "percore_steering_attaches_total";
    text.family(
        name,
        Kind::Counter,
        "Steering programs attached (one per listener each time the cores' shares moved).",
    );
    text.sample(name, &[], steering.attaches);
}

pub(super) fn listeners(text: &mut Text<'_>, server: &StatsReader) {
    let all = server.listeners();
    text.family(
        "percore_listener_connections_accepted_total",
        Kind::Counter,
        "Connections accepted, per listener (all cores).",
    );
    for l in &all {
        text.sample(
            "percore_listener_connections_accepted_total",
            &[("listener", &l.addr.to_string())],
            l.accepted,
        );
    }
    text.family(
        "percore_listener_connections_active",
        Kind::Gauge,
        "Connections open, per listener (all cores).",
    );
    for l in &all {
        text.sample(
            "percore_listener_connections_active",
            &[("listener", &l.addr.to_string())],
            l.active,
        );
    }
}

pub(super) fn http(text: &mut Text<'_>, cores: &[(String, HttpStats, HistogramSnapshot)]) {
    let name = "percore_http_responses_total";
    text.family(name, Kind::Counter, "HTTP responses sent, by status class.");
    for (core, s, _) in cores {
        for (class, n) in [
            ("2xx", s.status_2xx),
            ("3xx", s.status_3xx),
            ("4xx", s.status_4xx),
            ("5xx", s.status_5xx),
        ] {
            text.sample(name, &[("core", core), ("class", class)], n);
        }
    }
    let rows: Vec<(String, HttpStats)> = cores.iter().map(|(c, s, _)| (c.clone(), *s)).collect();
    use Kind::{Counter as C, Gauge as G};
    let families: &[PerCore<HttpStats>] = &[
        (
            "percore_http_refused_total",
            C,
            "Requests the HTTP layer refused (400, 413, 414, 417, 431, 501, 505).",
            |s| s.refused as f64,
        ),
        (
            "percore_http_timeouts_total",
            C,
            "Request heads or bodies too slow (408).",
            |s| s.timeouts as f64,
        ),
        (
            "percore_http_service_errors_total",
            C,
            "Service calls that failed with a 5xx or panicked.",
            |s| s.service_errors as f64,
        ),
        (
            "percore_http_cut_off_total",
            C,
            "Service calls cut off by a stop (503).",
            |s| s.cut_off as f64,
        ),
        (
            "percore_http_shed_total",
            C,
            "Requests shed with 503 and Retry-After, the core overloaded.",
            |s| s.shed as f64,
        ),
        (
            "percore_http_shed_held_total",
            C,
            "Shed requests whose 503 was held until the Retry-After before it passed.",
            |s| s.shed_held as f64,
        ),
        (
            "percore_http2_connections_total",
            C,
            "Connections served with HTTP/2.",
            |s| s.h2_connections as f64,
        ),
        (
            "percore_http2_cut_total",
            C,
            "HTTP/2 connections ended with GOAWAY for abuse (floods, rapid reset, protocol errors).",
            |s| s.h2_cut as f64,
        ),
        (
            "percore_http2_requests_total",
            C,
            "Requests served over HTTP/2 (one a stream).",
            |s| s.h2_streams as f64,
        ),
        (
            "percore_http2_open_streams",
            G,
            "HTTP/2 streams whose service call is running.",
            |s| s.h2_streams.saturating_sub(s.h2_streams_ended) as f64,
        ),
        (
            "percore_http2_streams_reset_total",
            C,
            "HTTP/2 streams the client reset or lost before their answer.",
            |s| s.h2_streams_reset as f64,
        ),
        (
            "percore_http2_goaways_total",
            C,
            "GOAWAY frames sent (stop, idle, abuse).",
            |s| s.h2_goaways as f64,
        ),
    ];
    per_core(text, &rows, families);
    let name = "percore_http_request_duration_seconds";
    text.family(
        name,
        Kind::Histogram,
        "Time from the read that brought a request to its response in the output.",
    );
    for (core, _, latency) in cores {
        text.histogram(name, &[("core", core)], latency);
    }
}

pub(super) fn proxy(text: &mut Text<'_>, rows: &[(String, ProxyStats)]) {
    use Kind::Counter as C;
    let families: &[PerCore<ProxyStats>] = &[
        (
            "percore_proxy_requests_total",
            C,
            "Fanned-out client requests.",
            |s| s.requests as f64,
        ),
        (
            "percore_proxy_failed_total",
            C,
            "Client requests answered 502 or 504.",
            |s| s.failed as f64,
        ),
        (
            "percore_proxy_failed_504_total",
            C,
            "Client requests answered 504.",
            |s| s.failed_504 as f64,
        ),
        (
            "percore_proxy_sub_requests_total",
            C,
            "Sub-requests sent, retries included.",
            |s| s.sub_requests as f64,
        ),
        (
            "percore_proxy_connects_total",
            C,
            "Upstream connections begun.",
            |s| s.connects as f64,
        ),
        (
            "percore_proxy_reuses_total",
            C,
            "Sub-requests sent on a pooled connection.",
            |s| s.reuses as f64,
        ),
        (
            "percore_proxy_retries_total",
            C,
            "Automatic retries.",
            |s| s.retries as f64,
        ),
        (
            "percore_proxy_connect_errors_total",
            C,
            "Upstream connect failures.",
            |s| s.errors_connect as f64,
        ),
        (
            "percore_proxy_exchange_errors_total",
            C,
            "Upstream exchanges that failed.",
            |s| s.errors_exchange as f64,
        ),
        (
            "percore_proxy_deadline_total",
            C,
            "Branches still running at the request deadline.",
            |s| s.deadline as f64,
        ),
        (
            "percore_proxy_cancelled_total",
            C,
            "Branches cancelled by a decided policy.",
            |s| s.cancelled as f64,
        ),
        (
            "percore_proxy_drained_total",
            C,
            "Cut-off branches drained and pooled again.",
            |s| s.drained as f64,
        ),
        (
            "percore_proxy_drain_closed_total",
            C,
            "Cut-off branches whose connection was closed.",
            |s| s.drain_closed as f64,
        ),
        (
            "percore_proxy_drain_workers_total",
            C,
            "Drain workers started.",
            |s| s.drain_workers as f64,
        ),
        (
            "percore_proxy_stopped_total",
            C,
            "Client requests cut off by a stop.",
            |s| s.stopped as f64,
        ),
        (
            "percore_proxy_loops_total",
            C,
            "Client requests answered 508 (a loop).",
            |s| s.loops as f64,
        ),
        (
            "percore_proxy_upstream_5xx_total",
            C,
            "Sub-requests answered with a 5xx.",
            |s| s.upstream_5xx as f64,
        ),
        (
            "percore_proxy_ejections_total",
            C,
            "Upstreams ejected.",
            |s| s.ejections as f64,
        ),
        (
            "percore_proxy_all_ejected_total",
            C,
            "Client requests answered 503, every upstream ejected.",
            |s| s.all_ejected as f64,
        ),
        (
            "percore_proxy_rejected_pending_total",
            C,
            "Client requests answered 503 by the pending-request breaker.",
            |s| s.rejected_pending as f64,
        ),
        (
            "percore_proxy_mirrored_total",
            C,
            "Mirror copies answered below 500.",
            |s| s.mirrored as f64,
        ),
        (
            "percore_proxy_mirror_failed_total",
            C,
            "Mirror copies that failed.",
            |s| s.mirror_failed as f64,
        ),
        (
            "percore_proxy_mirror_dropped_total",
            C,
            "Mirror copies not sent (too many pending).",
            |s| s.mirror_dropped as f64,
        ),
    ];
    per_core(text, rows, families);
}
