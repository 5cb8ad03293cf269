//! [`Config`] of the fan-out proxy and its join [`Policy`].

use percore::net::Endpoint;
use percore::tls::rustls;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

pub use crate::client::PoolConfig;

/// When a fanned-out request is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Wait for every branch; any failure fails the request at once
    /// (fail-fast: the others are cancelled).
    All,
    /// The first successful branch wins; the others are cancelled. Fails
    /// only when every branch failed.
    First,
    /// Answer once this many branches succeeded (the others are
    /// cancelled); fail as soon as that can no longer happen.
    Quorum(usize),
}

impl Policy {
    /// How many successes of `width` branches meet the policy.
    pub(crate) fn needed(self, width: usize) -> usize {
        match self {
            Policy::All => width,
            Policy::First => 1,
            Policy::Quorum(k) => k.min(width),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::All => f.write_str("all"),
            Policy::First => f.write_str("first"),
            Policy::Quorum(k) => write!(f, "quorum:{k}"),
        }
    }
}

impl FromStr for Policy {
    type Err = ConfigError;

    /// Parses `all`, `first` or `quorum:K` (K ≥ 1), in any case.
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        const EXPECTED: ConfigError =
            ConfigError(Problem::Text("expected all, first or quorum:K (K >= 1)"));
        if s.eq_ignore_ascii_case("all") {
            return Ok(Policy::All);
        }
        if s.eq_ignore_ascii_case("first") {
            return Ok(Policy::First);
        }
        let prefix = "quorum:";
        let k = match s.split_at_checked(prefix.len()) {
            Some((head, k)) if head.eq_ignore_ascii_case(prefix) => k.parse::<usize>(),
            _ => return Err(EXPECTED),
        };
        match k {
            Ok(k) if k >= 1 => Ok(Policy::Quorum(k)),
            _ => Err(EXPECTED),
        }
    }
}

/// Outlier ejection, kept per upstream per core: after
/// [`consecutive_failures`](Self::consecutive_failures) requests in a row
/// failed on an upstream (a 5xx answer, a connect failure, a broken
/// exchange or no answer by the deadline) it gets no branches for `base_time × n` (the n-th ejection
/// since its last success), at most [`max_time`](Self::max_time).
///
/// The unit is the request, not the branch: a request whose branches on
/// one upstream fail several times counts once there, so the threshold
/// means the same at any [`Config::width`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EjectionConfig {
    /// Failed requests in a row (each counted once per upstream) that
    /// eject an upstream; 0 turns ejection off. Default 5.
    pub consecutive_failures: u32,
    /// Length of the first ejection; the n-th in a row lasts n times this.
    /// Default 30 s.
    pub base_time: Duration,
    /// Longest ejection. Default 300 s.
    pub max_time: Duration,
    /// Most upstreams ejected at once, in percent of them (rounded down,
    /// but always at least one may be). Default 10.
    pub max_percent: u8,
}

impl Default for EjectionConfig {
    fn default() -> Self {
        Self {
            consecutive_failures: 5,
            base_time: Duration::from_secs(30),
            max_time: Duration::from_secs(300),
            max_percent: 10,
        }
    }
}

/// Settings of a [`FanOut`](super::FanOut). Defaults: connect timeout
/// 1 s, overall deadline 15 s, ejection after 5 failed requests in a row
/// for 30 s, at most 1024 fan-outs pending per core.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use percore_handlers::proxy::{Config, Policy};
///
/// let mut config = Config::new(vec!["127.0.0.1:8080".parse::<std::net::SocketAddr>().unwrap()]);
/// config.width = 3;
/// config.policy = "quorum:2".parse().unwrap();
/// config.deadline = Duration::from_millis(300);
/// assert!(config.validate().is_ok());
/// assert_eq!(config.policy, Policy::Quorum(2));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// The upstream servers (TCP addresses or Unix sockets). Branches go
    /// to them round-robin.
    pub upstreams: Vec<Endpoint>,
    /// TLS to the upstreams (`https://`), or none (plain HTTP, the
    /// default). A connection that fails its handshake, or whose
    /// certificate does not verify, is a failed connect (502).
    pub upstream_tls: Option<UpstreamTls>,
    /// Sub-requests per request (K). Default: one per upstream.
    pub width: usize,
    /// When to answer. Default [`Policy::All`].
    pub policy: Policy,
    /// Time for the whole fan-out, from the moment the client's request
    /// (head and body) is in; then 504. Default 15 s.
    pub deadline: Duration,
    /// Time for one TCP connect (within the deadline); then the branch
    /// fails with 504. Default 1 s.
    pub connect_timeout: Duration,
    /// The keep-alive pool.
    pub pool: PoolConfig,
    /// Largest upstream response head (status line and fields); larger is
    /// a 502. Default 32 KiB, as for requests.
    pub max_response_head: usize,
    /// Largest upstream response body; larger is a 502. Default 1 MiB.
    /// Also what one branch may hold: a core's peak is at most
    /// [`max_pending`](Self::max_pending) × [`width`](Self::width) of it.
    pub max_response_body: usize,
    /// Outlier ejection of failing upstreams.
    pub ejection: EjectionConfig,
    /// Most fanned-out requests in flight per core; more are answered 503
    /// at once, never queued. Default 1024.
    pub max_pending: usize,
    /// A shadow upstream that gets a copy of every fanned-out request; its
    /// answers are read and discarded, its failures only counted and
    /// logged (rate-limited), and it never delays a client (see
    /// the [module docs](super)). Default none.
    pub mirror: Option<Endpoint>,
    /// Most mirrored copies waiting or in flight per core; more are
    /// dropped (and counted). Default 256.
    pub mirror_max_pending: usize,
    /// This proxy's name in the `Via` field of its sub-requests (`Via: 1.1
    /// NAME`, RFC 9110 §7.6.3, a pseudonym in place of a host name), and
    /// how it recognises a request that has already passed through it: one
    /// whose `Via` lists NAME is answered 508 Loop Detected without being
    /// fanned out. A token (RFC 9110 §5.6.2) of at most
    /// [`Config::MAX_PSEUDONYM`] bytes. Default: `percore-` and 16 random
    /// hex digits, new for each [`Config::new`]: clones share it, so every
    /// core of a server built from one `Config` has the same name, while
    /// two proxies (even in one process) differ. Set it to name the proxy
    /// in upstream logs; two proxies that may forward to each other must
    /// not share a name.
    pub pseudonym: String,
    /// Speak HTTP/2 to the upstreams: with prior knowledge in clear text
    /// (RFC 9113 §3.3), by ALPN `h2` alone over TLS. Each upstream then
    /// has one connection per core, which carries all the core's
    /// branches to it at once, within its limit on streams; a branch cut
    /// off resets its stream, with nothing to drain. The mirror, if any,
    /// is still spoken to over HTTP/1.1. Default `false`.
    #[cfg(feature = "h2")]
    pub upstream_http2: bool,
}

impl Config {
    /// The largest [`width`](Self::width) [`validate`](Self::validate)
    /// accepts. Each branch holds an upstream connection, a descriptor,
    /// for the whole request, so one request needs `width` of them: past
    /// the usual default of `ulimit -n` (1024) a single request could never
    /// succeed, and [`max_pending`](Self::max_pending) requests at this
    /// width already need a million per core. The join also polls every
    /// running branch on each wake-up, which is cheap at the widths
    /// scatter-gather uses (tens) and quadratic beyond. A wider setting is
    /// a typo, not a plan.
    pub const MAX_WIDTH: usize = 1024;

    /// The longest [`pseudonym`](Self::pseudonym): it is written into every
    /// sub-request.
    pub const MAX_PSEUDONYM: usize = 64;

    /// The defaults, with one branch per upstream.
    pub fn new<A: Into<Endpoint>>(upstreams: impl IntoIterator<Item = A>) -> Self {
        let upstreams: Vec<Endpoint> = upstreams.into_iter().map(Into::into).collect();
        Self {
            width: upstreams.len(),
            upstreams,
            upstream_tls: None,
            policy: Policy::All,
            deadline: Duration::from_secs(15),
            connect_timeout: Duration::from_secs(1),
            pool: PoolConfig::default(),
            max_response_head: 32 * 1024,
            max_response_body: 1024 * 1024,
            ejection: EjectionConfig::default(),
            max_pending: 1024,
            mirror: None,
            mirror_max_pending: 256,
            pseudonym: random_pseudonym(),
            #[cfg(feature = "h2")]
            upstream_http2: false,
        }
    }

    /// Checks that the settings make sense together.
    ///
    /// # Errors
    ///
    /// No upstream, [`upstream_tls`](Self::upstream_tls) to a Unix socket
    /// without a server name, a width of 0 or above [`Config::MAX_WIDTH`], a quorum
    /// of 0 or above the width, a zero
    /// deadline or connect timeout, a `max_pending` (or, with a mirror,
    /// `mirror_max_pending`) of 0, an ejection
    /// percentage above 100, a zero ejection time, or a
    /// [`pseudonym`](Self::pseudonym) that is empty, longer than
    /// [`Config::MAX_PSEUDONYM`] or not a token.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let text = |why| Err(ConfigError(Problem::Text(why)));
        if self.upstreams.is_empty() {
            return text("at least one upstream is needed");
        }
        let unix = |e: &Endpoint| matches!(e, Endpoint::Unix(_));
        if let Some(tls) = &self.upstream_tls {
            if tls.server_name.is_none() && self.upstreams.iter().any(unix) {
                return text("TLS to a Unix socket upstream needs a server name");
            }
        }
        if self.width == 0 {
            return text("width must be at least 1");
        }
        if self.width > Self::MAX_WIDTH {
            return Err(ConfigError(Problem::WidthTooLarge(self.width)));
        }
        if let Policy::Quorum(k) = self.policy {
            if k == 0 {
                return text("quorum:K needs K >= 1");
            }
            if k > self.width {
                let width = self.width;
                return Err(ConfigError(Problem::QuorumAboveWidth { k, width }));
            }
        }
        if self.deadline.is_zero() || self.connect_timeout.is_zero() {
            return text("deadline and connect timeout must be above zero");
        }
        if self.max_pending == 0 {
            return text("max_pending must be at least 1");
        }
        if self.mirror.is_some() && self.mirror_max_pending == 0 {
            return text("mirror_max_pending must be at least 1");
        }
        let ej = &self.ejection;
        if ej.max_percent > 100 {
            return text("ejection max_percent must be at most 100");
        }
        if ej.consecutive_failures > 0 && (ej.base_time.is_zero() || ej.max_time.is_zero()) {
            return text("ejection times must be above zero");
        }
        let name = self.pseudonym.as_bytes();
        if name.is_empty()
            || name.len() > Self::MAX_PSEUDONYM
            || !name.iter().all(|&b| percore_http1::tchar::is_tchar(b))
        {
            return text(
                "the pseudonym must be 1 to 64 letters, digits or !#$%&'*+-.^_`|~ (a token)",
            );
        }
        Ok(())
    }
}

/// TLS to the fan-out's upstreams: the client configuration (trust
/// roots, ALPN, a client certificate) and the name each upstream's
/// certificate must carry.
///
/// ```no_run
/// use percore_handlers::proxy::{Config, UpstreamTls};
///
/// let tls = percore::tls::client_config("ca.pem".as_ref()).unwrap();
/// let mut config = Config::new(["127.0.0.1:8443".parse::<std::net::SocketAddr>().unwrap()]);
/// config.upstream_tls = Some(UpstreamTls::new(tls).server_name("api.internal"));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct UpstreamTls {
    /// What the handshake trusts and offers; [`percore::tls::client_config`]
    /// makes one from a CA file, with verification on.
    pub config: Arc<rustls::ClientConfig>,
    /// The name sent in SNI and checked against every upstream's
    /// certificate. `None` (the default): each upstream's IP address, which
    /// its certificate must then list; a Unix socket upstream needs a name.
    pub server_name: Option<String>,
}

impl UpstreamTls {
    /// TLS with `config`, each upstream checked against its IP address.
    pub fn new(config: Arc<rustls::ClientConfig>) -> Self {
        Self {
            config,
            server_name: None,
        }
    }

    /// Checks every upstream's certificate against `name` instead.
    #[must_use]
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }
}

/// The same configuration object and name: a `ClientConfig` cannot be
/// compared, so two are equal only when they are one.
impl PartialEq for UpstreamTls {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.config, &other.config) && self.server_name == other.server_name
    }
}

impl Eq for UpstreamTls {}

/// `percore-` and 16 hex digits that differ between calls and between
/// processes. std's `RandomState` is seeded from the OS once per thread and
/// then stepped for each new one; the time and process id are mixed in so
/// that a fork (same seed) still differs. Not a secret, only a name: a
/// collision would merely make two proxies take each other for a loop.
fn random_pseudonym() -> String {
    use std::hash::BuildHasher;
    let seed = (std::process::id(), std::time::SystemTime::now());
    let bits = std::collections::hash_map::RandomState::new().hash_one(seed);
    format!("percore-{bits:016x}")
}

/// A setting of [`Config`] or a [`Policy`] string is invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigError(Problem);

/// What is wrong, with the values the message needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Problem {
    Text(&'static str),
    WidthTooLarge(usize),
    QuorumAboveWidth { k: usize, width: usize },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Problem::Text(why) => f.write_str(why),
            Problem::WidthTooLarge(width) => write!(
                f,
                "width {width} is above {}, the most sub-requests per request",
                Config::MAX_WIDTH
            ),
            Problem::QuorumAboveWidth { k, width } => {
                write!(f, "quorum:{k} needs K <= width, and the width is {width}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}
