//! An HTTP/1.1 (and, with the feature `h2`, HTTP/2) client for code
//! running on a core: a handler or
//! [`Service`](crate::http::Service) that calls other HTTP services.
//!
//! A [`Client`] belongs to one core, as everything a handler holds does:
//! make one per core in the server's factory (or lazily on the core) and
//! clone it freely (an `Rc` inside). It keeps a keep-alive pool per origin
//! (`scheme://host:port`) and a cache of resolved host names, neither
//! shared with other cores and neither locked.
//!
//! # How a request goes
//!
//! 1. [`Client::get`] (or [`Client::request`] and the like) takes a URL,
//!    `http://host[:port][/path][?query]`, and gives a [`RequestBuilder`]
//!    for header fields, a body and timeouts; values from elsewhere join
//!    the URL encoded, with [`RequestBuilder::path_segment`] and
//!    [`RequestBuilder::query_pair`].
//! 2. [`RequestBuilder::send`] takes an idle pooled connection to the
//!    origin, or makes one: an IP literal is used as is; a host name is
//!    resolved on a thread of its own, never on the core (the system's
//!    resolver may block for seconds), and the answer cached on the core
//!    for [`Config::dns_ttl`]. It writes the request and reads the
//!    response's head.
//! 3. The [`ClientResponse`] gives the status and fields, and the body,
//!    whole ([`ClientResponse::body`], up to [`Config::max_body`]) or in
//!    pieces as they arrive ([`ClientResponse::chunk`]), whatever its
//!    framing: `Content-Length`, chunked, or until the server closes.
//! 4. A response read to its end cleanly, on a connection that allows
//!    reuse, puts the connection back in the pool; anything else closes
//!    it (a pooled connection never holds part of a response).
//!
//! Each stage has its own timeout ([`Config`], or per request), and an
//! error says which passed: `GET http://127.0.0.1:8080/x: reading the
//! response head timed out after 5s`. [`ClientError::kind`] sorts errors
//! for code that reacts to them. An idempotent request that failed on a
//! reused connection before any byte of a response is sent once more, on
//! a new connection (the server closed the idle connection as it was
//! reused); nothing else is retried.
//!
//! The fan-out proxy ([`proxy`](crate::proxy)) runs on the same pieces:
//! the per-origin pool, the exchange that sends a request and reads its
//! response, the response parser and the connect.
//!
//! # https
//!
//! `https://` URLs work when [`Config::tls`] holds a rustls client config
//! (percore bundles no root certificates: the config says what to
//! trust). Without one they fail with [`ErrorKind::Unsupported`]: "https
//! is not supported by this client without a TLS config".
//!
//! # HTTP/2
//!
//! With the feature `h2`, the client offers `h2` to `https://` origins
//! by ALPN ([`Config::http2`], on by default), and speaks it to
//! `http://` ones without asking when told they take it
//! ([`Config::http2_prior_knowledge`], or
//! [`RequestBuilder::http2_prior_knowledge`]). An origin that speaks
//! HTTP/2 gets one connection per core, made by the first request while
//! the others wait for it, and carrying all of them at once: as many
//! streams as the server's `SETTINGS_MAX_CONCURRENT_STREAMS` allows, the
//! rest waiting for room. Its frames are driven by a task of the core,
//! which closes it once it has had no stream for the pool's idle timeout,
//! or when the server stops. An origin whose ALPN chose HTTP/1.1 is
//! served from the keep-alive pool, as without the feature.
//!
//! Requests, bodies, timeouts and errors are as over HTTP/1.1, and so is
//! the [`ClientResponse`] (its fields are HTTP/2's, lowercase). A request
//! the server did not take is sent once more (RFC 9113 §8.7): one past
//! a GOAWAY's last stream goes on a new connection, one refused with
//! `REFUSED_STREAM` on the same. One it took and then left unanswered
//! fails ([`ErrorKind::Closed`], [`ErrorKind::Truncated`]); a reset
//! stream fails with its reason ([`ErrorKind::Reset`]).
//!
//! # Not (yet) here
//!
//! Streaming request bodies (a body is given whole), redirects, cookies,
//! proxies, and compression. HTTP/2's trailers are read
//! ([`ClientResponse::trailer`]); HTTP/1.1's are checked and dropped.
//!
//! # Examples
//!
//! A route that answers with what another service says of a user. The
//! client's value joins the URL as one encoded segment
//! ([`RequestBuilder::path_segment`]), never formatted into it: pasted
//! in, `/users/..%2Fadmin` would ask the other service for `/admin`.
//!
//! ```no_run
//! use std::io;
//!
//! use percore_handlers::client::Client;
//! use percore_handlers::http::{HttpHandler, Response, Routed, Router};
//!
//! async fn user(client: &Client, req: &mut Routed<'_, '_>, res: &mut Response<'_>) -> io::Result<()> {
//!     let id = req.param_str("id")?;
//!     let mut answer = client
//!         .get("http://127.0.0.1:8080/users")
//!         .path_segment(&id)
//!         .header("Accept", "application/json")
//!         .send()
//!         .await?;
//!     let body = answer.body().await?;
//!     res.send(answer.status(), Some(b"application/json"), &body)?;
//!     Ok(())
//! }
//!
//! percore::Server::builder()
//!     .address("127.0.0.1:8081".parse().unwrap())
//!     // One client per core, made on the core by the factory.
//!     .serve(|_core| {
//!         let routes = Router::new(Client::new()).get("/users/{id}", user);
//!         HttpHandler::new(routes.build().expect("one route"))
//!     })
//!     .unwrap();
//! ```

mod config;
pub(crate) mod connect;
pub(crate) mod error;
pub(crate) mod exchange;
#[cfg(feature = "h2")]
pub(crate) mod h2;
pub(crate) mod pool;
mod request;
mod resolve;
mod response;
mod url;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

pub use config::Config;
pub use error::{ClientError, ErrorKind, Op};
pub use pool::PoolConfig;
pub use request::RequestBuilder;
pub use response::ClientResponse;

use pool::Pool;
use resolve::Resolver;
use url::Url;

/// A per-core HTTP client: pools of keep-alive connections (and, with
/// the feature `h2`, an HTTP/2 connection per origin that speaks it) and
/// a cache of resolved names. Cheap to clone (an `Rc`); not `Send`, as it
/// belongs to the core it was made on. See the [module docs](self).
#[derive(Debug, Clone, Default)]
pub struct Client(Rc<Shared>);

#[derive(Debug, Default)]
struct Shared {
    config: Config,
    /// Per origin: `https`, host (lowercased) and port.
    pools: RefCell<HashMap<(bool, String, u16), Rc<Pool>>>,
    /// Made with the first name to resolve.
    resolver: RefCell<Option<Rc<Resolver>>>,
    /// What is known of each origin's HTTP/2, keyed as `pools`.
    #[cfg(feature = "h2")]
    origins: RefCell<HashMap<(bool, String, u16), Rc<h2::Origin>>>,
    /// `config.tls` offering `h2` and not offering it.
    #[cfg(feature = "h2")]
    tls: Option<h2::TlsConfigs>,
}

impl Client {
    /// A client with the default [`Config`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A client with `config`.
    pub fn with_config(config: Config) -> Self {
        Self(Rc::new(Shared {
            #[cfg(feature = "h2")]
            tls: config.tls.as_ref().map(h2::TlsConfigs::new),
            config,
            ..Shared::default()
        }))
    }

    /// A `GET` of `url`, to send.
    pub fn get(&self, url: &str) -> RequestBuilder {
        self.request("GET", url)
    }

    /// A `HEAD` of `url`, to send.
    pub fn head(&self, url: &str) -> RequestBuilder {
        self.request("HEAD", url)
    }

    /// A `POST` to `url`, to send (with a [`body`](RequestBuilder::body)).
    pub fn post(&self, url: &str) -> RequestBuilder {
        self.request("POST", url)
    }

    /// A `PUT` to `url`, to send.
    pub fn put(&self, url: &str) -> RequestBuilder {
        self.request("PUT", url)
    }

    /// A `DELETE` of `url`, to send.
    pub fn delete(&self, url: &str) -> RequestBuilder {
        self.request("DELETE", url)
    }

    /// A request with any `method` (as sent: methods are case-sensitive),
    /// to send.
    pub fn request(&self, method: &str, url: &str) -> RequestBuilder {
        RequestBuilder::new(self.clone(), method, url)
    }

    /// Its configuration.
    pub fn config(&self) -> &Config {
        &self.0.config
    }

    /// The pool of `url`'s origin.
    fn pool(&self, url: &Url) -> Rc<Pool> {
        let key = (url.tls, url.host.clone(), url.port);
        let mut pools = self.0.pools.borrow_mut();
        pools
            .entry(key)
            .or_insert_with(|| Rc::new(Pool::new(self.0.config.pool)))
            .clone()
    }

    /// The TLS config of HTTP/1.1 connections: without `h2` in its ALPN
    /// list when the client speaks HTTP/2 (a server that chose it would
    /// not be understood).
    fn h1_tls(&self) -> Option<&std::sync::Arc<percore::tls::rustls::ClientConfig>> {
        #[cfg(feature = "h2")]
        return self.0.tls.as_ref().map(|configs| &configs.h1);
        #[cfg(not(feature = "h2"))]
        return self.0.config.tls.as_ref();
    }

    /// The TLS configs of HTTP/2 and HTTP/1.1, if `https` is configured.
    #[cfg(feature = "h2")]
    fn tls_configs(&self) -> Option<&h2::TlsConfigs> {
        self.0.tls.as_ref()
    }

    /// What is known of `url`'s origin's HTTP/2.
    #[cfg(feature = "h2")]
    fn origin(&self, url: &Url) -> Rc<h2::Origin> {
        let key = (url.tls, url.host.clone(), url.port);
        let mut origins = self.0.origins.borrow_mut();
        origins.entry(key).or_default().clone()
    }

    fn resolver(&self) -> Rc<Resolver> {
        let mut resolver = self.0.resolver.borrow_mut();
        resolver
            .get_or_insert_with(|| Rc::new(Resolver::new(self.0.config.dns_ttl)))
            .clone()
    }
}
