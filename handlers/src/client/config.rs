//! [`Config`]: a [`Client`](super::Client)'s timeouts, limits, pool and
//! name cache.

use std::sync::Arc;
use std::time::Duration;

use percore::tls::rustls;

use super::PoolConfig;

/// How a [`Client`](super::Client) behaves. Each timeout bounds one stage
/// of a request, and an error that it passed names that stage; a request
/// may set its own (see [`RequestBuilder`](super::RequestBuilder)). For
/// a bound on the whole request, wrap it in [`percore::time::timeout`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// The keep-alive pool of each origin (`scheme://host:port`).
    pub pool: PoolConfig,
    /// Longest wait for a name's addresses. Default 10 s.
    pub resolve_timeout: Duration,
    /// How long a resolved name is used before it is resolved again.
    /// Default 30 s.
    pub dns_ttl: Duration,
    /// Longest wait for a connection (over all of a name's addresses, in
    /// the order the resolver gave them), its TLS handshake included.
    /// Default 5 s.
    pub connect_timeout: Duration,
    /// Longest wait to write the whole request. Default 10 s.
    pub write_timeout: Duration,
    /// Longest wait from the request written to the response's head read
    /// whole: the time the server takes to answer. Default 30 s.
    pub head_timeout: Duration,
    /// Longest wait for each piece of the body: a body that keeps coming
    /// may take longer in all. Default 30 s.
    pub body_timeout: Duration,
    /// Most bytes of a response head (interim responses included). A
    /// longer one fails as a bad response. Default 64 KiB.
    pub max_head: usize,
    /// Most bytes [`ClientResponse::body`](super::ClientResponse::body)
    /// gathers; past it, [`ErrorKind::TooLarge`](super::ErrorKind). A
    /// body read with [`chunk`](super::ClientResponse::chunk) has no
    /// limit. Default 8 MiB.
    pub max_body: usize,
    /// The client side of TLS, for `https://` URLs; without it they fail
    /// with [`ErrorKind::Unsupported`](super::ErrorKind). percore bundles
    /// no root certificates: load the ones to trust into the rustls config.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Offer HTTP/2 to `https://` origins by ALPN (`h2`, then
    /// `http/1.1`): an origin that chooses `h2` gets one connection per
    /// core, which carries all the core's requests to it at once. One
    /// that chooses HTTP/1.1 is served from the keep-alive pool as
    /// without it. Default `true`; a request may say otherwise
    /// ([`RequestBuilder::http2`](super::RequestBuilder::http2)).
    #[cfg(feature = "h2")]
    pub http2: bool,
    /// Speak HTTP/2 to `http://` origins without asking first (prior
    /// knowledge, RFC 9113 §3.3): for a server known to take it, such as
    /// percore's own with its `h2` feature. A server that does not fails
    /// the request. Default `false`; a request may say otherwise
    /// ([`RequestBuilder::http2_prior_knowledge`]).
    ///
    /// [`RequestBuilder::http2_prior_knowledge`]: super::RequestBuilder::http2_prior_knowledge
    #[cfg(feature = "h2")]
    pub http2_prior_knowledge: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            // Fewer than the proxy's 1024: a client serves a handler's
            // calls, not a fan-out's branches.
            pool: PoolConfig {
                max_idle: 64,
                ..PoolConfig::default()
            },
            resolve_timeout: Duration::from_secs(10),
            dns_ttl: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(10),
            head_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            max_head: 64 * 1024,
            max_body: 8 * 1024 * 1024,
            tls: None,
            #[cfg(feature = "h2")]
            http2: true,
            #[cfg(feature = "h2")]
            http2_prior_knowledge: false,
        }
    }
}
