//! Rate-limited WARN lines for upstream failures: a failed sub-request
//! (connect failure or timeout, reset, a bad or truncated answer, no
//! answer by the deadline), an upstream whose branches keep being
//! cancelled before it answers, and a failed mirror copy, each naming the
//! upstream and the reason.
//!
//! Without them a proxy answering 502 and 504 looks healthy in its log:
//! its counters (in the stop summary, and in the `--stats` lines) say how
//! many failed, not which upstream or why. A dead
//! upstream under load fails on every request, though, so each core
//! writes at most one such line a second ([`LogLimit`]), and the next line
//! it writes says how many it left out in between ([`ProxyStats`] has the
//! totals). A successful request never reaches this code, so the steady
//! state neither allocates nor reads the clock for it.
//!
//! [`ProxyStats`]: super::ProxyStats
//! [`LogLimit`]: crate::log_limit::LogLimit

use std::fmt;
use std::time::Instant;

use crate::client::exchange::Failure;
use crate::log_limit::{LeftOut, LogLimit};

/// Linux's "too many open files" for the process (`EMFILE`) and for the
/// whole system (`ENFILE`): the same numbers on every architecture
/// (asm-generic/errno-base.h).
const EMFILE: i32 = 24;
const ENFILE: i32 = 23;

/// Which kind of upstream failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// One of the fan-out's upstreams.
    Upstream,
    /// The shadow upstream of the mirror.
    Mirror,
}

/// Why it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    Failed(Failure),
    /// The mirror's shadow answered with this 5xx status (a 5xx from a
    /// fan-out upstream is passed on to the client, not logged here).
    Status(u16),
    /// This many requests in a row met their policy without it, its
    /// branches cancelled before it answered.
    CutOff(u32),
}

/// One core's failure lines and their rate limit, shared only with that
/// core's mirror workers.
#[derive(Debug, Default)]
pub(crate) struct FailureLog {
    limit: LogLimit,
}

impl FailureLog {
    /// Logs a failure of `upstream` at WARN, unless a line was written
    /// less than [`INTERVAL`](crate::log_limit::INTERVAL) before `now`;
    /// then only counts it.
    pub(crate) fn failed(&self, now: Instant, role: Role, upstream: &str, reason: Reason) {
        if let Some(suppressed) = self.limit.admit(now) {
            let line = Line {
                role,
                upstream,
                reason,
                suppressed,
            };
            tracing::warn!("fanout: {line}");
        }
    }
}

/// The text of one failure line (after the `fanout: ` prefix).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Line<'a> {
    pub(crate) role: Role,
    pub(crate) upstream: &'a str,
    pub(crate) reason: Reason,
    /// Failures left out since the previous line.
    pub(crate) suppressed: u64,
}

impl fmt::Display for Line<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let role = match self.role {
            Role::Upstream => "upstream",
            Role::Mirror => "mirror",
        };
        write!(f, "{role} {}: ", self.upstream)?;
        match self.reason {
            Reason::Failed(failure) => write!(f, "{failure}{}", hint(failure))?,
            Reason::Status(status) => write!(f, "answered {status}")?,
            Reason::CutOff(n) => write!(
                f,
                "the last {n} requests sent to it were answered by the others first \
                 and its branches cancelled (hung, or always slower than the others?)"
            )?,
        }
        let left_out = LeftOut {
            count: self.suppressed,
            what: (
                "upstream failure on this core",
                "upstream failures on this core",
            ),
        };
        write!(f, "{left_out}")
    }
}

/// What the operator can do about a failure, for the few that are the
/// proxy's own trouble rather than the upstream's.
fn hint(failure: Failure) -> &'static str {
    let (Failure::Connect(e) | Failure::Io(e)) = failure else {
        return "";
    };
    match e.code() {
        Some(EMFILE) => "; the proxy is out of file descriptors: raise its limit (ulimit -n)",
        Some(ENFILE) => {
            "; the system's file table is full: raise fs.file-max (sysctl), \
             not only ulimit -n"
        }
        _ => "",
    }
}
