//! [`Layer`]: one core's HTTP layer, what every connection of the core
//! shares: the service, its settings, the `Date`, the stop watch, the
//! counters and the log limits. The [`HttpHandler`](super::HttpHandler)
//! holds it and lends it to each connection it serves.

use std::rc::Rc;
use std::sync::Arc;

use super::config::Config;
use super::date::SharedDate;
use super::proto::{max_head_len, Limits};
use super::stats::Counters;
use super::wire::StopWatch;
use crate::log_limit::LogLimit;

/// One core's HTTP layer: its service and what its connections share.
#[derive(Debug)]
pub(super) struct Layer<S> {
    pub(super) service: S,
    pub(super) config: Config,
    pub(super) date: SharedDate,
    pub(super) stop: Rc<StopWatch>,
    /// Rate limit of the core's "service failed" warnings.
    pub(super) failures: LogLimit,
    /// Rate limit of the core's warnings for calls cut off by a stop.
    pub(super) cut_off: LogLimit,
    /// Rate limit of the core's warnings for a panicking `error_body`.
    pub(super) error_body_panics: LogLimit,
    /// The core's HTTP counters.
    pub(super) counters: Arc<Counters>,
    /// The limits the parser checks: the configured ones but the body's.
    /// That one is the service's to choose per request, so the parser
    /// does not check `Content-Length`.
    pub(super) parse_limits: Limits,
    /// The longest a complete head may be, under the configured limits.
    pub(super) max_head: usize,
}

impl<S> Layer<S> {
    /// The layer of `service` under `config`, counting into `counters`.
    pub(super) fn new(service: S, config: Config, counters: Arc<Counters>) -> Self {
        Self {
            service,
            date: SharedDate::default(),
            stop: Rc::new(StopWatch::default()),
            failures: LogLimit::default(),
            cut_off: LogLimit::default(),
            error_body_panics: LogLimit::default(),
            counters,
            parse_limits: Limits {
                max_body: u64::MAX,
                ..config.limits
            },
            max_head: max_head_len(&config.limits),
            config,
        }
    }
}
