//! Per-core counters, written by the core and read from anywhere.
//!
//! Each counter has one writer (its core), so an increment is a plain
//! load and store of an atomic, not a locked read-modify-write: as cheap as
//! a non-atomic add, and a reader on another thread still sees a value that
//! was really there.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::backend::Backend;

/// A counter with a single writer, readable from any thread: the kind the
/// framework keeps per core, for a handler's own per-core counters (share
/// it in an `Arc` with whatever reads it).
///
/// Give each core its own: the server's factory runs once per core, so a
/// single `Counter` cloned into every core's handler has several writers
/// and loses counts. Make one per core index
/// ([`CoreContext::index`](crate::CoreContext::index)) and sum them when
/// reading.
///
/// Only one thread may add to it, the core that owns it: an increment is a
/// relaxed load and store, as cheap as a plain add, and concurrent adds
/// from two threads would lose counts (never memory safety). Readers see a
/// value that was really there.
///
/// In debug builds a second writing thread panics, naming the mistake,
/// where a release build would lose counts silently.
#[derive(Debug, Default)]
pub struct Counter {
    value: AtomicU64,
    #[cfg(debug_assertions)]
    writer: std::sync::OnceLock<std::thread::ThreadId>,
}

impl Counter {
    /// Adds `n` (wrapping); from the owning thread only.
    ///
    /// # Panics
    ///
    /// In debug builds, when another thread has written to it before.
    pub fn add(&self, n: u64) {
        self.check_writer();
        self.value.store(
            self.value.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    pub(crate) fn sub(&self, n: u64) {
        self.check_writer();
        self.value.store(
            self.value.load(Ordering::Relaxed).wrapping_sub(n),
            Ordering::Relaxed,
        );
    }

    pub(crate) fn set(&self, n: u64) {
        self.check_writer();
        self.value.store(n, Ordering::Relaxed);
    }

    #[cfg(debug_assertions)]
    fn check_writer(&self) {
        let me = std::thread::current().id();
        let first = *self.writer.get_or_init(|| me);
        assert!(
            first == me,
            "a percore Counter was written by a second thread: each counter has \
             one writer (make one per core, see Counter's docs)"
        );
    }

    #[cfg(not(debug_assertions))]
    fn check_writer(&self) {}

    /// The current value, from any thread.
    pub fn get(&self) -> u64 {
        self.value.load(Ordering::Relaxed)
    }
}

#[derive(Debug, Default)]
pub(crate) struct CoreStats {
    pub(crate) accepted: Counter,
    pub(crate) active: Counter,
    pub(crate) requests: Counter,
    pub(crate) bytes_in: Counter,
    pub(crate) bytes_out: Counter,
    pub(crate) errors_accept: Counter,
    pub(crate) errors_fd_limit: Counter,
    pub(crate) errors_io: Counter,
    pub(crate) errors_driver: Counter,
    pub(crate) panics: Counter,
    pub(crate) buffer_exhausted: Counter,
    pub(crate) backpressure_pauses: Counter,
    pub(crate) multishot_ended: Counter,
    pub(crate) bulk_reads: Counter,
    pub(crate) accept_paused: Counter,
    pub(crate) accept_held: Counter,
    pub(crate) closed_unserved: Counter,
    pub(crate) tls_handshakes: Counter,
    pub(crate) tls_failures: Counter,
    pub(crate) tls_evicted: Counter,
    pub(crate) tls_plain_http: Counter,
    pub(crate) tls_handshake_ns: Counter,
    pub(crate) submissions: Counter,
    pub(crate) enters: Counter,
    pub(crate) batched_waits: Counter,
    pub(crate) syscalls: Counter,
    pub(crate) in_flight: Counter,
    pub(crate) ring_buffers_out: Counter,
    pub(crate) cpu_time_us: Counter,
    /// The last queue delay in µs, while it is tracked.
    pub(crate) queue_delay_us: Counter,
    pub(crate) backend: Counter,
    /// Stalls the watchdog saw (its thread is the one writer).
    pub(crate) stalls: Counter,
    /// How long each ended stall lasted (the watchdog writes it).
    pub(crate) stall_time: crate::histogram::Histogram,
    /// The core's share of new connections in the steering program
    /// attached now, in parts per million (the steering thread writes it).
    pub(crate) steer_weight_ppm: Counter,
    /// Connections moved here from other cores.
    pub(crate) moved_in: Counter,
    /// Connections moved from here to other cores.
    pub(crate) moved_out: Counter,
    /// Moves tried from here that the target refused (or never saw): the
    /// connection stayed.
    pub(crate) moves_refused: Counter,
    /// The io_uring set-up flags granted, as the driver names them;
    /// `None` for no ring. Written once, when the core's ring is made.
    pub(crate) ring_flags: std::sync::Mutex<Option<&'static str>>,
}

impl CoreStats {
    /// The driver's report of the set-up flags its ring got.
    pub(crate) fn set_ring_flags(&self, flags: &'static str) {
        *self
            .ring_flags
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(flags);
    }

    pub(crate) fn snapshot(&self, cpu: usize) -> StatsSnapshot {
        StatsSnapshot {
            cpu,
            backend: match self.backend.get() {
                1 => Backend::Uring,
                2 => Backend::Epoll,
                _ => Backend::Auto,
            },
            accepted: self.accepted.get(),
            active: self.active.get(),
            requests: self.requests.get(),
            bytes_in: self.bytes_in.get(),
            bytes_out: self.bytes_out.get(),
            errors_accept: self.errors_accept.get(),
            errors_fd_limit: self.errors_fd_limit.get(),
            errors_io: self.errors_io.get(),
            errors_driver: self.errors_driver.get(),
            panics: self.panics.get(),
            buffer_exhausted: self.buffer_exhausted.get(),
            backpressure_pauses: self.backpressure_pauses.get(),
            multishot_ended: self.multishot_ended.get(),
            bulk_reads: self.bulk_reads.get(),
            accept_paused: self.accept_paused.get(),
            accept_held: self.accept_held.get(),
            closed_unserved: self.closed_unserved.get(),
            tls_handshakes: self.tls_handshakes.get(),
            tls_failures: self.tls_failures.get(),
            tls_evicted: self.tls_evicted.get(),
            tls_plain_http: self.tls_plain_http.get(),
            tls_handshake_time: std::time::Duration::from_nanos(self.tls_handshake_ns.get()),
            submissions: self.submissions.get(),
            enters: self.enters.get(),
            batched_waits: self.batched_waits.get(),
            syscalls: self.syscalls.get(),
            in_flight: self.in_flight.get(),
            ring_buffers_out: self.ring_buffers_out.get(),
            cpu_time: std::time::Duration::from_micros(self.cpu_time_us.get()),
            queue_delay: std::time::Duration::from_micros(self.queue_delay_us.get()),
            stalls: self.stalls.get(),
            stall_durations: self.stall_time.snapshot(),
            steering_weight_ppm: self.steer_weight_ppm.get(),
            moved_in: self.moved_in.get(),
            moved_out: self.moved_out.get(),
            moves_refused: self.moves_refused.get(),
            ring_flags: *self
                .ring_flags
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        }
    }
}

/// A copy of one core's counters at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatsSnapshot {
    /// The CPU the core runs on.
    pub cpu: usize,
    /// The backend the core runs ([`Backend::Auto`] before it started).
    pub backend: Backend,
    /// Connections accepted.
    pub accepted: u64,
    /// Connections open now.
    pub active: u64,
    /// Requests served, as counted by handlers through
    /// [`count_requests`](crate::count_requests).
    pub requests: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Accept failures other than fd exhaustion.
    pub errors_accept: u64,
    /// Accepts refused for lack of file descriptors (`EMFILE`/`ENFILE`).
    pub errors_fd_limit: u64,
    /// Connections that ended with an I/O error.
    pub errors_io: u64,
    /// Failed `io_uring_enter`/`epoll_wait` calls.
    pub errors_driver: u64,
    /// Panics caught in this core's tasks: handlers (each closed its
    /// connection), tasks from `spawn_local`, and `submit_to` calls run
    /// here for other cores (the caller gets `SubmitError::NoReply`).
    pub panics: u64,
    /// Receives that found the buffer ring empty (`ENOBUFS`).
    pub buffer_exhausted: u64,
    /// Multishot operations paused because their consumer fell behind.
    pub backpressure_pauses: u64,
    /// Multishot operations that ended and were re-armed (on io_uring a
    /// receive also ends at its byte limit, once per 64 KiB received).
    pub multishot_ended: u64,
    /// Connections switched from their multishot receive to single-shot
    /// reads into pool buffers because a completion filled its buffer (a
    /// bulk stream; io_uring).
    pub bulk_reads: u64,
    /// Times accepting paused at the connection limit.
    pub accept_paused: u64,
    /// Times accepting was held because the core was overloaded (see
    /// [`Handler::overload_bound`](crate::Handler::overload_bound)).
    pub accept_held: u64,
    /// Connections found queued in the listener at a stop and closed
    /// unserved, because the connection limit was reached.
    pub closed_unserved: u64,
    /// TLS handshakes completed on a TLS listener's connections.
    pub tls_handshakes: u64,
    /// TLS handshakes that failed (garbage, no shared protocol, a refused
    /// certificate, the client left) or timed out; each closed its
    /// connection, with a debug log line saying why.
    pub tls_failures: u64,
    /// TLS connections closed mid-handshake to make room for a new one,
    /// the core's handshakes in progress being at their limit
    /// ([`ServerBuilder::tls_max_handshakes`](crate::ServerBuilder::tls_max_handshakes));
    /// not counted in `tls_failures`.
    pub tls_evicted: u64,
    /// Plain HTTP requests sent to a TLS listener (`GET / HTTP/1.1` where
    /// a ClientHello belongs): each answered `400 Bad Request` in the
    /// clear, as nginx does, and closed; not counted in `tls_failures`.
    pub tls_plain_http: u64,
    /// Time the core spent in TLS handshakes' cryptography (rustls's work
    /// on each handshake's messages, server and client side, failed ones
    /// too), timed around each step: the CPU the handshakes cost, which a
    /// loaded machine's preemption can only inflate.
    pub tls_handshake_time: std::time::Duration,
    /// SQEs submitted (io_uring).
    pub submissions: u64,
    /// `io_uring_enter` or `epoll_wait` calls.
    pub enters: u64,
    /// Of the enters, waits that held out for a batch of completions (see
    /// [`ServerBuilder::wait_batching`](crate::ServerBuilder::wait_batching)).
    pub batched_waits: u64,
    /// Other I/O syscalls made directly (epoll backend).
    pub syscalls: u64,
    /// io_uring operations in flight at the last loop turn.
    pub in_flight: u64,
    /// Provided-ring buffers outside the ring at the last loop turn.
    pub ring_buffers_out: u64,
    /// CPU time the core's thread has used.
    pub cpu_time: std::time::Duration,
    /// The core's queue delay ([`queue_delay`](crate::queue_delay)) as of
    /// its last loop turn: how long that turn ran before the core looked
    /// for more I/O. Zero unless it is tracked (load shedding turns it on).
    pub queue_delay: std::time::Duration,
    /// Stalls: loop turns that kept the core longer than the stall
    /// threshold ([`ServerBuilder::stall_threshold`](crate::ServerBuilder::stall_threshold)),
    /// counted when seen, each logged once with a backtrace.
    pub stalls: u64,
    /// How long the ended stalls lasted (a stall still under way is in
    /// [`stalls`](Self::stalls) and not yet here).
    pub stall_durations: crate::histogram::HistogramSnapshot,
    /// This core's share of the new connections, in parts per million,
    /// in the steering program attached now
    /// ([`ServerBuilder::steering`](crate::ServerBuilder::steering)); 0
    /// while no program steers.
    pub steering_weight_ppm: u64,
    /// Connections other cores moved here at a request boundary (see
    /// [`move_connection`](crate::move_connection)); each is counted in
    /// [`active`](Self::active) here from then on, not in
    /// [`accepted`](Self::accepted).
    pub moved_in: u64,
    /// Connections moved from here to other cores.
    pub moved_out: u64,
    /// Moves from here that did not happen: the target was stopping,
    /// full or busy, and the connection stayed.
    pub moves_refused: u64,
    /// The io_uring set-up flags the kernel granted this core's ring
    /// (`SINGLE_ISSUER|DEFER_TASKRUN|TASKRUN_FLAG`, `COOP_TASKRUN|TASKRUN_FLAG`,
    /// `SQPOLL` or `none`); `None` on epoll, or before the core started.
    pub ring_flags: Option<&'static str>,
}

impl fmt::Display for StatsSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cpu={} backend={} accepted={} active={} requests={} in={} out={} \
             err_accept={} err_fd={} err_io={} panics={} enobufs={} accept_paused={} \
             accept_held={} read_paused={} unserved={} bulk={} sqes={} enters={} batched={} syscalls={} \
             inflight={} cpu_ms={} tls={} tls_failed={} tls_evicted={} tls_plain_http={} tls_ms={} stalls={} moved_in={} moved_out={}",
            self.cpu,
            self.backend,
            self.accepted,
            self.active,
            self.requests,
            self.bytes_in,
            self.bytes_out,
            self.errors_accept,
            self.errors_fd_limit,
            self.errors_io,
            self.panics,
            self.buffer_exhausted,
            self.accept_paused,
            self.accept_held,
            self.backpressure_pauses,
            self.closed_unserved,
            self.bulk_reads,
            self.submissions,
            self.enters,
            self.batched_waits,
            self.syscalls,
            self.in_flight,
            self.cpu_time.as_millis(),
            self.tls_handshakes,
            self.tls_failures,
            self.tls_evicted,
            self.tls_plain_http,
            self.tls_handshake_time.as_millis(),
            self.stalls,
            self.moved_in,
            self.moved_out
        )
    }
}

#[cfg(test)]
mod tests {
    use super::CoreStats;

    /// Each pause counter is printed under its own name: accepting paused
    /// at the connection limit, and receives paused for a slow reader.
    #[test]
    fn the_line_names_each_pause() {
        let stats = CoreStats::default();
        stats.accept_paused.add(3);
        stats.backpressure_pauses.add(5);
        let line = stats.snapshot(0).to_string();
        assert!(line.contains(" accept_paused=3 "), "{line}");
        assert!(line.contains(" read_paused=5 "), "{line}");
    }
}
