//! One upstream as a core sees it: its address, its keep-alive pool, and
//! its health (outlier ejection).
//!
//! The pool is the client's ([`Pool`]): per core and per upstream, holding
//! only connections that read a complete response. One whose branch was
//! cut off comes back only through the drain (`drain.rs`), which reads
//! its response to the end first.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use percore::net::Endpoint;
use percore::tls::rustls;

use super::{EjectionConfig, PoolConfig, UpstreamTls};
use crate::client::pool::Pool;
use crate::proxy::combine::entry_prefix;

/// An upstream server and this core's idle connections to it.
#[derive(Debug)]
pub(crate) struct Upstream {
    pub(crate) addr: Endpoint,
    /// `addr` as text, for the combined body and error messages.
    pub(crate) name: String,
    /// `Host: addr\r\n`, written into every sub-request to this upstream.
    pub(crate) host_line: Vec<u8>,
    /// The start of its entries in a combined answer (see
    /// [`entry_prefix`]).
    pub(crate) entry_prefix: Box<[u8]>,
    /// Shared with the drain, which puts connections back in it.
    pub(crate) pool: Rc<Pool>,
    pub(crate) health: Health,
    /// The client side of TLS and the name checked, for `https://`.
    pub(crate) tls: Option<(Arc<rustls::ClientConfig>, String)>,
    /// Its HTTP/2 connection, when it is spoken to so.
    #[cfg(feature = "h2")]
    pub(crate) h2: Option<Rc<crate::client::h2::Origin>>,
}

impl Upstream {
    pub(crate) fn new(addr: Endpoint, config: PoolConfig, tls: Option<&UpstreamTls>) -> Self {
        let name = addr.to_string();
        // `validate` refuses TLS to a Unix socket without a name.
        let tls = tls.map(|tls| {
            let server_name = tls.server_name.clone().unwrap_or_else(|| match &addr {
                Endpoint::Tcp(sa) => sa.ip().to_string(),
                Endpoint::Unix(_) => "localhost".to_owned(),
            });
            (Arc::clone(&tls.config), server_name)
        });
        // Without the zone of a scoped IPv6 address (`%2`): it means
        // something only here (RFC 6874 §4), and a `Host` holding it is
        // not `uri-host [":" port]`, so an upstream that checks refuses it.
        // A Unix socket's path is no host at all: `localhost` is what
        // curl and nginx send over one.
        let host_line = match &addr {
            Endpoint::Tcp(SocketAddr::V6(v6)) if v6.scope_id() != 0 => {
                format!("Host: [{}]:{}\r\n", v6.ip(), v6.port())
            }
            Endpoint::Tcp(_) => format!("Host: {name}\r\n"),
            Endpoint::Unix(_) => "Host: localhost\r\n".to_owned(),
        }
        .into_bytes();
        Self {
            addr,
            entry_prefix: entry_prefix(&name),
            name,
            host_line,
            pool: Rc::new(Pool::new(config)),
            health: Health::default(),
            tls,
            #[cfg(feature = "h2")]
            h2: None,
        }
    }

    /// Speaks HTTP/2 to it from now on: with prior knowledge in clear
    /// text, offering only `h2` by ALPN over TLS (a server that does not
    /// take it fails the handshake, a failed connect).
    #[cfg(feature = "h2")]
    pub(crate) fn speak_h2(&mut self) {
        if let Some((config, _)) = &mut self.tls {
            let mut h2 = (**config).clone();
            h2.alpn_protocols = vec![b"h2".to_vec()];
            *config = Arc::new(h2);
        }
        self.h2 = Some(Rc::default());
    }
}

/// This core's view of an upstream's health: consecutive failures and
/// ejection. Plain `Cell`s: per core, never shared. The caller
/// reports at most one failure per request (see `FanOut::record`).
#[derive(Debug, Default)]
pub(crate) struct Health {
    /// Failed requests since the last success or ejection.
    failures: Cell<u32>,
    /// Ejections since the last success (the n of `base_time × n`).
    ejections: Cell<u32>,
    /// Ejected until then.
    until: Cell<Option<Instant>>,
    /// Which run of failures is current: a success or an ejection starts
    /// the next. A request notes the run it counted in (see
    /// `FanOut::record`).
    run: Cell<u64>,
    /// Requests in a row whose branches on it were cancelled because the
    /// policy was met without them: an upstream that hangs under `first`
    /// or `quorum:K` shows only this way. Any outcome of a branch on it
    /// ends the run; a response the drain reads to its end after the
    /// cut-off does not (one that always comes after the others' is what
    /// the WARN is for).
    cut_offs: Cell<u32>,
}

impl Health {
    /// Whether it is ejected at `now`.
    pub(crate) fn is_ejected(&self, now: Instant) -> bool {
        self.until.get().is_some_and(|t| now < t)
    }

    /// Whether it is ejected now; reads the core's clock only for an
    /// upstream that was ever ejected.
    pub(crate) fn is_ejected_now(&self) -> bool {
        self.until.get().is_some_and(|t| percore::time::now() < t)
    }

    /// The end of its last ejection, if it was ever ejected.
    pub(crate) fn until(&self) -> Option<Instant> {
        self.until.get()
    }

    /// A branch on it ended (answered or failed): a run of cut-offs ends.
    pub(crate) fn outcome(&self) {
        self.cut_offs.set(0);
    }

    /// A request's branches on it cancelled before it answered; returns
    /// how many such requests in a row.
    pub(crate) fn cut_off(&self) -> u32 {
        let n = self.cut_offs.get().saturating_add(1);
        self.cut_offs.set(n);
        n
    }

    /// A success (a non-5xx answer): the counters start again. Returns
    /// how many ejections in a row it ended (0 if it was not ejected since
    /// its last success).
    pub(crate) fn success(&self) -> u32 {
        self.failures.set(0);
        self.run.set(self.run.get().wrapping_add(1));
        self.ejections.replace(0)
    }

    /// Whether a failure of the request whose mark for this upstream is
    /// `counted` (0 at first) is its first in the current run; marks it so.
    pub(crate) fn first_in_run(&self, counted: &Cell<u64>) -> bool {
        let mark = self.run.get().wrapping_add(1);
        counted.replace(mark) != mark
    }

    /// A failure; returns whether it reached the threshold (the caller
    /// then decides whether the ejection is allowed and calls [`eject`]).
    ///
    /// [`eject`]: Self::eject
    pub(crate) fn failure(&self, config: &EjectionConfig) -> bool {
        let n = self.failures.get().saturating_add(1);
        self.failures.set(n);
        config.consecutive_failures > 0 && n >= config.consecutive_failures
    }

    /// Ejects until `now + base_time × n` (n-th ejection in a row, capped
    /// at `max_time`); another full run of failures ejects it again.
    pub(crate) fn eject(&self, config: &EjectionConfig, now: Instant) -> Duration {
        let n = self.ejections.get().saturating_add(1);
        self.ejections.set(n);
        self.failures.set(0);
        self.run.set(self.run.get().wrapping_add(1));
        let time = config.base_time.saturating_mul(n).min(config.max_time);
        self.until.set(Some(now + time));
        time
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_line_leaves_out_an_ipv6_zone() {
        let scoped: SocketAddr = "[fe80::1%2]:8080".parse().expect("address");
        let upstream = Upstream::new(scoped.into(), PoolConfig::default(), None);
        assert_eq!(upstream.host_line, b"Host: [fe80::1]:8080\r\n");
        assert_eq!(upstream.name, "[fe80::1%2]:8080");
        let plain: SocketAddr = "[::1]:80".parse().expect("address");
        assert_eq!(
            Upstream::new(plain.into(), PoolConfig::default(), None).host_line,
            b"Host: [::1]:80\r\n"
        );
    }
}
