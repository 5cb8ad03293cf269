//! The fan-out proxy tests' proxy: a [`FanOut`] on a one-core
//! [`TestServer`]. The fake upstreams it is pointed at are the kit's
//! (`percore_test_kit::upstream`).

use percore::net::Endpoint;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use percore::Backend;
use percore_handlers::proxy::{Config as ProxyConfig, FanOut, ProxyStats, ProxyStatsReader};

use super::http::{Config, TestServer};

/// A fan-out proxy on a one-core test server, adjusted by `tweak`. Its
/// deadline (60 s) and connect timeout (30 s) are hang detectors only, so
/// that an answer slowed by a loaded machine is still an answer: a test of
/// either timeout sets it short itself, against an upstream that never
/// answers (or never accepts).
#[allow(dead_code, reason = "only the fan-out tests start a proxy")]
pub(crate) fn proxy(
    backend: Backend,
    upstreams: &[impl Into<Endpoint> + Clone],
    tweak: impl FnOnce(&mut ProxyConfig),
) -> TestServer {
    proxy_counted(backend, upstreams, tweak).0
}

/// The proxy core's counters, readable from the test's thread.
#[allow(dead_code, reason = "only the fan-out tests start a proxy")]
#[derive(Clone, Default)]
pub(crate) struct Counted(Arc<Mutex<Option<ProxyStatsReader>>>);

#[allow(dead_code, reason = "only the fan-out tests start a proxy")]
impl Counted {
    /// The counters now (all zero before the proxy's core made it).
    pub(crate) fn get(&self) -> ProxyStats {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(ProxyStatsReader::snapshot)
            .unwrap_or_default()
    }
}

/// [`proxy`], with its counters.
#[allow(dead_code, reason = "only the fan-out tests start a proxy")]
pub(crate) fn proxy_counted(
    backend: Backend,
    upstreams: &[impl Into<Endpoint> + Clone],
    tweak: impl FnOnce(&mut ProxyConfig),
) -> (TestServer, Counted) {
    proxy_counted_draining(backend, upstreams, Duration::from_secs(2), tweak)
}

/// [`proxy_counted`] on a server whose drain deadline is `drain` (2 s
/// otherwise).
#[allow(dead_code, reason = "only the fan-out tests start a proxy")]
pub(crate) fn proxy_counted_draining(
    backend: Backend,
    upstreams: &[impl Into<Endpoint> + Clone],
    drain: Duration,
    tweak: impl FnOnce(&mut ProxyConfig),
) -> (TestServer, Counted) {
    let mut config = ProxyConfig::new(upstreams.iter().cloned());
    config.deadline = Duration::from_secs(60);
    config.connect_timeout = Duration::from_secs(30);
    tweak(&mut config);
    config.validate().expect("valid proxy config");
    let counted = Counted::default();
    let slot = counted.0.clone();
    let server = TestServer::start_draining(backend, Config::default(), drain, move |_| {
        let proxy = FanOut::new(config.clone()).expect("validated");
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(proxy.stats_reader());
        proxy
    });
    (server, counted)
}
