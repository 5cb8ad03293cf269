//! hyper services on percore connections.
//!
//! Needs the `hyper` feature.
//!
//! hyper 1.x leaves its runtime to the program through a few traits; this
//! module implements them over percore: [`Io`] (hyper's `Read` and
//! `Write` over a percore stream), [`Exec`] (spawns on the core) and
//! [`Timer`] (the core's timers). With them, [`serve`] runs hyper's
//! server on a handler's connection, HTTP/1.1 or HTTP/2 as the client
//! speaks (HTTP/2 over TLS when ALPN chose `h2`, and in clear text with
//! prior knowledge: a connection that starts with HTTP/2's preface), and
//! [`HyperHandler`] is a [`Handler`] that serves a tower service, an axum
//! `Router` or a tonic gRPC service among them:
//!
//! ```no_run
//! use axum::{routing::get, Router};
//! use percore_tokio::hyper::HyperHandler;
//!
//! fn main() -> std::io::Result<()> {
//!     percore::Server::builder()
//!         .address("127.0.0.1:8080".parse().unwrap())
//!         // Runs on each core's thread: each core builds its own router.
//!         .serve(|_core| HyperHandler::new(Router::new().route("/", get(|| async { "hi" }))))
//! }
//! ```
//!
//! The connection is polled inside [`Compat`], so the service may await
//! tokio-based clients and tokio's timers. At the server's stop each
//! connection finishes the request it is serving, then closes (hyper's
//! `graceful_shutdown`).
//!
//! axum wants its handlers' futures and its state `Send` and `Sync`,
//! although here they never leave the core: state that lives on a core
//! goes in an `Arc` (made per core by the server's factory, so it is never
//! shared between cores and its atomics are never contended), and an `Rc`
//! or a `RefCell` cannot be held across an `.await` in an axum handler.
//! percore's own I/O types are `!Send`, so an axum handler cannot use
//! them (an upgraded connection, axum's `WebSocketUpgrade`, reaches its
//! route through a pipe: [`HyperHandler::with_upgrades`]); a tokio-based client works, through the runtime [`Compat`]
//! enters. A service that needs `!Send` state uses hyper directly
//! ([`serve`] takes any hyper `Service`, `Send` or not) or
//! percore-handlers' HTTP layer.

mod grpc_timeout;
mod io;
mod rt;
mod upgrades;

use std::error::Error as StdError;
use std::future::poll_fn;
use std::future::Future;
use std::pin::pin;

use http_body::Body;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use percore::{Connection, Handler};

pub use grpc_timeout::{Deadline, GrpcTimeout};
pub use io::Io;
pub use rt::{Exec, Timer};
pub use upgrades::serve_with_upgrades;

use crate::Compat;

type BoxError = Box<dyn StdError + Send + Sync>;

/// hyper's server builder for both protocols, spawning HTTP/2 streams
/// on the core ([`Exec`]) and timing with the core's timers ([`Timer`]),
/// as hyper's header-read deadline (30 s by default) and HTTP/2
/// keep-alive need. Narrow it with `http1_only()` or `http2_only()`, tune
/// each with `http1()` and `http2()`.
///
/// HTTP/2 offers extended CONNECT (RFC 8441,
/// `SETTINGS_ENABLE_CONNECT_PROTOCOL`), so that axum's
/// `WebSocketUpgrade` (axum's feature `http2`, on a route that accepts
/// `CONNECT`, say `any`) accepts WebSockets opened as HTTP/2 streams.
///
/// Needs the `hyper` feature.
pub fn builder() -> auto::Builder<Exec> {
    let mut builder = auto::Builder::new(Exec);
    builder.http1().timer(Timer);
    builder.http2().timer(Timer).enable_connect_protocol();
    builder
}

/// Serves HTTP/1.1 or HTTP/2 on `conn` (as the client's first bytes say)
/// with `service` until the client closes, an error ends the connection,
/// or the server stops (then after the requests being served). `builder`
/// is usually [`builder`]'s.
///
/// Needs the `hyper` feature.
///
/// # Errors
///
/// hyper's error, as an `io::Error`, unless it only says that the client
/// went away (closed mid-request, or reset).
pub async fn serve<S, B>(
    conn: Connection,
    builder: &auto::Builder<Exec>,
    service: S,
) -> std::io::Result<()>
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + 'static,
    S::Future: 'static,
    S::Error: Into<BoxError>,
    B: Body + 'static,
    B::Error: Into<BoxError>,
{
    let conn = builder.serve_connection(Io::new(conn), service);
    let mut conn = pin!(Compat::new(conn));
    let mut stop = pin!(percore::shutdown_signal());
    let mut stopping = false;
    let res = poll_fn(|cx| {
        if !stopping && stop.as_mut().poll(cx).is_ready() {
            stopping = true;
            conn.as_mut().get_pin_mut().graceful_shutdown();
        }
        conn.as_mut().poll(cx)
    })
    .await;
    match res {
        Ok(()) => Ok(()),
        Err(e) if client_left(&*e) => Ok(()),
        Err(e) => Err(std::io::Error::other(e)),
    }
}

/// Whether `e` only says that the client went away.
fn client_left(e: &(dyn StdError + 'static)) -> bool {
    if let Some(e) = e.downcast_ref::<hyper::Error>() {
        if e.is_incomplete_message() || e.is_canceled() {
            return true;
        }
    }
    let mut source = Some(e);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            );
        }
        source = cause.source();
    }
    false
}

/// A [`Handler`] that serves HTTP/1.1 and HTTP/2 with a tower service,
/// cloned per connection: an axum `Router`, a tonic service, or any
/// `Service` of hyper requests.
///
/// Needs the `hyper` feature.
#[derive(Debug)]
pub struct HyperHandler<S> {
    service: S,
    builder: auto::Builder<Exec>,
    upgrades: bool,
}

impl<S> HyperHandler<S> {
    /// Serves `service` with [`builder`]'s settings.
    pub fn new(service: S) -> Self {
        HyperHandler {
            service,
            builder: builder(),
            upgrades: false,
        }
    }

    /// Serves with upgrades ([`serve_with_upgrades`]), for axum's
    /// `WebSocketUpgrade`: each connection's bytes then go through a pipe,
    /// one more copy each way (see [`serve_with_upgrades`] for why).
    pub fn with_upgrades(mut self) -> Self {
        self.upgrades = true;
        self
    }

    /// hyper's settings for the connections (protocols, keep-alive,
    /// limits, deadlines).
    pub fn builder_mut(&mut self) -> &mut auto::Builder<Exec> {
        &mut self.builder
    }
}

impl<S, B> Handler for HyperHandler<S>
where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>> + Clone + 'static,
    S::Future: 'static,
    S::Error: Into<BoxError>,
    B: Body + 'static,
    B::Error: Into<BoxError>,
{
    fn serve(&self, conn: Connection) -> impl Future<Output = std::io::Result<()>> {
        let service = TowerToHyperService::new(self.service.clone());
        let upgrades = self.upgrades;
        async move {
            if upgrades {
                serve_with_upgrades(conn, &self.builder, service).await
            } else {
                serve(conn, &self.builder, service).await
            }
        }
    }
}
