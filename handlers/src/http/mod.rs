//! HTTP/1.1 for percore: a server layer that runs a [`Service`] on percore
//! connections, on top of a pure protocol core that parses and frames.
//!
//! # Writing an HTTP service
//!
//! Most applications route: a [`Router`] maps methods and path patterns
//! to async functions, with typed parameters, and is a [`Service`]
//! (see [`router`]). A route returns [`Result`], so that `?` takes any
//! error (see [`Error`]). The rest of this page is what every service
//! gets.
//!
//! Implement [`Service`]: look at the [`Request`], fill in the
//! [`Response`]. Wrap it in an [`HttpHandler`] (one per core, made by the
//! server's factory) and serve it. The service never touches framing:
//! parsing, body decoding, keep-alive, pipelining, `Expect`, `HEAD`,
//! limits, timeouts and error answers are the server's.
//!
//! ```no_run
//! use std::cell::Cell;
//! use std::io;
//!
//! use percore::{Backend, Server};
//! use percore_handlers::http::{Config, HttpHandler, Request, Response, Service};
//!
//! /// Counts requests per core (no locks: one value per core).
//! struct Counter {
//!     seen: Cell<u64>,
//! }
//!
//! impl Service for Counter {
//!     async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
//!         self.seen.set(self.seen.get() + 1);
//!         match (req.method(), req.path()) {
//!             ("GET", "/count") => {
//!                 res.header("Content-Type", b"text/plain")?;
//!                 // Formats into the connection's reused body buffer.
//!                 use std::io::Write;
//!                 writeln!(res.body_mut(), "{}", self.seen.get())?;
//!             }
//!             ("POST", "/upload") => {
//!                 // The whole body (up to `Limits::max_body`, else 413),
//!                 // borrowed in place when it arrived with the head.
//!                 let body = req.body().await?;
//!                 let size = body.len().to_string();
//!                 res.send(201, Some(b"text/plain"), size.as_bytes())?;
//!             }
//!             _ => res.send(404, Some(b"text/plain"), b"not found\n")?,
//!         }
//!         Ok(())
//!     }
//! }
//!
//! fn main() -> io::Result<()> {
//!     let mut config = Config::default();
//!     config.idle_timeout = std::time::Duration::from_secs(10);
//!     Server::builder()
//!         .address("127.0.0.1:8080".parse().expect("a socket address"))
//!         .backend(Backend::Auto)
//!         .serve(move |_core| {
//!             HttpHandler::with_config(Counter { seen: Cell::new(0) }, config)
//!         })
//! }
//! ```
//!
//! [`HttpEcho`] is the service behind the `http_echo` example, and the
//! fan-out proxy is another.
//!
//! # What the server layer does
//!
//! - **Keep-alive** for HTTP/1.1 unless `Connection: close`; HTTP/1.0 only
//!   with `Connection: keep-alive` (answered with the same). A connection
//!   serves at most [`Config::max_requests`] (1000) requests and lives at
//!   most [`Config::max_age`] (1 h): the last response says
//!   `Connection: close`.
//! - **Pipelining**: every complete request of one read is answered, in
//!   order, and the answers go out in one send. The output is also sent
//!   before the server waits for a request body, so a client is never left
//!   waiting for an answer the server already made.
//! - **Moving to another core**: when the server moves connections
//!   ([`ServerBuilder::move_connections`](percore::ServerBuilder::move_connections))
//!   and its core is ordered to move one, a kept-alive HTTP/1.1
//!   connection moves after a read's answers are written, with the
//!   requests pipelined behind them, its count of requests and its age;
//!   the other core goes on serving it. HTTP/2 and upgraded connections
//!   stay.
//! - **Bodies**: `Content-Length` and chunked (extensions and trailers
//!   accepted and dropped), read only when the service asks
//!   ([`Request::body`] collects, [`Request::chunk`] streams). A body the
//!   service leaves unread is read and discarded once the service has
//!   returned, within the body limit and deadline, so the next request is
//!   found. What had come by then decides first (a body over the limit,
//!   or malformed, turns the answer into a 413 or a 400); if more is to
//!   come, the answer goes out at once, as nginx does, while the rest is
//!   read and dropped (a client that reads only once it has sent its
//!   whole request still gets an answer larger than the socket buffers):
//!   a client still uploading gets its 401 or 404 without finishing. (Go's
//!   `net/http` reads up to 256 KiB of such a body before it answers, and
//!   closes if more is left.) If that rest then goes over
//!   the limit, stops coming (the body timeout) or the server stops, the
//!   connection is closed, the answer standing.
//! - **`Expect: 100-continue`**: `100 Continue` goes out only when the
//!   service asks for a body that has not arrived. If it answers without
//!   reading it, the response carries `Connection: close` (RFC 9110
//!   §10.1.1): the client may or may not send the body now. Nor does it
//!   go out after a head that [`Response::flush`] sent (an interim answer
//!   cannot follow the final one): the client sends the body on seeing
//!   that head, or after its own wait.
//! - **Responses**: [`Response`] gathers status, headers and body in
//!   reused buffers; the server adds `Date` (cached per core, refreshed at
//!   most once a second), `Content-Length` and `Connection`. `HEAD` and
//!   204/304 get no body bytes, whatever the service wrote.
//!   [`Response::flush`] streams a long body (chunked; until the close for
//!   HTTP/1.0).
//! - **Errors**: every error answer carries `Connection: close` (but a
//!   service's own 4xx [`HttpError`] after a request read to its end,
//!   which keeps the connection, see [`Service`]); then the
//!   server shuts down its write side and keeps reading (and dropping)
//!   input for up to [`Config::linger_timeout`], so the client's unread
//!   bytes do not turn the close into a reset that destroys the answer.
//!   After a framing error nothing more on the connection is read as a
//!   request: no guessing, no smuggling.
//! - **Trickled heads**: a head that spans reads is parsed again only when
//!   the new bytes may end it (an empty line), when it has doubled since the
//!   last attempt, or when it outgrew the limits. Parsing from the start on
//!   every read would make a head sent a byte per packet cost work
//!   quadratic in its length; this keeps it linear. A malformed byte in an
//!   unfinished line may thus be answered a little later (at the latest by
//!   the head timeout), never accepted.
//! - **Timeouts**, each a total deadline for its phase (a per-read timer
//!   never fires on a client that trickles a byte a second):
//!   [`Config::head_timeout`] (10 s; 408 once a byte of the request
//!   arrived, a silent close for a connection that sent nothing),
//!   [`Config::body_timeout`] (30 s; 408), [`Config::idle_timeout`] between
//!   requests (30 s; silent close, no 408), [`Config::write_timeout`]
//!   (30 s without progress, so a slow reader still gets a large answer;
//!   the connection is then reset, which frees the output the kernel
//!   still held for a client that does not read).
//! - **Stopping**: when the server begins its graceful stop, a connection
//!   waiting between requests is kept for [`Config::stop_grace`] (1 s) in
//!   case a request crossed the stop, which is answered with
//!   `Connection: close`, and is closed if none comes (a request head
//!   still arriving shortly before the drain deadline is answered 408);
//!   one lingering after its last answer (see **Errors**) lingers at most
//!   500 ms more; a request in progress is finished and answered with
//!   `Connection: close`. One whose service
//!   is still running shortly before the drain deadline
//!   ([`percore::ServerBuilder::drain_timeout`]; a tenth of the drain
//!   before it, at most 500 ms) is not left to be cancelled with its
//!   connection, which would close without a word: the service's future is
//!   dropped and the client gets `503 Service Unavailable: the server is
//!   stopping`, with `Connection: close`.
//! - **Statuses**: 400 malformed, 408 timeout, 413 body too large, 414
//!   request line too long, 417 unknown expectation, 431 header section
//!   or trailers too large, 500 service error (or the status of an
//!   [`HttpError`] it returned), 501 unknown transfer coding, 503 a
//!   service still running at the end of a stop, 505 unsupported major
//!   version (`HTTP/2.0` in an HTTP/1 request line; a higher minor
//!   version such as `HTTP/1.2` is served as HTTP/1.1, as RFC 9110 §6.2
//!   asks). See [`Limits`] for the sizes.
//!
//! # Memory and allocation
//!
//! A request head is parsed where it was received and borrowed by the
//! [`Request`]: the common request, complete in one read, is never copied,
//! and an idle connection holds no receive buffer. Only a head that spans
//! reads is copied into a per-connection buffer (bounded by the head
//! limits, enforced on partial input too). The body, output and response
//! buffers are per-connection `Vec`s that keep their capacity (up to 64
//! KiB; larger ones are freed after use), so once warm a connection serves
//! requests with no heap allocation at all, on both backends (counted by
//! `tests/alloc/http_alloc.rs`).
//!
//! # HTTP/2
//!
//! With the feature `h2`, the [`HttpHandler`] also speaks HTTP/2
//! (`percore-http2`'s frames and HPACK, with its request checks and its
//! rapid-reset and CONTINUATION-flood limits), serving the same
//! [`Service`] unchanged: a clear-text
//! connection that begins with the HTTP/2 preface (prior knowledge,
//! `curl --http2-prior-knowledge`), and a TLS connection whose ALPN chose
//! `h2`, which a listener offers only when asked to
//! (`percore::tls::ServerTls::alpn`). A request's
//! [`version`](Request::version) is then 2; its streams are served
//! concurrently on the connection's core. See `docs/http.md` for the
//! limits and what HTTP/2 does not have yet.
//!
//! # The protocol core
//!
//! The parsing and framing underneath are [`proto`]: plain functions with
//! no I/O, public for those who want the protocol pieces without the
//! server.

mod body_reader;
mod config;
mod conn;
mod date;
mod echo;
mod error;
mod failure;
#[cfg(feature = "h2")]
mod h2;
/// The HTTP/2 connections' I/O, which the client's share.
#[cfg(feature = "h2")]
pub(crate) use h2::io::Io as H2Io;
mod handler;
#[cfg(feature = "http")]
mod interop;
#[cfg(feature = "json")]
mod json;
mod layer;
pub mod proto;
mod query;
mod request;
mod response;
pub mod router;
mod service;
mod stats;
pub(crate) mod tunnel;
mod upgrade;
mod wire;

pub use config::{Config, H2Limits};
pub use echo::{HttpEcho, HELLO};
pub use error::{Error, Result, RouteResult};
pub use handler::HttpHandler;
#[cfg(feature = "json")]
pub use json::JSON_TYPE;
pub use proto::{Header, HttpError, Limits, RequestHead};
pub use request::Request;
pub use response::Response;
pub use router::{RouteError, Routed, Router, Routes};
pub use service::Service;
pub use stats::{HttpStats, HttpStatsReader};
pub use upgrade::{Chunk, Upgraded};
