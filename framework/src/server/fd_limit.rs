//! The process's open-file limit, held against the connections the server
//! is configured to hold.
//!
//! Many systems start services with a soft limit of 1,024 descriptors and a
//! much higher hard one, far below 10,000 connections per core: the server
//! would hit `EMFILE` and pause accepting long before its connection limit.
//! So at start the soft limit is raised as far as the connection limit
//! needs (never past the hard limit), and if even the hard limit falls well
//! short, a warning says what it allows.

use crate::sys;

/// Descriptors a core holds besides its connections: ring or epoll fd,
/// eventfd, listener, the reserve fd for `EMFILE`, and some slack.
const PER_CORE: u64 = 8;
/// Descriptors of the process besides the cores' (stdio, logs, the
/// program's own files).
const PROCESS: u64 = 32;

/// Raises the soft open-file limit toward what `cores` cores of
/// `max_connections` each need, and warns when the limit stays below nine
/// tenths of it.
pub(crate) fn fit_to_connections(cores: usize, max_connections: usize) {
    let needed = (cores as u64)
        .saturating_mul((max_connections as u64).saturating_add(PER_CORE))
        .saturating_add(PROCESS);
    let Ok((soft, hard)) = sys::nofile_limit() else {
        return;
    };
    if soft >= needed {
        return;
    }
    let mut limit = soft;
    let target = needed.min(hard);
    if target > soft {
        match sys::set_nofile_soft(target, hard) {
            Ok(()) => {
                tracing::info!(
                    from = soft,
                    to = target,
                    cores,
                    max_connections,
                    "raised the open-file limit (ulimit -n) for the connection limit"
                );
                limit = target;
            }
            Err(e) => tracing::debug!(error = %e, "could not raise the open-file limit"),
        }
    }
    if limit.saturating_mul(10) < needed.saturating_mul(9) {
        // Saturating: `usize::MAX` connections per core (in effect, no
        // limit) is a valid setting.
        let configured = (cores as u64).saturating_mul(max_connections as u64);
        let allowed = limit.saturating_sub(PROCESS + PER_CORE * cores as u64);
        tracing::warn!(
            limit,
            hard,
            cores,
            max_connections,
            "the open-file limit allows about {allowed} connections, not the {configured} \
             configured: past them accepting pauses (EMFILE) until connections close; raise \
             the hard limit (ulimit -Hn, LimitNOFILE=) or lower the connection limit"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The warning names the connections configured over all cores; a
    /// limit too large to count them must not overflow that product.
    #[test]
    fn an_unbounded_connection_limit_is_warned_about() {
        let log = tracing_subscriber::fmt().with_test_writer().finish();
        tracing::subscriber::with_default(log, || fit_to_connections(4, usize::MAX));
    }
}
