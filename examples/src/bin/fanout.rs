//! A fan-out HTTP proxy on percore: each request goes to K upstreams
//! concurrently and the answers are joined into one JSON array.
//!
//! ```text
//! fanout --upstream 127.0.0.1:8080 [--upstream HOST:PORT ...] [--width K]
//!        [--policy all|first|quorum:K] [--timeout-ms 15000]
//!        [--connect-timeout-ms 1000] [--max-pending 1024] [--eject-after 5]
//!        [--eject-ms 30000] [--mirror HOST:PORT] [--mirror-max-pending 256]
//!        [--max-response-body 1048576]
//!        [--keepalive-requests 1000] [--port 8081] [--cores 0] [--backend auto] [--stats]
//! ```

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use percore_examples::{
    exit_with, http_config, init_logging, number, parse_common, positive, print_help,
    run_with_stats, CoreReaders, COMMON_USAGE, HTTP_FLAGS, HTTP_USAGE,
};
use percore_handlers::http::{HttpHandler, HttpStatsReader};
use percore_handlers::proxy::{Config, FanOut, Policy, ProxyStatsReader};

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
    "--max-response-body",
];

const USAGE: &str =
    "  --upstream HOST:PORT  an upstream HTTP/1.1 server (repeat for more; at least one)
  --width K             sub-requests per request, round-robin over the upstreams
                        (default: one per upstream; at most 1024)
  --policy P            all (default), first, or quorum:K (K <= width)
  --timeout-ms N        deadline of the whole fan-out (default 15000) -> 504
  --connect-timeout-ms N  deadline of one upstream connect (default 1000)
  --max-pending N       fan-outs in flight per core; more get 503 at once (default 1024)
  --eject-after N       eject an upstream after N requests in a row failed on it:
                        5xx, connect or connection failure, no answer by the
                        deadline; once per request whatever the width (default 5;
                        0 turns ejection off)
  --eject-ms N          first ejection time, x n for the n-th in a row, at most
                        10x (default 30000); at most 10% of upstreams (>= 1) ejected
  --mirror HOST:PORT    also send a copy of each request to this shadow upstream;
                        its answers are discarded, its failures counted and logged
  --mirror-max-pending N  mirrored copies waiting or in flight per core; more are
                        dropped and counted (default 256)
  --max-response-body BYTES  largest upstream body; a larger one fails its branch
                        (502) (default 1048576)
";

/// The end of the help: what `--stats` adds, draining, and loops.
const NOTES: &str = "With --stats, each core's line is followed by its HTTP and proxy counters:
  TIME stats cpu=N http 2xx=.. 3xx=.. 4xx=.. 5xx=.. refused=.. timeouts=.. ...
  TIME stats cpu=N fanout requests=.. failed=.. failed_504=.. sub_requests=.. connects=..
  reuses=.. errors_connect=.. errors_exchange=.. deadline=.. cancelled=.. drained=..
  drain_closed=.. drain_workers=.. stopped=.. loops=.. upstream_5xx=.. ejections=.. ...
Under first and quorum:K, a branch cut off after its sub-request was sent has the
rest of its response read and dropped in the background (until the deadline at
most); its connection is pooled again if that response allows (drained), else
closed (drain_closed). The branches of a request that failed are closed.
A request that already passed through this proxy (its Via carries the proxy's
name, `percore-` and random hex digits) is answered 508 Loop Detected.";

/// The address of `--upstream` or `--mirror`: HOST:PORT, resolved once.
fn resolve(flag: &str, value: &str) -> Result<SocketAddr, String> {
    // A URL is the likeliest mistake (the proxy speaks plain HTTP/1.1 to a
    // host and port, and sends each request's own path): say so, rather
    // than pass on the resolver's "failed to lookup address information".
    if let Some((_, rest)) = value.split_once("://") {
        let authority = rest.split('/').next().unwrap_or(rest);
        return Err(format!(
            "{flag} {value}: a URL scheme is not accepted; expected HOST:PORT, e.g. {authority}"
        ));
    }
    let port = value
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse::<u16>().ok());
    match port {
        None => {
            return Err(format!(
                "{flag} {value}: expected HOST:PORT, e.g. 127.0.0.1:8080"
            ))
        }
        Some(0) => return Err(format!("{flag} {value}: port 0 is no server's port")),
        Some(_) => {}
    }
    value
        .to_socket_addrs()
        .map_err(|e| format!("{flag} {value}: cannot resolve: {e}"))?
        .next()
        .ok_or_else(|| format!("{flag} {value}: resolves to no address"))
}

/// The proxy settings from this binary's own flags.
fn proxy_config(flags: &[(String, String)]) -> Result<Config, String> {
    let upstreams = flags
        .iter()
        .filter(|(f, _)| f == "--upstream")
        .map(|(flag, value)| resolve(flag, value))
        .collect::<Result<Vec<_>, _>>()?;
    let mut config = Config::new(upstreams);
    // Zero is refused by `positive` rather than left to `validate`, whose
    // message names the setting in the library's terms, not the flag.
    for (flag, value) in flags {
        match flag.as_str() {
            "--width" => {
                config.width = usize::try_from(positive(flag, value)?)
                    .map_err(|_| format!("{flag}: {value} is too large"))?;
            }
            "--policy" => {
                config.policy = value
                    .parse()
                    .map_err(|e| format!("{flag}: {e}, got {value:?}"))?;
            }
            "--timeout-ms" => config.deadline = Duration::from_millis(positive(flag, value)?),
            "--connect-timeout-ms" => {
                config.connect_timeout = Duration::from_millis(positive(flag, value)?);
            }
            "--mirror" => config.mirror = Some(resolve(flag, value)?),
            "--mirror-max-pending" => {
                config.mirror_max_pending = usize::try_from(positive(flag, value)?)
                    .map_err(|_| format!("{flag}: {value} is too large"))?;
            }
            "--max-pending" => {
                config.max_pending = usize::try_from(positive(flag, value)?)
                    .map_err(|_| format!("{flag}: {value} is too large"))?;
            }
            "--eject-after" => {
                config.ejection.consecutive_failures =
                    u32::try_from(number::<u64>(flag, value)?)
                        .map_err(|_| format!("{flag}: {value} is too large"))?;
            }
            "--eject-ms" => {
                let base = Duration::from_millis(positive(flag, value)?);
                config.ejection.base_time = base;
                config.ejection.max_time = base.saturating_mul(10);
            }
            "--max-response-body" => {
                config.max_response_body = usize::try_from(positive(flag, value)?)
                    .map_err(|_| format!("{flag}: {value} is too large"))?;
            }
            _ => {}
        }
    }
    config.validate().map_err(|e| {
        // `validate` checks the upstreams and the width before the quorum.
        let quorum_above_width = matches!(config.policy, Policy::Quorum(k) if k > config.width)
            && !config.upstreams.is_empty()
            && (1..=Config::MAX_WIDTH).contains(&config.width);
        if !quorum_above_width {
            return e.to_string();
        }
        // The width nobody set is the number of upstreams: say where the
        // number in the message came from.
        if flags.iter().any(|(f, _)| f == "--width") {
            format!("--policy: {e}")
        } else {
            format!("--policy: {e} (one sub-request per --upstream, as --width is not given)")
        }
    })?;
    Ok(config)
}

/// `n` and the noun, plural unless `n` is 1.
fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// The start-up line: every setting that shapes what clients get.
fn summary(config: &Config) -> String {
    let upstreams: Vec<String> = config.upstreams.iter().map(ToString::to_string).collect();
    let ejection = match config.ejection.consecutive_failures {
        0 => "ejection off".to_owned(),
        n => format!(
            "eject an upstream after {} in a row for {:?} (at most {:?})",
            count(n as usize, "failed request"),
            config.ejection.base_time,
            config.ejection.max_time
        ),
    };
    format!(
        "fanout: {} ({}), width {}, policy {}, deadline {:?}, connect timeout {:?}, \
         max pending {}, {ejection}, mirror {}",
        count(upstreams.len(), "upstream"),
        upstreams.join(", "),
        config.width,
        config.policy,
        config.deadline,
        config.connect_timeout,
        config.max_pending,
        config
            .mirror
            .map_or_else(|| "none".to_owned(), |m| m.to_string())
    )
}

/// Where `--upstream` or `--mirror` is this very proxy, as far as can be
/// told without asking the system for its addresses: the listen port, and
/// the listen address or, when listening on every address, a loopback one.
/// Each request to it would come straight back (answered 508 by the loop
/// detection, but still a misconfiguration worth a line at start-up).
fn own_address_warnings(config: &Config, listen: IpAddr, port: u16) -> Vec<String> {
    // `[::]` takes IPv4 too (unless the system says v6only); `0.0.0.0`
    // takes no IPv6.
    let any_takes = |ip: IpAddr| listen.is_ipv6() || ip.is_ipv4();
    let is_self = |addr: &SocketAddr| {
        let ip = addr.ip();
        port != 0
            && addr.port() == port
            && (ip == listen
                || listen.is_unspecified()
                    && (ip.is_loopback() || ip.is_unspecified())
                    && any_takes(ip))
    };
    let upstreams = config.upstreams.iter().map(|a| ("--upstream", a));
    let mirror = config.mirror.iter().map(|a| ("--mirror", a));
    upstreams
        .chain(mirror)
        .filter(|(_, addr)| is_self(addr))
        .map(|(flag, addr)| {
            format!(
                "fanout: {flag} {addr} is this proxy's own address (it listens on {}): \
                 every request sent there comes back to it, and is answered 508 Loop Detected",
                SocketAddr::new(listen, port)
            )
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print_help(&format!("fanout: a fan-out HTTP proxy on percore (port 8081 unless --port)\n\nOptions:\n{USAGE}\n{HTTP_USAGE}\n{COMMON_USAGE}\n\n{NOTES}"));
        return;
    }
    let flags: Vec<&str> = OWN_FLAGS.iter().chain(HTTP_FLAGS).copied().collect();
    let parsed = parse_common(8081, args, &flags)
        .and_then(|(common, own)| Ok((common, proxy_config(&own)?, http_config(&own)?)));
    let (common, config, http) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => exit_with(
            2,
            &format!("fanout: {e}\n\nOptions:\n{USAGE}\n{HTTP_USAGE}\n{COMMON_USAGE}"),
        ),
    };
    init_logging();
    tracing::info!("{}", summary(&config));
    for warning in own_address_warnings(&config, common.host, common.port) {
        tracing::warn!("{warning}");
    }
    let proxies = CoreReaders::<ProxyStatsReader>::default();
    let fronts = CoreReaders::<HttpStatsReader>::default();
    let (proxy_registry, front_registry) = (proxies.clone(), fronts.clone());
    let factory = move |core: &percore::CoreContext| {
        // Validated above, so this cannot fail; a core without a proxy
        // would be worse than a clear stop at start-up.
        let proxy = FanOut::new(config.clone()).expect("config validated at start-up");
        proxy_registry.register(core.index, proxy.stats_reader());
        let handler = HttpHandler::with_config(proxy, http);
        front_registry.register(core.index, handler.stats_reader());
        handler
    };
    let result = run_with_stats("fanout", &common, factory, move |index| {
        let front = fronts.line(index, |r| format!("http {}", r.snapshot()));
        let proxy = proxies.line(index, |r| format!("fanout {}", r.snapshot()));
        front.into_iter().chain(proxy).collect()
    });
    if let Err(e) = result {
        exit_with(1, &format!("fanout: {e}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an IP address")
    }

    /// The settings from `(flag, value)` pairs, or the message.
    fn parse(flags: &[(&str, &str)]) -> Result<Config, String> {
        let owned: Vec<(String, String)> = flags
            .iter()
            .map(|&(f, v)| (f.to_owned(), v.to_owned()))
            .collect();
        proxy_config(&owned)
    }

    const UP: (&str, &str) = ("--upstream", "127.0.0.1:18410");
    const UP2: (&str, &str) = ("--upstream", "127.0.0.1:18411");

    #[test]
    fn policy_messages() {
        let e = parse(&[UP, ("--policy", "bogus")]).expect_err("bogus");
        assert_eq!(
            e,
            r#"--policy: expected all, first or quorum:K (K >= 1), got "bogus""#
        );
        let c = parse(&[UP, UP2, ("--policy", "FIRST")]).expect("any case");
        assert_eq!(c.policy, Policy::First);
        let c = parse(&[UP, UP2, ("--policy", "Quorum:2")]).expect("any case");
        assert_eq!(c.policy, Policy::Quorum(2));
        // The width nobody set: the message says what it is and why.
        let e = parse(&[UP, UP2, ("--policy", "quorum:5")]).expect_err("above width");
        assert_eq!(
            e,
            "--policy: quorum:5 needs K <= width, and the width is 2 \
             (one sub-request per --upstream, as --width is not given)"
        );
        let e = parse(&[UP, ("--width", "3"), ("--policy", "quorum:5")]).expect_err("above");
        assert_eq!(e, "--policy: quorum:5 needs K <= width, and the width is 3");
        // Other problems come first, as `validate` finds them.
        let e = parse(&[UP, ("--width", "5000"), ("--policy", "quorum:9999")]).expect_err("");
        assert!(e.starts_with("width 5000 is above 1024"), "{e}");
        let e = parse(&[("--policy", "quorum:2")]).expect_err("no upstream");
        assert_eq!(e, "at least one upstream is needed");
    }

    #[test]
    fn zero_is_refused_naming_the_flag() {
        for flag in [
            "--width",
            "--timeout-ms",
            "--connect-timeout-ms",
            "--max-pending",
            "--mirror-max-pending",
            "--eject-ms",
        ] {
            let e = parse(&[UP, ("--mirror", "127.0.0.1:18412"), (flag, "0")]).expect_err(flag);
            assert_eq!(e, format!("{flag}: expected a number from 1, got \"0\""));
        }
    }

    #[test]
    fn width_is_bounded() {
        assert!(parse(&[UP, ("--width", "1024")]).is_ok());
        let e = parse(&[UP, ("--width", "100000")]).expect_err("absurd width");
        assert_eq!(
            e,
            "width 100000 is above 1024, the most sub-requests per request"
        );
    }

    #[test]
    fn upstream_messages() {
        let e = parse(&[("--upstream", "http://127.0.0.1:18410/")]).expect_err("a URL");
        assert_eq!(
            e,
            "--upstream http://127.0.0.1:18410/: a URL scheme is not accepted; \
             expected HOST:PORT, e.g. 127.0.0.1:18410"
        );
        let e = parse(&[("--upstream", "127.0.0.1")]).expect_err("no port");
        assert_eq!(
            e,
            "--upstream 127.0.0.1: expected HOST:PORT, e.g. 127.0.0.1:8080"
        );
        let e = parse(&[UP, ("--mirror", "https://shadow:443")]).expect_err("a URL");
        assert!(
            e.starts_with("--mirror https://shadow:443: a URL scheme"),
            "{e}"
        );
        let c = parse(&[("--upstream", "localhost:18410")]).expect("a host name");
        assert!(c.upstreams[0].ip().is_loopback());
    }

    #[test]
    fn own_address_is_warned_about() {
        let c = parse(&[
            ("--upstream", "127.0.0.1:8081"),
            ("--upstream", "127.0.0.1:8080"),
            ("--mirror", "127.0.0.1:8081"),
        ])
        .expect("valid");
        let warnings = own_address_warnings(&c, ip("0.0.0.0"), 8081);
        assert_eq!(
            warnings,
            [
                "fanout: --upstream 127.0.0.1:8081 is this proxy's own address (it listens on \
                 0.0.0.0:8081): every request sent there comes back to it, and is answered \
                 508 Loop Detected",
                "fanout: --mirror 127.0.0.1:8081 is this proxy's own address (it listens on \
                 0.0.0.0:8081): every request sent there comes back to it, and is answered \
                 508 Loop Detected",
            ]
        );
        // The same address it listens on; not another port, not another
        // host's, not a port chosen by the system (0).
        assert_eq!(own_address_warnings(&c, ip("127.0.0.1"), 8081).len(), 2);
        assert!(own_address_warnings(&c, ip("127.0.0.1"), 9000).is_empty());
        assert!(own_address_warnings(&c, ip("10.1.2.3"), 8081).is_empty());
        assert!(own_address_warnings(&c, ip("0.0.0.0"), 0).is_empty());
        let v6 = parse(&[("--upstream", "[::1]:8081")]).expect("valid");
        assert_eq!(own_address_warnings(&v6, ip("::"), 8081).len(), 1);
        assert!(own_address_warnings(&v6, ip("0.0.0.0"), 8081).is_empty());
        assert_eq!(own_address_warnings(&c, ip("::"), 8081).len(), 2);
    }

    #[test]
    fn max_response_body_sets_the_limit() {
        assert_eq!(parse(&[UP]).expect("valid").max_response_body, 1 << 20);
        let c = parse(&[UP, ("--max-response-body", "100")]).expect("valid");
        assert_eq!(c.max_response_body, 100);
    }

    #[test]
    fn start_up_line() {
        let c = parse(&[UP, ("--eject-after", "0")]).expect("valid");
        let line = summary(&c);
        assert!(
            line.starts_with("fanout: 1 upstream (127.0.0.1:18410), width 1, policy all,"),
            "{line}"
        );
        assert!(line.contains(", ejection off, mirror none"), "{line}");
        let c = parse(&[UP, UP2, ("--eject-after", "1"), ("--eject-ms", "500")]).expect("valid");
        let line = summary(&c);
        assert!(
            line.starts_with("fanout: 2 upstreams (127.0.0.1:18410, 127.0.0.1:18411), width 2,"),
            "{line}"
        );
        assert!(
            line.contains(
                "eject an upstream after 1 failed request in a row for 500ms (at most 5s)"
            ),
            "{line}"
        );
    }
}
