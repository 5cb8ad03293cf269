//! The fan-out proxy: an HTTP [`Service`](crate::http::Service) that answers
//! each request by sending K concurrent sub-requests to upstream HTTP/1.1
//! servers and joining their answers (scatter-gather, as a search front end
//! or an API aggregator does).
//!
//! # How a request flows
//!
//! 1. The [`FanOut`] service turns the request target into the origin-form
//!    every sub-request carries (`target.rs`): `/path?q` as sent, an
//!    absolute `http://host/path?q` cut down to `/path?q`, `OPTIONS *` as
//!    sent. `CONNECT` is answered 501 (the proxy opens no tunnels) and a
//!    target in no form its method may use 400, both before anything is
//!    sent. It reads the client's body (if any) and writes the
//!    parts of the sub-request that every branch shares (end-to-end headers,
//!    `Via`, `X-Forwarded-For`, a `Content-Length` and the body) once, into
//!    a per-core scratch buffer. Hop-by-hop fields, and fields named in
//!    `Connection`, are dropped; the body is always re-framed with
//!    `Content-Length` and every line ends in CRLF.
//! 2. It starts K branches ([`Config::width`]), spread round-robin over the
//!    upstreams, each a future that takes a keep-alive connection from the
//!    core's pool for its upstream (`upstream.rs`), or connects under
//!    [`Config::connect_timeout`] (with a TLS handshake inside it when
//!    [`Config::upstream_tls`] is set), and runs one exchange. The pool,
//!    the connect, the exchange and its response parser are the
//!    [`client`](crate::client)'s.
//! 3. The branches run concurrently inside the request's own task, joined
//!    by a small hand-written join (`join.rs`) under the [`Policy`] and the
//!    request's [`Config::deadline`]. When the policy is met, or can no
//!    longer be met, the branches still running are dropped: their I/O is
//!    cancelled safely (the driver keeps buffers until the kernel is done)
//!    and their connections are closed, never returned to the pool with a
//!    half-read response. But a branch cut off by a met policy (`first`,
//!    `quorum:K`) after its sub-request was sent hands its connection, with
//!    what it read of the response, to the core's drain (`drain.rs`),
//!    which reads the rest, until the request's deadline at most, and
//!    pools the connection if the response ended cleanly and allows
//!    reuse.
//! 4. A met policy answers 200 with a JSON array (`combine.rs`); otherwise
//!    502 (refused, reset, garbage, truncated, over a limit) or 504 (the
//!    deadline or the connect timeout passed), with a plain-text body naming
//!    each failed upstream and why (for a connect or I/O error, the OS's
//!    reason and error number).
//!
//! # HTTP/2 upstreams
//!
//! With the feature `h2` and [`Config::upstream_http2`], the branches
//! speak HTTP/2 to the upstreams (`branch_h2.rs`): with prior knowledge
//! in clear text, by ALPN `h2` over TLS. Each upstream gets one
//! connection per core, the client's (`client::h2`), which carries all
//! the core's branches to it at once within the upstream's limit on
//! streams. A sub-request goes as a stream, put in HTTP/2's form from the
//! same bytes (its connection fields dropped, `Host` as `:authority`),
//! and its response is read whole into the branch's buffer; the
//! combined answer is the same. A branch cut off resets its stream, so
//! the drain has nothing to do; a sub-request the upstream did not take
//! (past a GOAWAY's last stream, or refused) is sent once more. The
//! mirror and upgraded connections still speak HTTP/1.1.
//!
//! # Upgrades
//!
//! With [`Config::width`] 1 a request that asks to switch protocols (a
//! WebSocket handshake) goes to one upstream, and once it answers 101 the
//! proxy relays the connection both ways, byte for byte, until each side
//! ends (`tunnel.rs`). A wider fan-out cannot join upgrades: it fans
//! such a request out as any other, without its hop-by-hop `Upgrade`.
//!
//! # Retries
//!
//! A branch is retried at most once, and only for idempotent methods
//! (RFC 9110 §9.2.2: GET, HEAD, OPTIONS, TRACE, PUT, DELETE):
//!
//! - on a *reused* pooled connection that failed before any byte of the
//!   response arrived (the upstream closed it as we reused it),
//!   the branch retries on a fresh connection to the same upstream;
//! - when connecting fails (nothing was sent) and there is
//!   another upstream, the branch retries on the next upstream in the ring.
//!
//! A POST (or any non-idempotent method) is never retried: once sent, the
//! upstream may have acted on it.
//!
//! # Outlier ejection and the pending-request breaker
//!
//! Each core keeps its own view of each upstream's health (no sharing, so
//! two cores may disagree for a while). A 5xx answer, a failed connect, a
//! broken exchange or no answer by the request's deadline is a failure;
//! any other answer is a success and resets the count. Failures count per request: one request adds at most one to
//! an upstream's run, however many of its branches went there, so a wide
//! request cannot eject an upstream alone. After
//! [`EjectionConfig::consecutive_failures`] failed requests in a row
//! (default 5) the upstream is *ejected*: the round-robin skips it, and
//! so does the connect retry, for [`EjectionConfig::base_time`] × n
//! (default 30 s; n-th ejection since its last success, at most
//! [`EjectionConfig::max_time`], default 300 s). At most
//! [`EjectionConfig::max_percent`] of the upstreams (default 10 %, but
//! always at least one) are ejected at once; past that, failing upstreams
//! stay in. When every upstream is ejected the request is answered 503 at
//! once, naming each upstream and when it returns. Branches
//! cancelled because the policy was decided without them are not counted
//! either way, nor is what the drain reads from them. A 5xx
//! answer is still passed on to the client in the combined body.
//!
//! At most [`Config::max_pending`] fan-outs (default 1024) are in flight
//! per core; a request beyond that is answered 503 before its body is
//! read, never queued. [`ProxyStats`] counts ejections, 503s
//! for all-ejected and breaker rejections.
//!
//! # Loops
//!
//! Every sub-request's `Via` ends in the proxy's own element, `1.1 NAME`,
//! with NAME its [`Config::pseudonym`] (RFC 9110 §7.6.3 allows a
//! pseudonym in place of a host name; by default `percore-` and 16 random
//! hex digits, one per [`Config`] and shared by its clones). A request
//! whose `Via` already lists NAME has passed through this proxy: fanning
//! it out would send it round again (a proxy that is its own upstream, or
//! one reached again through others, would otherwise multiply each request
//! until the deadline). It is answered 508 Loop Detected at once, before
//! the breaker and without reading its body, logged at WARN (at most one
//! line a second per core) and counted in [`ProxyStats::loops`]. A chain
//! of distinct proxies, each with its own name, is not a loop.
//!
//! # Mirroring
//!
//! With [`Config::mirror`] set, a copy of every fanned-out request also goes
//! to a shadow upstream, queued for a few worker tasks per core
//! so that the client's answer, and its next request on the connection,
//! never wait for the shadow; the shadow's answers are discarded and its
//! failures only counted and logged. At most [`Config::mirror_max_pending`]
//! copies are pending per core; more are dropped and counted.
//!
//! # Logging
//!
//! A failed sub-request (connect failure or timeout, reset, a bad or
//! truncated answer, no answer by the deadline) and a failed mirror copy
//! log a WARN naming the upstream and the reason, the OS's own for a
//! connect or I/O error; running out of file descriptors says to raise
//! `ulimit -n`. So does an upstream whose branches were all cancelled
//! before it answered in 100 requests in a row (more when a request's
//! branches spread over more than two upstreams), and every as many more
//! (under `first` or `quorum:K` a hung upstream fails no request). Each core
//! writes at most one such line a second; the next says how many it left
//! out (`warn.rs`). An ejection always logs a WARN,
//! and the upstream's first good answer after it an INFO line (`upstream
//! ADDR answers again after N ejections in a row`), and the [`ProxyStats`] totals are logged when the proxy stops. Meanwhile
//! [`FanOut::stats_reader`] reads them from any thread, at no cost to the
//! core (the `fanout` example prints them every second with `--stats`).
//!
//! # Stopping
//!
//! At a graceful stop a fan-out in progress goes on, up to shortly before
//! the server's drain deadline; one still waiting on its upstreams then is
//! cut off by the HTTP layer, which answers the client 503 (the server is
//! stopping) rather than let the drain close the connection without an
//! answer (see [`Service`](crate::http::Service)). Its branches are
//! cancelled like any others, and it counts as [`ProxyStats::stopped`].
//! The drain closes the connections it was reading on as the stop begins
//! (no request will take them from the pool).
//!
//! # Memory
//!
//! Per-request scratch comes from per-core free lists: request and response
//! bytes live in reused `Vec<u8>`s (`scratch.rs`) and the branch
//! futures live in a [`bumpalo`] arena that is reset and reused after each
//! request (`scratch.rs`). In steady state a request allocates
//! nothing, nor does a branch cut off (the drain's workers, each a task
//! reading one response, are reused); a branch cancelled while sending
//! gives its buffer to the driver (which frees it at the completion), so
//! only that and failures allocate. A burst (many requests at once, or
//! upstream bodies near [`Config::max_response_body`]) grows the free
//! lists; when the core gives memory back after it (see
//! [`percore::on_give_back`]), they are emptied, and the requests after
//! that allocate until the lists are warm again. A branch holds at most
//! its response's head and [`Config::max_response_body`] (the buffer's
//! capacity may double past it once, as the read that crosses the limit
//! arrives), so a core's peak is bounded by [`Config::max_pending`] ×
//! [`Config::width`] of them.
//!
//! # Examples
//!
//! ```no_run
//! use percore_handlers::http::HttpHandler;
//! use percore_handlers::proxy::{Config, FanOut, Policy};
//!
//! let mut config = Config::new(vec!["127.0.0.1:8080".parse::<std::net::SocketAddr>().unwrap()]);
//! config.width = 4;
//! config.policy = Policy::Quorum(2);
//! config.validate().unwrap();
//! percore::Server::builder()
//!     .address("127.0.0.1:8081".parse().unwrap())
//!     .serve(move |_core| HttpHandler::new(FanOut::new(config.clone()).unwrap()))
//!     .unwrap();
//! ```

mod branch;
#[cfg(feature = "h2")]
mod branch_h2;
mod combine;
mod config;
mod drain;
mod join;
mod mirror;
mod refuse;
mod scratch;
mod service;
mod stats;
mod subrequest;
mod target;
mod tunnel;
mod upstream;
mod via;
mod warn;

pub use config::{Config, ConfigError, EjectionConfig, Policy, PoolConfig, UpstreamTls};
pub use service::FanOut;
pub use stats::{ProxyStats, ProxyStatsReader};

#[cfg(test)]
mod tests;
