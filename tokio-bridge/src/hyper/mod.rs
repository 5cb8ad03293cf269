//! hyper services on percore connections.
//!
//! Needs the `hyper` feature.
//!
//! hyper 1.x leaves its runtime to the program through a few traits; this
//! module implements them over percore: [`Io`] (hyper's `Read` and
//! `Write` over a percore stream), [`Exec`] (spawns on the core) and
//! [`Timer`] (the core's timers). With them, [`serve`] runs hyper's
//! HTTP/1 server on a handler's connection, and [`HyperHandler`] is a
//! [`Handler`] that serves a tower service, an axum `Router` among them:
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
//! them; a tokio-based client works, through the runtime [`Compat`]
//! enters. A service that needs `!Send` state uses hyper directly
//! ([`serve`] takes any hyper `Service`, `Send` or not) or
//! percore-handlers' HTTP layer.

mod io;
mod rt;

use std::error::Error as StdError;
use std::future::poll_fn;
use std::future::Future;
use std::pin::pin;

use http_body::Body;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::{Request, Response};
use hyper_util::service::TowerToHyperService;
use percore::{Connection, Handler};

pub use io::Io;
pub use rt::{Exec, Timer};

use crate::Compat;

type BoxError = Box<dyn StdError + Send + Sync>;

/// An HTTP/1 server builder whose timer is the core's ([`Timer`]), as
/// hyper's header-read deadline (30 s by default) needs one.
///
/// Needs the `hyper` feature.
pub fn http1_builder() -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder.timer(Timer);
    builder
}

/// Serves HTTP/1 on `conn` with `service` until the client closes, an
/// error ends the connection, or the server stops (then after the request
/// being served). `builder` is usually [`http1_builder`]'s.
///
/// Needs the `hyper` feature.
///
/// # Errors
///
/// hyper's error, as an `io::Error`, unless it only says that the client
/// went away (closed mid-request, or reset).
pub async fn serve<S, B>(
    conn: Connection,
    builder: &http1::Builder,
    service: S,
) -> std::io::Result<()>
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>>,
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
        Err(e) if client_left(&e) => Ok(()),
        Err(e) => Err(std::io::Error::other(e)),
    }
}

/// Whether `e` only says that the client went away.
fn client_left(e: &hyper::Error) -> bool {
    if e.is_incomplete_message() || e.is_canceled() {
        return true;
    }
    let mut source = e.source();
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

/// A [`Handler`] that serves HTTP/1 with a tower service, cloned per
/// connection: an axum `Router`, or any `Service` of hyper requests.
///
/// Needs the `hyper` feature.
#[derive(Debug)]
pub struct HyperHandler<S> {
    service: S,
    builder: http1::Builder,
}

impl<S> HyperHandler<S> {
    /// Serves `service` with [`http1_builder`]'s settings.
    pub fn new(service: S) -> Self {
        HyperHandler {
            service,
            builder: http1_builder(),
        }
    }

    /// hyper's settings for the connections (keep-alive, limits,
    /// deadlines).
    pub fn builder_mut(&mut self) -> &mut http1::Builder {
        &mut self.builder
    }
}

impl<S, B> Handler for HyperHandler<S>
where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>> + Clone + 'static,
    S::Error: Into<BoxError>,
    B: Body + 'static,
    B::Error: Into<BoxError>,
{
    fn serve(&self, conn: Connection) -> impl Future<Output = std::io::Result<()>> {
        let service = TowerToHyperService::new(self.service.clone());
        serve(conn, &self.builder, service)
    }
}
