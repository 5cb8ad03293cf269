//! [`Router`]: requests to async handlers by method and path pattern, with
//! typed path parameters, as a [`Service`].
//!
//! ```no_run
//! use std::cell::Cell;
//!
//! use percore_handlers::http::{self, HttpError, HttpHandler, Response, Routed, Router};
//!
//! /// Per-core state: one value per core, so `Cell`s need no locks.
//! #[derive(Default)]
//! struct App {
//!     hits: Cell<u64>,
//! }
//!
//! async fn user(app: &App, req: &mut Routed<'_, '_>, res: &mut Response<'_>) -> http::Result {
//!     app.hits.set(app.hits.get() + 1);
//!     let id: u64 = req.param("id")?; // `/users/x` is a 400 naming `id`
//!     if id == 0 {
//!         return Err(HttpError::new(404, format!("no user {id}")).into());
//!     }
//!     res.send(200, Some(b"text/plain"), format!("user {id}\n").as_bytes())?;
//!     Ok(())
//! }
//!
//! async fn upload(_: &App, req: &mut Routed<'_, '_>, res: &mut Response<'_>) -> http::Result {
//!     let mut total = 0;
//!     while let Some(piece) = req.chunk().await? {
//!         total += piece.len();
//!     }
//!     res.send(201, Some(b"text/plain"), format!("{total}\n").as_bytes())?;
//!     Ok(())
//! }
//!
//! fn main() -> Result<(), percore::MainError> {
//!     percore::Server::builder()
//!         .address("127.0.0.1:8080".parse()?)
//!         .serve(|_core| {
//!             let routes = Router::new(App::default())
//!                 .get("/users/{id}", user)
//!                 // Streams up to 1 GiB; every other route keeps 1 MiB.
//!                 .post("/upload", upload)
//!                 .body_limit(1 << 30)
//!                 .build()
//!                 .expect("routes without conflicts");
//!             HttpHandler::new(routes)
//!         })?;
//!     Ok(())
//! }
//! ```
//!
//! # Errors
//!
//! A handler returns [`http::Result`](super::Result): `?` takes any
//! error type that implements [`std::error::Error`] (I/O, `serde_json`,
//! `tokio_postgres` through `percore-tokio`, your own), with no
//! `map_err`. An [`HttpError`] (from [`Routed::param`], or made with
//! [`HttpError::new`] and `.into()`) is answered with its status and its
//! reason as the body: the reason is for the client. Any other error is
//! answered with a bare `500 Internal Server Error`: its message and
//! causes are for the log alone, at WARN with the request's method and
//! target (`service failed ... error=cannot read notes.txt: No such file
//! or directory`). A 4xx is logged at debug: the client's doing. A
//! handler may return `io::Result<()>` too; it is answered the same way.
//!
//! # Closures
//!
//! A handler may be an async closure. Write it `async |state, req, res|
//! -> http::Result { .. }`: the parameters' types come from the router,
//! the result's must be said (the body's `?` could convert into many):
//!
//! ```
//! use percore_handlers::http::{self, Router};
//!
//! let routes = Router::new(7u64)
//!     .get("/seven", async |n, _, res| -> http::Result {
//!         res.send(200, None, n.to_string().as_bytes())?;
//!         Ok(())
//!     })
//!     .build()
//!     .unwrap();
//! # drop(routes);
//! ```
//!
//! The older form, a closure that returns an `async move` block, does not
//! compile: the block would borrow the request and the response beyond
//! the closure's call. Rust then says `type annotations needed` or
//! `lifetime may not live long enough`; write `async |..|` instead.
//!
//! ```compile_fail
//! use percore_handlers::http::{self, Router};
//!
//! let routes = Router::new(7u64)
//!     .get("/seven", |n, _, res| async move {
//!         res.send(200, None, n.to_string().as_bytes())?;
//!         Ok::<(), http::Error>(())
//!     })
//!     .build();
//! ```
//!
//! # Matching
//!
//! Patterns are matched by [`matchit`]'s radix tree against the path as
//! sent (not percent-decoded; the query is not part of it):
//!
//! - `/users/{id}` matches `/users/7`, and `{id}` is one whole segment;
//!   `/files/{*rest}` matches everything below `/files/` (not `/files`
//!   itself), `rest` taking the remaining path, slashes included.
//! - A static segment wins over a parameter: `/users/me` and
//!   `/users/{id}` may both be routes.
//! - `/users` and `/users/` are different paths: neither answers for the
//!   other (add both if both should work).
//! - Parameters are percent-decoded when read ([`Routed::param`]):
//!   `/users/a%20b` gives `a b`; static segments are compared as sent.
//!
//! # Answers the router gives itself
//!
//! - `HEAD` is served by the path's `GET` route (unless it has its own);
//!   the server sends the head alone.
//! - An HTTP/2 extended CONNECT (RFC 8441, a WebSocket over HTTP/2) is
//!   served by the path's `GET` route (unless it has a `CONNECT` one), so
//!   the route that accepts a WebSocket's HTTP/1.1 upgrade accepts it too.
//!   A plain `CONNECT` has an authority for its target, no path: 404.
//! - A path that exists with other methods: `405 Method Not Allowed` with
//!   `Allow` (`GET, HEAD, POST`); `OPTIONS` on it: `204` with `Allow`.
//! - Any other path: `404 Not Found`.
//!
//! Their bodies, like every error answer's, come from the router's
//! [`error_body`](Router::error_body) (the server's one line of text by
//! default, a JSON object for an API that says so), given an
//! [`HttpError`] whose reason is the status's phrase (`Not Found`). A
//! handler's error becomes an answer as a [`Service`]'s does: an
//! [`HttpError`] its status and reason, any other error a 500 (see
//! [Errors](self#errors)).
//!
//! # Request bodies
//!
//! A body is read only when the handler asks, within the handler's
//! [`Config`](super::Config) limit (1 MiB by default) unless the route
//! declares its own with [`body_limit`](Router::body_limit). A route that
//! takes large bodies must declare it: over the limit the client gets 413,
//! and a route that streams its answer as it reads (one that
//! [`flush`](super::Response::flush)es before the body's end) cannot
//! turn a sent 200 into a 413 anymore: the response ends incomplete, and
//! the connection is closed.
//!
//! # Cost
//!
//! Routing allocates nothing: the handlers are a chain of types, one per
//! route, and the chosen handler's future lives inline in the connection's
//! (its size, like a [`Service`]'s, is part of every connection's memory:
//! box a handler that keeps a large value across an `.await`). Up to
//! three parameters are kept without allocating.
//!
//! # Tracing
//!
//! With [`trace`](Router::trace) on, each request runs in an INFO span
//! `request` with `method` and `route`, and `status` and `micros`
//! (the handler's time) recorded when it ends; a subscriber that logs
//! span closes (`tracing_subscriber::fmt().with_span_events(FmtSpan::CLOSE)`)
//! prints one line per request. Off, it costs nothing; on with no
//! subscriber listening, about 60 user-space instructions per request
//! (against 4,600 for a routed request in all, on epoll); a
//! `tracing_subscriber::fmt` subscriber that formats every close, about
//! 32,000 (`routed_echo --trace` in `benches/`).

mod chain;
mod routed;
mod table;

use std::io;
use std::time::Instant;

use percore::runtime::labeled;
use tracing::Instrument;

pub use chain::{Chain, End, Link, RouteFn};
pub use routed::Routed;
pub use table::RouteError;
use table::{Lookup, Table};

use super::proto::{error_text, reason_phrase, ERROR_TEXT_TYPE};
use super::{HttpError, Request, RequestHead, Response, RouteResult, Service};

/// Writes an error answer's body and returns its content type (see
/// [`Service::error_body`]).
pub type ErrorBody = fn(&HttpError, &mut Vec<u8>) -> &'static str;

fn text_error_body(error: &HttpError, body: &mut Vec<u8>) -> &'static str {
    error_text(error, body);
    ERROR_TEXT_TYPE
}

/// Builds a routing table: method and path pattern to an async handler
/// taking the router's state `S` (one per core), the [`Routed`] request
/// and the [`Response`], and returning [`http::Result`](super::Result)
/// or `io::Result<()>`. [`build`](Self::build) checks the table and
/// returns the [`Routes`] to serve. See the [module docs](self).
#[must_use = "a router serves nothing until it is built and served"]
pub struct Router<S, R = End> {
    state: S,
    table: Table,
    chain: R,
    prefix: String,
    error: Option<RouteError>,
    error_body: ErrorBody,
    trace: bool,
}

impl<S: 'static> Router<S> {
    /// An empty router around the per-core `state` every handler gets.
    pub fn new(state: S) -> Self {
        Self {
            state,
            table: Table::default(),
            chain: End,
            prefix: String::new(),
            error: None,
            error_body: text_error_body,
            trace: false,
        }
    }
}

impl<S: 'static, R: Chain<S>> Router<S, R> {
    /// Routes `method` requests whose path matches `pattern` (under the
    /// prefixes of enclosing [`nest`](Self::nest)s) to `handler`.
    pub fn route<F, O>(mut self, method: &str, pattern: &str, handler: F) -> Router<S, Link<F, R>>
    where
        F: AsyncFn(&S, &mut Routed<'_, '_>, &mut Response<'_>) -> O,
        O: RouteResult,
    {
        let index = self.table.routes.len();
        if self.error.is_none() {
            let full = format!("{}{pattern}", self.prefix);
            self.error = self.table.add(method, full).err();
        }
        Router {
            state: self.state,
            table: self.table,
            chain: Link {
                index,
                handler,
                rest: self.chain,
            },
            prefix: self.prefix,
            error: self.error,
            error_body: self.error_body,
            trace: self.trace,
        }
    }

    /// A `GET` route (which answers `HEAD` too).
    pub fn get<F, O>(self, pattern: &str, handler: F) -> Router<S, Link<F, R>>
    where
        F: AsyncFn(&S, &mut Routed<'_, '_>, &mut Response<'_>) -> O,
        O: RouteResult,
    {
        self.route("GET", pattern, handler)
    }

    /// A `POST` route.
    pub fn post<F, O>(self, pattern: &str, handler: F) -> Router<S, Link<F, R>>
    where
        F: AsyncFn(&S, &mut Routed<'_, '_>, &mut Response<'_>) -> O,
        O: RouteResult,
    {
        self.route("POST", pattern, handler)
    }

    /// A `PUT` route.
    pub fn put<F, O>(self, pattern: &str, handler: F) -> Router<S, Link<F, R>>
    where
        F: AsyncFn(&S, &mut Routed<'_, '_>, &mut Response<'_>) -> O,
        O: RouteResult,
    {
        self.route("PUT", pattern, handler)
    }

    /// A `PATCH` route.
    pub fn patch<F, O>(self, pattern: &str, handler: F) -> Router<S, Link<F, R>>
    where
        F: AsyncFn(&S, &mut Routed<'_, '_>, &mut Response<'_>) -> O,
        O: RouteResult,
    {
        self.route("PATCH", pattern, handler)
    }

    /// A `DELETE` route.
    pub fn delete<F, O>(self, pattern: &str, handler: F) -> Router<S, Link<F, R>>
    where
        F: AsyncFn(&S, &mut Routed<'_, '_>, &mut Response<'_>) -> O,
        O: RouteResult,
    {
        self.route("DELETE", pattern, handler)
    }

    /// Sets the body limit of the route added last, in place of the
    /// handler's [`Limits::max_body`](super::Limits::max_body): higher for
    /// a route that takes uploads, lower for one that takes small bodies.
    /// A `Content-Length` over it is answered 413 before the handler runs;
    /// a chunked body that grows past it fails its read with 413.
    pub fn body_limit(mut self, limit: u64) -> Self {
        match self.table.routes.last_mut() {
            Some(route) => route.body_limit = Some(limit),
            None if self.error.is_none() => {
                self.error = Some(RouteError::new("body_limit", "comes after a route"));
            }
            None => {}
        }
        self
    }

    /// Adds the routes `routes` adds under `prefix` (`/api`): a route
    /// `/users` added inside is `/api/users`.
    ///
    /// ```
    /// # use std::io;
    /// # use percore_handlers::http::{Response, Routed, Router};
    /// # async fn list(_: &(), _: &mut Routed<'_, '_>, _: &mut Response<'_>) -> io::Result<()> { Ok(()) }
    /// let routes = Router::new(())
    ///     .nest("/api/v1", |api| api.get("/users", list).get("/users/{id}", list))
    ///     .build()
    ///     .unwrap();
    /// # drop(routes);
    /// ```
    pub fn nest<R2: Chain<S>>(
        mut self,
        prefix: &str,
        routes: impl FnOnce(Self) -> Router<S, R2>,
    ) -> Router<S, R2> {
        let outer = self.prefix.len();
        self.prefix.push_str(prefix.trim_end_matches('/'));
        let mut nested = routes(self);
        nested.prefix.truncate(outer);
        nested
    }

    /// Writes the body of the router's own 404, 405 and 413 answers and
    /// of every error answer of the server's (see
    /// [`Service::error_body`]), e.g. as JSON for an API.
    pub fn error_body(mut self, write: ErrorBody) -> Self {
        self.error_body = write;
        self
    }

    /// Runs each request in a tracing span (see the
    /// [module docs](self#tracing)). Off by default.
    pub fn trace(mut self, on: bool) -> Self {
        self.trace = on;
        self
    }

    /// The routes to serve.
    ///
    /// # Errors
    ///
    /// The first route that could not be added, and why: a pattern that
    /// conflicts with another (`/users/{id}` and `/users/{name}`), a
    /// method and pattern defined twice, a malformed pattern or method.
    pub fn build(self) -> Result<Routes<S, R>, RouteError> {
        match self.error {
            Some(error) => Err(error),
            None => Ok(Routes {
                state: self.state,
                table: self.table,
                chain: self.chain,
                error_body: self.error_body,
                trace: self.trace,
            }),
        }
    }
}

/// A built [`Router`]: the [`Service`] to give to an
/// [`HttpHandler`](super::HttpHandler).
pub struct Routes<S, R> {
    state: S,
    table: Table,
    chain: R,
    error_body: ErrorBody,
    trace: bool,
}

impl<S, R> Routes<S, R> {
    /// The state the handlers share.
    pub fn state(&self) -> &S {
        &self.state
    }

    /// Answers `status` with the error body, and `Allow` if given.
    fn refuse(&self, res: &mut Response<'_>, status: u16, allow: Option<&[u8]>) -> io::Result<()> {
        if let Some(allow) = allow {
            res.header("Allow", allow)?;
        }
        let mut content_type = "";
        let error = HttpError::new(status, reason_phrase(status));
        res.send_with(status, None, |body| {
            content_type = (self.error_body)(&error, body);
            Ok(())
        })?;
        res.header("Content-Type", content_type.as_bytes())?;
        Ok(())
    }
}

impl<S: 'static, R: Chain<S> + 'static> Service for Routes<S, R> {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        let method = req.method();
        let mut lookup = self.table.find(method, req.path());
        if matches!(lookup, Lookup::NotAllowed(_))
            && req.version() == 2
            && req.upgrade_protocol().is_some()
        {
            // An HTTP/2 extended CONNECT (RFC 8441) is what a `GET` with
            // `Upgrade` is on HTTP/1.1: the path's `GET` route serves it,
            // unless the path has a `CONNECT` route of its own.
            lookup = self.table.find("GET", req.path());
        }
        match lookup {
            Lookup::Found(index, params) => {
                let info = &self.table.routes[index];
                let route = &*info.pattern;
                let mut routed = Routed::new(req, route, params);
                // A stall while the handler runs names its route.
                let label = info.label;
                if !self.trace {
                    let call = self.chain.call(index, &self.state, &mut routed, res);
                    return labeled(label, call).await;
                }
                let span = tracing::info_span!(
                    "request",
                    method,
                    route,
                    status = tracing::field::Empty,
                    micros = tracing::field::Empty,
                );
                let start = (!span.is_disabled()).then(Instant::now);
                let call = self.chain.call(index, &self.state, &mut routed, res);
                let result = labeled(label, call).instrument(span.clone()).await;
                if let Some(start) = start {
                    let status = match &result {
                        Ok(()) => res.status(),
                        Err(e) => HttpError::of(e).map_or(500, |e| e.status),
                    };
                    span.record("status", status);
                    span.record("micros", start.elapsed().as_micros() as u64);
                }
                result
            }
            Lookup::NotAllowed(allow) => self.refuse(res, 405, Some(allow)),
            Lookup::Options(allow) => {
                res.header("Allow", allow)?;
                res.send(204, None, b"")?;
                Ok(())
            }
            Lookup::NotFound => self.refuse(res, 404, None),
        }
    }

    fn body_limit(&self, head: &RequestHead<'_, '_>, configured: u64) -> u64 {
        self.table.body_limit(head).unwrap_or(configured)
    }

    fn error_body(&self, error: &HttpError, body: &mut Vec<u8>) -> &'static str {
        (self.error_body)(error, body)
    }
}

impl<S, R> std::fmt::Debug for Router<S, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("routes", &self.table.routes)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<S, R> std::fmt::Debug for Routes<S, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routes")
            .field("routes", &self.table.routes)
            .field("trace", &self.trace)
            .finish_non_exhaustive()
    }
}
