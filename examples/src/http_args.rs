//! The HTTP servers' own options (`http_echo`, `fanout`): the HTTP layer's
//! limits and timeouts an operator most often sets, over [`Config`]'s
//! defaults (a test checks that the defaults shown are the library's).

use std::time::Duration;

use clap::Args;
use percore_handlers::http::Config;

use crate::{millis, number, positive_millis};

/// The HTTP layer's options; [`HttpArgs::config`] turns them into a
/// [`Config`].
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "HTTP options")]
pub struct HttpArgs {
    /// Requests served on one connection, the last with `Connection: close`
    /// (as nginx's keepalive_requests; 0 = no limit)
    #[arg(long, value_name = "N", default_value = "1000", value_parser = number::<u32>)]
    pub keepalive_requests: u32,
    /// Largest request body in bytes; a larger one is answered 413
    #[arg(long, value_name = "BYTES", default_value = "1048576", value_parser = number::<u64>)]
    pub max_body: u64,
    /// Time to receive a request head, in ms, then 408
    #[arg(long = "head-timeout-ms", value_name = "N", default_value = "10000", value_parser = positive_millis)]
    pub head_timeout: Duration,
    /// Time to receive a request body, in ms, then 408
    #[arg(long = "body-timeout-ms", value_name = "N", default_value = "30000", value_parser = positive_millis)]
    pub body_timeout: Duration,
    /// A kept-alive connection idle this long (ms) is closed
    #[arg(long = "idle-timeout-ms", value_name = "N", default_value = "30000", value_parser = positive_millis)]
    pub idle_timeout: Duration,
    /// At a stop, an idle connection waits this long (ms) for one last
    /// request (0 closes it at once)
    #[arg(long = "stop-grace-ms", value_name = "N", default_value = "1000", value_parser = millis)]
    pub stop_grace: Duration,
    /// Log a line per response (client, method, target, status,
    /// microseconds) under the target percore_handlers::http::access
    #[arg(long)]
    pub access_log: bool,
    /// Shed load: once a core's ready work has waited longer than N ms,
    /// answer new requests 503 with Retry-After: 1, without calling the
    /// service (0 = off)
    #[arg(long = "shed-ms", value_name = "N", default_value = "0", value_parser = millis)]
    pub shed: Duration,
    /// With --shed-ms: answer at once a client refused again before its
    /// Retry-After passed, instead of when it passes (behind a balancer
    /// that pools its connections)
    #[arg(long)]
    pub shed_no_hold: bool,
}

impl HttpArgs {
    /// The HTTP layer's settings: [`Config::default`], changed by these
    /// options.
    pub fn config(&self) -> Config {
        let mut config = Config::default();
        config.max_requests = match self.keepalive_requests {
            0 => u32::MAX,
            n => n,
        };
        config.limits.max_body = self.max_body;
        config.head_timeout = self.head_timeout;
        config.body_timeout = self.body_timeout;
        config.idle_timeout = self.idle_timeout;
        config.stop_grace = self.stop_grace;
        config.access_log = self.access_log;
        config.shed_queue_delay = (!self.shed.is_zero()).then_some(self.shed);
        config.shed_hold = !self.shed_no_hold;
        config
    }
}

/// What `--stats` adds for an HTTP server, for the end of its help.
pub const HTTP_STATS_NOTE: &str = "\
With --stats, each core's line is followed by the responses it sent:
  TIME stats cpu=N http 2xx=.. 3xx=.. 4xx=.. 5xx=.. refused=.. timeouts=..
  service_errors=.. cut_off=.. shed=.. shed_held=..";

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        http: HttpArgs,
    }

    fn parse(args: &[&str]) -> Result<Config, String> {
        let args = std::iter::once("test").chain(args.iter().copied());
        Cli::try_parse_from(args)
            .map(|cli| cli.http.config())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_defaults_shown_are_the_librarys() {
        assert_eq!(parse(&[]), Ok(Config::default()));
    }

    #[test]
    fn options_set_the_config() {
        let config = parse(&[
            "--keepalive-requests=0",
            "--max-body=5000000",
            "--head-timeout-ms=2000",
            "--body-timeout-ms=3000",
            "--idle-timeout-ms=4000",
            "--stop-grace-ms=0",
            "--access-log",
        ])
        .expect("valid options");
        assert_eq!(config.max_requests, u32::MAX);
        assert_eq!(config.limits.max_body, 5_000_000);
        assert_eq!(config.head_timeout, Duration::from_millis(2000));
        assert_eq!(config.body_timeout, Duration::from_millis(3000));
        assert_eq!(config.idle_timeout, Duration::from_millis(4000));
        assert_eq!(config.stop_grace, Duration::ZERO);
        assert!(config.access_log);
    }

    #[test]
    fn bad_values_name_their_option() {
        for flag in [
            "--head-timeout-ms",
            "--body-timeout-ms",
            "--idle-timeout-ms",
        ] {
            let e = parse(&[flag, "0"]).expect_err(flag);
            assert!(
                e.contains(&format!("'0' for '{flag} <N>': expected a number from 1")),
                "{e}"
            );
        }
        for flag in ["--max-body", "--stop-grace-ms", "--keepalive-requests"] {
            let e = parse(&[&format!("{flag}=-1")]).expect_err(flag);
            assert!(e.contains(&format!("'{flag} <")), "{e}");
            assert!(e.contains("expected a number"), "{e}");
        }
    }
}
