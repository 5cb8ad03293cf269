//! A fan-out HTTP proxy on percore: each request goes to K upstreams
//! concurrently and the answers are joined into one JSON array.
//!
//! ```text
//! fanout --upstream 127.0.0.1:8080 [--upstream HOST:PORT ...] [--width K]
//!        [--policy all|first|quorum:K] [--timeout-ms 15000]
//!        [--connect-timeout-ms 1000] [--max-pending 1024] [--eject-after 5]
//!        [--eject-ms 30000] [--mirror HOST:PORT] [--mirror-max-pending 256]
//!        [--max-response-body 1048576] [--upstream-ca FILE [--upstream-server-name NAME]]
//!        [--keepalive-requests 1000] [--port 8081] [--cores 0] [--backend auto] [--stats]
//! ```

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::{Args, Parser};
use percore::net::Endpoint;
use percore_examples::{
    exit_with, init_logging, number, parse_args, positive, positive_millis, run_with_metrics,
    usage_error, CommonArgs, CoreReaders, HttpArgs,
};
use percore_handlers::http::{HttpHandler, HttpStatsReader};
use percore_handlers::proxy::{Config, FanOut, Policy, ProxyStatsReader, UpstreamTls};

/// The default `--port`.
const PORT: &str = "8081";

/// A fan-out HTTP proxy on percore: each request goes to K upstreams at
/// once and their answers are joined into one JSON array.
#[derive(Debug, Parser)]
#[command(name = "fanout", after_help = NOTES)]
struct Cli {
    #[command(flatten)]
    proxy: ProxyArgs,
    #[command(flatten)]
    http: HttpArgs,
    #[command(flatten)]
    common: CommonArgs,
}

/// The proxy's own options, over [`Config::new`]'s defaults (a test checks
/// that the defaults shown are the library's).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Proxy options")]
struct ProxyArgs {
    /// An upstream HTTP/1.1 server, HOST:PORT or unix:PATH (repeat for
    /// more; at least one)
    #[arg(long, value_name = "HOST:PORT", required = true, value_parser = upstream)]
    upstream: Vec<Endpoint>,
    /// Speak HTTPS to the upstreams, trusting the certificate authorities
    /// in FILE (PEM); each upstream's certificate is verified
    #[arg(long, value_name = "FILE")]
    upstream_ca: Option<std::path::PathBuf>,
    /// The name every upstream's certificate must carry (and SNI)
    /// [default: each upstream's IP address]
    #[arg(long, value_name = "NAME", requires = "upstream_ca")]
    upstream_server_name: Option<String>,
    /// Sub-requests per request, round-robin over the upstreams (at most
    /// 1024) [default: one per upstream]
    #[arg(long, value_name = "K", value_parser = positive::<usize>)]
    width: Option<usize>,
    /// all, first, or quorum:K (K <= width)
    #[arg(long, value_name = "P", default_value = "all", value_parser = policy)]
    policy: Policy,
    /// Deadline of the whole fan-out, in ms, then 504
    #[arg(long = "timeout-ms", value_name = "N", default_value = "15000", value_parser = positive_millis)]
    deadline: Duration,
    /// Deadline of one upstream connect, in ms
    #[arg(long = "connect-timeout-ms", value_name = "N", default_value = "1000", value_parser = positive_millis)]
    connect_timeout: Duration,
    /// Fan-outs in flight per core; more get 503 at once
    #[arg(long, value_name = "N", default_value = "1024", value_parser = positive::<usize>)]
    max_pending: usize,
    /// Eject an upstream after N requests in a row failed on it (5xx,
    /// connect or connection failure, no answer by the deadline; once per
    /// request whatever the width; 0 turns ejection off)
    #[arg(long, value_name = "N", default_value = "5", value_parser = number::<u32>)]
    eject_after: u32,
    /// First ejection time in ms, x n for the n-th in a row, at most 10x; at
    /// most 10% of upstreams (>= 1) are ejected at once
    #[arg(long = "eject-ms", value_name = "N", default_value = "30000", value_parser = positive_millis)]
    eject_time: Duration,
    /// Also send a copy of each request to this shadow upstream; its
    /// answers are discarded, its failures counted and logged
    #[arg(long, value_name = "HOST:PORT", value_parser = mirror)]
    mirror: Option<Endpoint>,
    /// Mirrored copies waiting or in flight per core; more are dropped and
    /// counted
    #[arg(long, value_name = "N", default_value = "256", value_parser = positive::<usize>)]
    mirror_max_pending: usize,
    /// Largest upstream response body in bytes; a larger one fails its
    /// branch (502)
    #[arg(long, value_name = "BYTES", default_value = "1048576", value_parser = positive::<usize>)]
    max_response_body: usize,
}

/// The end of the help: what `--stats` adds, draining, and loops.
const NOTES: &str = "\
With --stats, each core's line is followed by its HTTP and proxy counters:
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

/// `--policy`'s value.
fn policy(value: &str) -> Result<Policy, String> {
    value
        .parse()
        .map_err(|e: percore_handlers::proxy::ConfigError| e.to_string())
}

/// `--upstream`'s address: see [`endpoint`].
fn upstream(value: &str) -> Result<Endpoint, String> {
    endpoint(value, " (and --upstream-ca FILE for HTTPS)")
}

/// `--mirror`'s address: see [`endpoint`].
fn mirror(value: &str) -> Result<Endpoint, String> {
    endpoint(value, " (the mirror speaks plain HTTP)")
}

/// The address of `--upstream` or `--mirror`: HOST:PORT, resolved once,
/// or `unix:PATH` for a Unix socket. `https` ends the message for an
/// `https://` URL.
fn endpoint(value: &str, https: &str) -> Result<Endpoint, String> {
    if let Some(path) = value.strip_prefix("unix:") {
        if path.is_empty() {
            return Err("expected unix:PATH, e.g. unix:/run/app.sock".to_owned());
        }
        return Ok(Endpoint::Unix(path.parse().unwrap_or_else(|e| match e {})));
    }
    // A URL is the likeliest mistake (the proxy speaks HTTP/1.1 to a host
    // and port, and sends each request's own path): say so, rather
    // than pass on the resolver's "failed to lookup address information".
    if let Some((scheme, rest)) = value.split_once("://") {
        let authority = rest.split('/').next().unwrap_or(rest);
        let https = if scheme.eq_ignore_ascii_case("https") {
            https
        } else {
            ""
        };
        return Err(format!(
            "a URL scheme is not accepted; expected HOST:PORT, e.g. {authority}{https}"
        ));
    }
    let port = value
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse::<u16>().ok());
    match port {
        None => return Err("expected HOST:PORT, e.g. 127.0.0.1:8080".to_owned()),
        Some(0) => return Err("port 0 is no server's port".to_owned()),
        Some(_) => {}
    }
    value
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve: {e}"))?
        .next()
        .map(Endpoint::Tcp)
        .ok_or_else(|| "resolves to no address".to_owned())
}

/// The proxy settings from the proxy's options, checked together.
fn proxy_config(args: &ProxyArgs) -> Result<Config, String> {
    let mut config = Config::new(args.upstream.clone());
    if let Some(ca) = &args.upstream_ca {
        let tls = percore::tls::client_config(ca).map_err(|e| format!("--upstream-ca: {e}"))?;
        let mut tls = UpstreamTls::new(tls);
        tls.server_name.clone_from(&args.upstream_server_name);
        config.upstream_tls = Some(tls);
    }
    if let Some(width) = args.width {
        config.width = width;
    }
    config.policy = args.policy;
    config.deadline = args.deadline;
    config.connect_timeout = args.connect_timeout;
    config.max_pending = args.max_pending;
    config.ejection.consecutive_failures = args.eject_after;
    config.ejection.base_time = args.eject_time;
    config.ejection.max_time = args.eject_time.saturating_mul(10);
    config.mirror = args.mirror.clone();
    config.mirror_max_pending = args.mirror_max_pending;
    config.max_response_body = args.max_response_body;
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
        if args.width.is_some() {
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
    let tls = match &config.upstream_tls {
        None => String::new(),
        Some(tls) => match &tls.server_name {
            Some(name) => format!(" over TLS as {name}"),
            None => " over TLS".to_owned(),
        },
    };
    format!(
        "fanout: {} ({}){tls}, width {}, policy {}, deadline {:?}, connect timeout {:?}, \
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
            .as_ref()
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
    let is_self = |endpoint: &Endpoint| {
        let Endpoint::Tcp(addr) = endpoint else {
            return false;
        };
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
    let cli: Cli = parse_args(PORT);
    let config = proxy_config(&cli.proxy).unwrap_or_else(|e| usage_error::<Cli>(PORT, e));
    let (common, http) = (cli.common, cli.http.config());
    init_logging();
    tracing::info!("{}", summary(&config));
    for warning in own_address_warnings(&config, common.host, common.port) {
        tracing::warn!("{warning}");
    }
    let proxies = CoreReaders::<ProxyStatsReader>::default();
    let fronts = CoreReaders::<HttpStatsReader>::default();
    let (proxy_registry, front_registry) = (proxies.clone(), fronts.clone());
    let metrics = percore_handlers::metrics::Metrics::new(percore::Readiness::new());
    let exported = metrics.clone();
    let factory = move |core: &percore::CoreContext| {
        // Validated above, so this cannot fail; a core without a proxy
        // would be worse than a clear stop at start-up.
        let proxy = FanOut::new(config.clone()).expect("config validated at start-up");
        proxy_registry.register(core.index, proxy.stats_reader());
        exported.register_proxy(core, proxy.stats_reader());
        let handler = HttpHandler::with_config(proxy, http);
        front_registry.register(core.index, handler.stats_reader());
        exported.register_http(core, handler.stats_reader());
        handler
    };
    let result = run_with_metrics("fanout", &common, &metrics, factory, move |index| {
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
    use percore_examples::parse_args_from;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an IP address")
    }

    /// The settings from the command line `args`, or the message.
    fn parse(args: &[&str]) -> Result<Config, String> {
        let args = std::iter::once("fanout").chain(args.iter().copied());
        let cli = parse_args_from::<Cli, _>(PORT, args).map_err(|e| e.to_string())?;
        proxy_config(&cli.proxy)
    }

    const UP: &str = "--upstream=127.0.0.1:18410";
    const UP2: &str = "--upstream=127.0.0.1:18411";

    #[test]
    fn the_help_is_consistent() {
        percore_examples::command::<Cli>(PORT).debug_assert();
    }

    #[test]
    fn the_defaults_shown_are_the_librarys() {
        let config = parse(&[UP, UP2]).expect("valid");
        let mut library = Config::new(config.upstreams.clone());
        // Random per process start: the one setting without a default.
        library.pseudonym.clone_from(&config.pseudonym);
        assert_eq!(config, library);
    }

    #[test]
    fn policy_messages() {
        let e = parse(&[UP, "--policy", "bogus"]).expect_err("bogus");
        assert!(
            e.contains("'bogus' for '--policy <P>': expected all, first or quorum:K (K >= 1)"),
            "{e}"
        );
        let c = parse(&[UP, UP2, "--policy", "FIRST"]).expect("any case");
        assert_eq!(c.policy, Policy::First);
        let c = parse(&[UP, UP2, "--policy", "Quorum:2"]).expect("any case");
        assert_eq!(c.policy, Policy::Quorum(2));
        // The width nobody set: the message says what it is and why.
        let e = parse(&[UP, UP2, "--policy", "quorum:5"]).expect_err("above width");
        assert_eq!(
            e,
            "--policy: quorum:5 needs K <= width, and the width is 2 \
             (one sub-request per --upstream, as --width is not given)"
        );
        let e = parse(&[UP, "--width", "3", "--policy", "quorum:5"]).expect_err("above");
        assert_eq!(e, "--policy: quorum:5 needs K <= width, and the width is 3");
        // Other problems come first, as `validate` finds them.
        let e = parse(&[UP, "--width", "5000", "--policy", "quorum:9999"]).expect_err("");
        assert!(e.starts_with("width 5000 is above 1024"), "{e}");
        let e = parse(&["--policy", "quorum:2"]).expect_err("no upstream");
        assert!(e.contains("required") && e.contains("--upstream"), "{e}");
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
            let e = parse(&[UP, "--mirror=127.0.0.1:18412", flag, "0"]).expect_err(flag);
            assert!(
                e.contains(&format!("'0' for '{flag} <")) && e.contains("expected a number from 1"),
                "{e}"
            );
        }
    }

    #[test]
    fn width_is_bounded() {
        assert!(parse(&[UP, "--width", "1024"]).is_ok());
        let e = parse(&[UP, "--width", "100000"]).expect_err("absurd width");
        assert_eq!(
            e,
            "width 100000 is above 1024, the most sub-requests per request"
        );
    }

    #[test]
    fn upstream_messages() {
        let e = parse(&["--upstream", "http://127.0.0.1:18410/"]).expect_err("a URL");
        assert!(
            e.contains(
                "'http://127.0.0.1:18410/' for '--upstream <HOST:PORT>': a URL scheme is not \
                 accepted; expected HOST:PORT, e.g. 127.0.0.1:18410"
            ),
            "{e}"
        );
        let e = parse(&["--upstream", "127.0.0.1"]).expect_err("no port");
        assert!(
            e.contains("'127.0.0.1' for '--upstream <HOST:PORT>': expected HOST:PORT"),
            "{e}"
        );
        let e = parse(&[UP, "--mirror", "https://shadow:443"]).expect_err("a URL");
        assert!(
            e.contains("'https://shadow:443' for '--mirror <HOST:PORT>': a URL scheme")
                && e.contains("e.g. shadow:443 (the mirror speaks plain HTTP)"),
            "{e}"
        );
        let e = parse(&["--upstream", "https://127.0.0.1:8443"]).expect_err("a URL");
        assert!(
            e.contains("e.g. 127.0.0.1:8443 (and --upstream-ca FILE for HTTPS)"),
            "{e}"
        );
        let e = parse(&[UP, "--upstream-server-name", "api"]).expect_err("no CA");
        assert!(e.contains("--upstream-ca <FILE>"), "{e}");
        let e = parse(&[UP, "--upstream-ca", "/nonexistent/ca.pem"]).expect_err("no file");
        assert!(
            e.contains("--upstream-ca: ") && e.contains("/nonexistent/ca.pem"),
            "{e}"
        );
        let c = parse(&["--upstream", "localhost:18410"]).expect("a host name");
        assert!(matches!(&c.upstreams[0], Endpoint::Tcp(a) if a.ip().is_loopback()));
    }

    #[test]
    fn own_address_is_warned_about() {
        let c = parse(&[
            "--upstream=127.0.0.1:8081",
            "--upstream=127.0.0.1:8080",
            "--mirror=127.0.0.1:8081",
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
        let v6 = parse(&["--upstream=[::1]:8081"]).expect("valid");
        assert_eq!(own_address_warnings(&v6, ip("::"), 8081).len(), 1);
        assert!(own_address_warnings(&v6, ip("0.0.0.0"), 8081).is_empty());
        assert_eq!(own_address_warnings(&c, ip("::"), 8081).len(), 2);
    }

    #[test]
    fn max_response_body_sets_the_limit() {
        assert_eq!(parse(&[UP]).expect("valid").max_response_body, 1 << 20);
        let c = parse(&[UP, "--max-response-body=100"]).expect("valid");
        assert_eq!(c.max_response_body, 100);
    }

    #[test]
    fn start_up_line() {
        let c = parse(&[UP, "--eject-after=0"]).expect("valid");
        let line = summary(&c);
        assert!(
            line.starts_with("fanout: 1 upstream (127.0.0.1:18410), width 1, policy all,"),
            "{line}"
        );
        assert!(line.contains(", ejection off, mirror none"), "{line}");
        let c = parse(&[UP, UP2, "--eject-after=1", "--eject-ms=500"]).expect("valid");
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
