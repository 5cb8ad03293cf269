//! A fan-out HTTP proxy on percore: each request goes to K upstreams
//! concurrently and the answers are joined into one JSON array.
//!
//! ```text
//! fanout --upstream 127.0.0.1:8080 [--upstream HOST:PORT ...] [--width K]
//!        [--policy all|first|quorum:K] [--timeout-ms 15000]
//!        [--connect-timeout-ms 1000] [--max-pending 1024] [--eject-after 5]
//!        [--eject-ms 30000] [--mirror HOST:PORT] [--mirror-max-pending 256]
//!        [--keepalive-requests 1000] [--port 8081] [--cores 0] [--backend auto] [--stats]
//! ```

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use percore_examples::{
    http_config, init_logging, parse_common, run, COMMON_USAGE, HTTP_FLAGS, HTTP_USAGE,
};
use percore_handlers::http::HttpHandler;
use percore_handlers::proxy::{Config, FanOut};

const OWN_FLAGS: &[&str] = &[
    "--upstream",
    "--width",
    "--policy",
    "--timeout-ms",
    "--connect-timeout-ms",
    "--max-pending",
    "--eject-after",
    "--eject-ms",
    "--mirror",
    "--mirror-max-pending",
];

const USAGE: &str =
    "  --upstream HOST:PORT  an upstream HTTP/1.1 server (repeat for more; at least one)
  --width K             sub-requests per request, round-robin over the upstreams
                        (default: one per upstream)
  --policy P            all (default), first, or quorum:K
  --timeout-ms N        deadline of the whole fan-out (default 15000) -> 504
  --connect-timeout-ms N  deadline of one upstream connect (default 1000)
  --max-pending N       fan-outs in flight per core; more get 503 at once (default 1024)
  --eject-after N       eject an upstream after N requests in a row failed on it:
                        5xx, connect or connection failure, once per request
                        whatever the width (default 5; 0 turns ejection off)
  --eject-ms N          first ejection time, x n for the n-th in a row, at most
                        10x (default 30000); at most 10% of upstreams (>= 1) ejected
  --mirror HOST:PORT    also send a copy of each request to this shadow upstream;
                        its answers are discarded, its failures only counted
  --mirror-max-pending N  mirrored copies waiting or in flight per core; more are
                        dropped and counted (default 256)";

/// The proxy settings from this binary's own flags.
fn proxy_config(flags: &[(String, String)]) -> Result<Config, String> {
    let resolve = |flag: &str, value: &str| -> Result<SocketAddr, String> {
        value
            .to_socket_addrs()
            .map_err(|e| format!("{flag} {value}: {e}"))?
            .next()
            .ok_or_else(|| format!("{flag} {value}: no address"))
    };
    let upstreams = flags
        .iter()
        .filter(|(f, _)| f == "--upstream")
        .map(|(flag, value)| resolve(flag, value))
        .collect::<Result<Vec<_>, _>>()?;
    let mut config = Config::new(upstreams);
    let number = |flag: &str, value: &str| -> Result<u64, String> {
        value
            .parse::<u64>()
            .map_err(|_| format!("{flag}: expected a number, got {value:?}"))
    };
    for (flag, value) in flags {
        match flag.as_str() {
            "--width" => {
                config.width = usize::try_from(number(flag, value)?)
                    .map_err(|_| format!("{flag}: too large"))?;
            }
            "--policy" => config.policy = value.parse().map_err(|e| format!("{flag}: {e}"))?,
            "--timeout-ms" => config.deadline = Duration::from_millis(number(flag, value)?),
            "--connect-timeout-ms" => {
                config.connect_timeout = Duration::from_millis(number(flag, value)?);
            }
            "--mirror" => config.mirror = Some(resolve(flag, value)?),
            "--mirror-max-pending" => {
                config.mirror_max_pending = usize::try_from(number(flag, value)?)
                    .map_err(|_| format!("{flag}: too large"))?;
            }
            "--max-pending" => {
                config.max_pending = usize::try_from(number(flag, value)?)
                    .map_err(|_| format!("{flag}: too large"))?;
            }
            "--eject-after" => {
                config.ejection.consecutive_failures = u32::try_from(number(flag, value)?)
                    .map_err(|_| format!("{flag}: too large"))?;
            }
            "--eject-ms" => {
                let base = Duration::from_millis(number(flag, value)?);
                config.ejection.base_time = base;
                config.ejection.max_time = base.saturating_mul(10);
            }
            _ => {}
        }
    }
    config.validate().map_err(|e| e.to_string())?;
    Ok(config)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("fanout: a fan-out HTTP proxy on percore\n\nOptions:\n{USAGE}\n{HTTP_USAGE}\n{COMMON_USAGE}");
        return;
    }
    let flags: Vec<&str> = OWN_FLAGS.iter().chain(HTTP_FLAGS).copied().collect();
    let parsed = parse_common(8081, args, &flags)
        .and_then(|(common, own)| Ok((common, proxy_config(&own)?, http_config(&own)?)));
    let (common, config, http) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("fanout: {e}\n\nOptions:\n{USAGE}\n{HTTP_USAGE}\n{COMMON_USAGE}");
            std::process::exit(2);
        }
    };
    init_logging();
    tracing::info!(
        "fanout: {} upstreams, width {}, policy {}, deadline {:?}, connect timeout {:?}, \
         max pending {}, eject after {} failed requests for {:?}, mirror {}",
        config.upstreams.len(),
        config.width,
        config.policy,
        config.deadline,
        config.connect_timeout,
        config.max_pending,
        config.ejection.consecutive_failures,
        config.ejection.base_time,
        config
            .mirror
            .map_or_else(|| "none".to_owned(), |m| m.to_string())
    );
    let result = run("fanout", &common, move |_core| {
        // Validated above, so this cannot fail; a core without a proxy
        // would be worse than a clear stop at start-up.
        HttpHandler::with_config(
            FanOut::new(config.clone()).expect("config validated at start-up"),
            http,
        )
    });
    if let Err(e) = result {
        eprintln!("fanout: {e}");
        std::process::exit(1);
    }
}
