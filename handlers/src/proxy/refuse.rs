//! The answers the proxy gives without fanning out: 503 from the
//! pending-request breaker or because every upstream is
//! ejected, and 508 for a request that came back to this proxy (a
//! loop, see `via.rs`). Each is counted in [`ProxyStats`](super::ProxyStats).

use std::io::{self, Write as _};
use std::time::Instant;

use super::service::FanOut;
use super::stats::bump;
use crate::http::Response;

impl FanOut {
    /// 503 at once: this core already has `max_pending` fan-outs in flight.
    pub(crate) fn reject_pending(&self, res: &mut Response<'_>) -> io::Result<()> {
        bump(&self.stats.rejected_pending);
        res.header("Content-Type", b"text/plain; charset=utf-8")?;
        res.set_status(503);
        let _ = writeln!(
            res.body_mut(),
            "too many requests in flight: {} pending on this core (max_pending)",
            self.config.max_pending
        );
        Ok(())
    }

    /// 503: every upstream is ejected; names each and when it
    /// returns.
    pub(crate) fn reject_all_ejected(
        &self,
        res: &mut Response<'_>,
        now: Instant,
    ) -> io::Result<()> {
        bump(&self.stats.all_ejected);
        res.header("Content-Type", b"text/plain; charset=utf-8")?;
        res.set_status(503);
        let out = res.body_mut();
        let _ = writeln!(out, "no upstream available: every upstream is ejected");
        for u in &self.upstreams {
            if let Some(until) = u.health.until() {
                let _ = writeln!(
                    out,
                    "upstream {}: ejected after {} failed requests in a row, back in {} ms",
                    u.name,
                    self.config.ejection.consecutive_failures,
                    until.saturating_duration_since(now).as_millis()
                );
            }
        }
        Ok(())
    }

    /// 508 Loop Detected: the request's `Via` names this proxy, so fanning
    /// it out would send it round again. Logged at WARN (rate-limited).
    pub(crate) fn reject_loop(
        &self,
        res: &mut Response<'_>,
        method: &str,
        target: &str,
    ) -> io::Result<()> {
        bump(&self.stats.loops);
        self.via.warn_loop(percore::time::now(), method, target);
        res.header("Content-Type", b"text/plain; charset=utf-8")?;
        res.set_status(508);
        let out = res.body_mut();
        out.extend_from_slice(b"loop detected: this request already passed through this proxy (");
        out.extend_from_slice(self.via.element());
        out.extend_from_slice(b" in its Via)\n");
        Ok(())
    }
}
