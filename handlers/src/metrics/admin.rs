//! [`Admin`]: the HTTP service of an admin listener: `/metrics`,
//! `/healthz` and `/readyz`. Also callable from another service, to mount
//! them on its own routes ([`Admin::answer`]).

use std::io;

use super::Metrics;
use crate::http::{Request, Response, Service};

/// Prometheus's text format, version 0.0.4.
const TEXT_FORMAT: &[u8] = b"text/plain; version=0.0.4; charset=utf-8";

/// Serves a server's [`Metrics`] and health:
///
/// - `GET /metrics`: every metric, in Prometheus's text format;
/// - `GET /healthz`: 200 `ok` while the process serves;
/// - `GET /readyz`: 200 `ready` when the server wants traffic, else 503
///   (`starting` before every core listens, `stopping` once a stop has
///   begun, `overloaded` when a core's HTTP layer shed requests since the
///   previous `/readyz`: see
///   [`Config::shed_queue_delay`](crate::http::Config::shed_queue_delay));
///   see [`percore::Readiness`];
///
/// anything else 404. `HEAD` works as `GET`.
#[derive(Debug, Clone)]
pub struct Admin {
    metrics: Metrics,
}

impl Admin {
    /// The service for `metrics`.
    pub fn new(metrics: Metrics) -> Self {
        Self { metrics }
    }

    /// Answers `path` if it is one of the admin paths, and says whether it
    /// did: for a service that mounts them among its own routes.
    ///
    /// # Errors
    ///
    /// Only as [`Response::send`] (a response whose head is already out).
    pub fn answer(&self, path: &str, res: &mut Response<'_>) -> io::Result<bool> {
        let plain = Some(&b"text/plain"[..]);
        match path {
            "/metrics" => {
                res.send_with(200, Some(TEXT_FORMAT), |out| {
                    self.metrics.render(out);
                    Ok(())
                })?;
            }
            "/healthz" => res.send(200, plain, b"ok\n")?,
            "/readyz" => {
                let readiness = self.metrics.readiness();
                // Asked before the readiness, so that the shed requests
                // a stop's answer covers are not reported again after it.
                let overloaded = self.metrics.shed_since_last_check();
                if readiness.is_ready() && overloaded {
                    res.send(503, plain, b"overloaded\n")?;
                } else if readiness.is_ready() {
                    res.send(200, plain, b"ready\n")?;
                } else if readiness.is_leaving() {
                    res.send(503, plain, b"stopping\n")?;
                } else {
                    res.send(503, plain, b"starting\n")?;
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Service for Admin {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        if !matches!(req.method(), "GET" | "HEAD") {
            res.send(405, Some(b"text/plain"), b"method not allowed\n")?;
            return Ok(());
        }
        if !self.answer(req.path(), res)? {
            res.send(404, Some(b"text/plain"), b"not found\n")?;
        }
        Ok(())
    }
}
