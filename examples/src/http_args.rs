//! The HTTP servers' own flags (`http_echo`, `fanout`): the HTTP layer's
//! limits and timeouts an operator most often sets, over
//! [`Config`]'s defaults.

use std::time::Duration;

use percore_handlers::http::Config;

use crate::{number, positive};

/// Flags of the HTTP servers' front side, interpreted by [`http_config`].
pub const HTTP_FLAGS: &[&str] = &[
    "--keepalive-requests",
    "--max-body",
    "--head-timeout-ms",
    "--body-timeout-ms",
    "--idle-timeout-ms",
    "--stop-grace-ms",
    "--access-log",
];

/// The usage text of [`HTTP_FLAGS`].
pub const HTTP_USAGE: &str =
    "  --keepalive-requests N  requests served on one connection, the last with
                        `Connection: close` (default 1000, as nginx; 0 = no limit)
  --max-body BYTES      largest request body; more is answered 413 (default 1048576)
  --head-timeout-ms N   time to receive a request head, then 408 (default 10000)
  --body-timeout-ms N   time to receive a request body, then 408 (default 30000)
  --idle-timeout-ms N   a kept-alive connection idle this long is closed (default 30000)
  --stop-grace-ms N     at a stop, an idle connection waits this long for one last
                        request (default 1000; 0 closes it at once)
  --access-log          log a line per response (client, method, target, status,
                        microseconds) under percore_handlers::http::access";

/// What `--stats` adds for an HTTP server, for the end of its help.
pub const HTTP_STATS_USAGE: &str =
    "With --stats, each core's line is followed by the responses it sent:
  TIME stats cpu=N http 2xx=.. 3xx=.. 4xx=.. 5xx=.. refused=.. timeouts=..
  service_errors=.. cut_off=..";

/// The HTTP layer's settings: the defaults, changed by the [`HTTP_FLAGS`]
/// among `own` (other flags are left to the caller).
///
/// # Errors
///
/// A message for the user, naming the flag, when a value is not a number
/// or is zero where zero would close every connection.
pub fn http_config(own: &[(String, String)]) -> Result<Config, String> {
    let mut config = Config::default();
    for (flag, value) in own {
        match flag.as_str() {
            "--keepalive-requests" => {
                let n: u32 = number(flag, value)?;
                config.max_requests = if n == 0 { u32::MAX } else { n };
            }
            "--max-body" => config.limits.max_body = number(flag, value)?,
            "--head-timeout-ms" => {
                config.head_timeout = Duration::from_millis(positive(flag, value)?)
            }
            "--body-timeout-ms" => {
                config.body_timeout = Duration::from_millis(positive(flag, value)?)
            }
            "--idle-timeout-ms" => {
                config.idle_timeout = Duration::from_millis(positive(flag, value)?)
            }
            "--stop-grace-ms" => config.stop_grace = Duration::from_millis(number(flag, value)?),
            "--access-log" => config.access_log = true,
            _ => {}
        }
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(flags: &[(&str, &str)]) -> Result<Config, String> {
        let owned: Vec<(String, String)> = flags
            .iter()
            .map(|&(f, v)| (f.to_owned(), v.to_owned()))
            .collect();
        http_config(&owned)
    }

    #[test]
    fn flags_set_the_config() {
        let config = parse(&[
            ("--keepalive-requests", "0"),
            ("--max-body", "5000000"),
            ("--head-timeout-ms", "2000"),
            ("--body-timeout-ms", "3000"),
            ("--idle-timeout-ms", "4000"),
            ("--stop-grace-ms", "0"),
            ("--access-log", ""),
        ])
        .expect("valid flags");
        assert_eq!(config.max_requests, u32::MAX);
        assert_eq!(config.limits.max_body, 5_000_000);
        assert_eq!(config.head_timeout, Duration::from_millis(2000));
        assert_eq!(config.body_timeout, Duration::from_millis(3000));
        assert_eq!(config.idle_timeout, Duration::from_millis(4000));
        assert_eq!(config.stop_grace, Duration::ZERO);
        assert!(config.access_log);
        assert_eq!(parse(&[]), Ok(Config::default()));
    }

    #[test]
    fn bad_values_name_their_flag() {
        for flag in [
            "--head-timeout-ms",
            "--body-timeout-ms",
            "--idle-timeout-ms",
        ] {
            assert_eq!(
                parse(&[(flag, "0")]),
                Err(format!("{flag}: expected a number from 1, got \"0\""))
            );
        }
        for flag in ["--max-body", "--stop-grace-ms", "--keepalive-requests"] {
            assert_eq!(
                parse(&[(flag, "-1")]),
                Err(format!("{flag}: expected a number, got \"-1\""))
            );
        }
    }
}
