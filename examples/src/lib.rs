//! The command line shared by the example servers (`echo`, `http_echo`,
//! `fanout`, `counter`): `--port`, `--cores`, `--backend`, `--stats` and
//! the rest of [`CommonArgs`], the HTTP servers' [`HttpArgs`], and the
//! common start-up (logging, stats lines, signals).
//!
//! Each binary declares its own options with `clap`'s derive, flattening
//! these structs into its own, so that `--help` is generated from the
//! code that reads the options.

use std::ffi::OsString;
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::str::FromStr;
use std::time::Duration;

use clap::{error::ErrorKind, Args, Command, CommandFactory, Parser};
use percore::net::UnixAddr;
use percore::{Backend, CoreContext, Handler, Readiness, Server, Steering};
use percore_handlers::http::HttpHandler;
use percore_handlers::metrics::{Admin, Metrics};

#[cfg(feature = "grpc")]
pub mod grpc;
mod http_args;
mod stats_lines;
pub mod statsd;
pub use http_args::{HttpArgs, HTTP_STATS_NOTE};
pub use stats_lines::CoreReaders;

/// Options every example server takes. A binary flattens them into its
/// own options (`#[command(flatten)]`) and parses with [`parse_args`],
/// which gives `--port` the binary's default.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Server options")]
pub struct CommonArgs {
    /// TCP port to listen on (0 picks a free one)
    #[arg(long, value_name = "N", value_parser = number::<u16>)]
    pub port: u16,
    /// Also listen on this Unix socket (a path, or @NAME for an abstract
    /// name), with the same handler: for nginx or a sidecar on this host
    #[arg(long, value_name = "PATH")]
    pub unix: Option<UnixAddr>,
    /// The Unix socket file's permission bits, in octal (e.g. 660)
    #[arg(long, value_name = "MODE", value_parser = octal_mode, requires = "unix")]
    pub unix_mode: Option<u32>,
    /// Whether the binary's handler speaks HTTP/2: then TLS offers `h2`
    /// by ALPN before `http/1.1`. Set by the binary, not on the command
    /// line.
    #[arg(skip)]
    pub offer_h2: bool,
    /// Serve TLS on the TCP port with this certificate chain (PEM, leaf
    /// first); needs --tls-key
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The private key of --tls-cert (PEM)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Require a client certificate signed by an authority of this file
    /// (PEM)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<std::path::PathBuf>,
    /// TLS handshakes in progress per core; when all are taken a new
    /// connection takes the place of the oldest one that has sent nothing
    /// (else the oldest), which is closed
    #[arg(long, value_name = "N", default_value = "1024", value_parser = positive::<usize>)]
    pub tls_max_handshakes: usize,
    /// Time a TLS client has for its whole handshake, in ms
    #[arg(long = "tls-handshake-ms", value_name = "N", default_value = "10000", value_parser = positive_millis)]
    pub tls_handshake_timeout: Duration,
    /// Time a TLS connection may stay silent before the first byte of its
    /// handshake, in ms
    #[arg(long = "tls-first-byte-ms", value_name = "N", default_value = "5000", value_parser = positive_millis)]
    pub tls_first_byte_timeout: Duration,
    /// Address or name to bind, e.g. 0.0.0.0 for every IPv4 interface, ::1,
    /// localhost
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1", value_parser = resolve_host)]
    pub host: IpAddr,
    /// CPUs to run on, e.g. 0 or 0,1 or 0-3 [default: all available]
    #[arg(long, value_name = "LIST", value_parser = cpu_list)]
    pub cores: Option<::std::vec::Vec<usize>>,
    /// Executor backend: uring, epoll or auto (PERCORE_BACKEND overrides)
    #[arg(long, value_name = "B", default_value = "auto")]
    pub backend: Backend,
    /// Open connections per core before accept pauses
    #[arg(long, value_name = "N", default_value = "10000", value_parser = positive::<usize>)]
    pub max_connections: usize,
    /// Graceful-stop drain deadline, in ms
    #[arg(long = "drain-ms", value_name = "N", default_value = "10000", value_parser = millis)]
    pub drain: Duration,
    /// io_uring: a busy core waits up to N µs for a batch of completions
    /// (fewer syscalls with many connections, slower with a few dozen busy
    /// ones; 0 = off, at most 1000000)
    #[arg(long = "wait-batch-us", value_name = "N", default_value = "0", value_parser = wait_batch)]
    pub wait_batch: Duration,
    /// Print a line of counters per core every second, after the time
    /// (RFC 3339 UTC, as the log's lines)
    #[arg(long)]
    pub stats: bool,
    /// Share the port with the server already on it, to replace it without
    /// refusing connections: start this, then stop that one (same user; see
    /// net.ipv4.tcp_migrate_req)
    #[arg(long)]
    pub take_over: bool,
    /// Steer new connections to the cores with room (a BPF program drawing
    /// each one's core, weighted by the cores' idle CPU and open
    /// connections) instead of the kernel's hash of their addresses
    #[arg(long)]
    pub steer: bool,
    /// Move live connections from a hot core to the least busy one at
    /// request boundaries (HTTP/1.1 keep-alive connections; see
    /// docs/pressure.md, "Moving connections")
    #[arg(long)]
    pub move_connections: bool,
    /// Serve /metrics (Prometheus), /healthz and /readyz on this port (0
    /// picks a free one), on --admin-host
    #[arg(long, value_name = "PORT", value_parser = number::<u16>)]
    pub admin: Option<u16>,
    /// The address of the --admin port (e.g. 0.0.0.0 for a balancer on
    /// another host)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1", value_parser = resolve_host)]
    pub admin_host: IpAddr,
    /// On a stop, answer /readyz 503 and keep serving for N ms before
    /// closing the listeners, so a balancer stops sending first
    #[arg(long = "unready-ms", value_name = "N", default_value = "0", value_parser = millis)]
    pub unready_delay: Duration,
    /// Report a loop turn that keeps a core longer than N ms (a handler
    /// that blocks): once per stall, a WARN line with its duration and a
    /// backtrace, and percore_stalls_total; 0 = off
    #[arg(long = "stall-ms", value_name = "N", default_value = "50", value_parser = millis)]
    pub stall: Duration,
}

/// The end of every server's `--help`: signals and environment.
const SHARED_NOTES: &str = "\
SIGINT, SIGTERM or SIGHUP (unless ignored, as under nohup) stops gracefully (no
new connections; open ones get the drain deadline); a second one exits at once
(status 128 + signal).

Environment: RUST_LOG=debug for more logging; PERCORE_BACKEND=uring|epoll|auto
overrides --backend.";

/// The command line of `T`, a server whose default port is `port`: its
/// `--help` ends with the notes every server shares (signals, environment).
pub fn command<T: CommandFactory>(port: &'static str) -> Command {
    let cmd = T::command()
        .args_override_self(true)
        .mut_arg("port", |arg| arg.default_value(port).required(false));
    let after = match cmd.get_after_help() {
        Some(own) => format!("{own}\n\n{SHARED_NOTES}"),
        None => SHARED_NOTES.to_owned(),
    };
    cmd.after_help(after)
}

/// Parses this process's command line as `T` (see [`command`]). `--help`
/// prints the usage and exits 0; a usage error prints clap's message,
/// which names the option and the value, and exits 2.
pub fn parse_args<T: Parser>(port: &'static str) -> T {
    parse_args_from(port, std::env::args_os()).unwrap_or_else(|e| e.exit())
}

/// [`parse_args`] over `args`, the first being the program's name.
///
/// # Errors
///
/// A usage error, or `--help`, as clap reports them.
pub fn parse_args_from<T, I>(port: &'static str, args: I) -> Result<T, clap::Error>
where
    T: Parser,
    I: IntoIterator,
    I::Item: Into<OsString> + Clone,
{
    let mut cmd = command::<T>(port);
    let matches = cmd.try_get_matches_from_mut(args)?;
    T::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))
}

/// Says what is wrong with options that parsed one by one but not
/// together (a quorum above the width), as clap says it, and exits 2.
pub fn usage_error<T: CommandFactory>(port: &'static str, message: impl std::fmt::Display) -> ! {
    command::<T>(port)
        .error(ErrorKind::ValueValidation, message)
        .exit()
}

/// A number, or a message saying why not: `expected a number`, or that
/// the digits are too many for the option.
///
/// # Errors
///
/// The message, for clap to print after the option and the value.
pub fn number<T: FromStr>(value: &str) -> Result<T, String> {
    value.parse().map_err(|_| {
        if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
            format!("{value} is too large")
        } else {
            "expected a number".to_owned()
        }
    })
}

/// A number where zero would make no sense (a width, a timeout).
///
/// # Errors
///
/// As [`number`], and `expected a number from 1` for zero.
pub fn positive<T: FromStr + Default + PartialEq>(value: &str) -> Result<T, String> {
    let n = number::<T>(value)?;
    if n == T::default() {
        return Err("expected a number from 1".to_owned());
    }
    Ok(n)
}

/// Milliseconds, zero allowed.
///
/// # Errors
///
/// As [`number`].
pub fn millis(value: &str) -> Result<Duration, String> {
    number(value).map(Duration::from_millis)
}

/// Milliseconds where zero would make no sense (a timeout).
///
/// # Errors
///
/// As [`positive`].
pub fn positive_millis(value: &str) -> Result<Duration, String> {
    positive(value).map(Duration::from_millis)
}

/// `--wait-batch-us`: the ring takes at most a second (`wait_batching`
/// clamps), so more is refused rather than silently cut.
fn wait_batch(value: &str) -> Result<Duration, String> {
    match number::<u64>(value) {
        Ok(usec) if usec <= 1_000_000 => Ok(Duration::from_micros(usec)),
        _ => Err("expected a number 0-1000000".to_owned()),
    }
}

/// `--cores`: a taskset-style list of CPUs this process may run on.
fn cpu_list(value: &str) -> Result<Vec<usize>, String> {
    let cpus = percore::runtime::cpus::parse_list(value).map_err(|e| e.to_string())?;
    percore::runtime::cpus::check(&cpus).map_err(|e| e.to_string())?;
    Ok(cpus)
}

/// `--unix-mode`'s value: permission bits in octal.
fn octal_mode(value: &str) -> Result<u32, String> {
    u32::from_str_radix(value.trim_start_matches("0o"), 8)
        .ok()
        .filter(|mode| *mode <= 0o7777)
        .ok_or_else(|| format!("expected octal permission bits like 660, not {value:?}"))
}

/// `--host`'s value: an IPv4 or IPv6 address (`::1` or `[::1]`), or a
/// name resolved now (the first address it has, as `localhost` gives
/// 127.0.0.1), so that a name that does not resolve is a usage error.
fn resolve_host(host: &str) -> Result<IpAddr, String> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse() {
        return Ok(ip);
    }
    let mut found = (bare, 0)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host:?}: {e}"))?;
    found
        .next()
        .map(|addr| addr.ip())
        .ok_or_else(|| format!("{host:?} has no address"))
}

/// Says why on stderr and exits with `status` (2 for a usage error, 1 for
/// a server that failed): a stderr whose reader is gone must not turn
/// that status into a panic's.
pub fn exit_with(status: i32, text: &str) -> ! {
    let _ = writeln!(io::stderr(), "{text}");
    std::process::exit(status)
}

/// Logs to stderr at `info` unless `RUST_LOG` says otherwise (see
/// [`percore::log_to_stderr`]).
pub fn init_logging() {
    percore::log_to_stderr();
}

/// Starts the server, prints its address, stats if asked, stops on
/// SIGINT, SIGTERM or SIGHUP, and returns when it has finished.
///
/// # Errors
///
/// Start-up and core errors.
pub fn run<H, F>(name: &str, common: &CommonArgs, factory: F) -> io::Result<()>
where
    H: Handler,
    F: Fn(&CoreContext) -> H + Send + Sync + 'static,
{
    run_with_stats(name, common, factory, |_| Vec::new())
}

/// [`run`], with counters of the binary's own in the `--stats` output:
/// once a second, after each core's `TIME stats cpu=N ...` line,
/// `extra(index)` (the core's position in the server's core list) gives
/// the text of more lines for that core, each printed as
/// `TIME stats cpu=N TEXT` (see
/// [`CoreReaders`]). Their keys should not repeat the core line's.
///
/// # Errors
///
/// Start-up and core errors.
pub fn run_with_stats<H, F, X>(
    name: &str,
    common: &CommonArgs,
    factory: F,
    extra: X,
) -> io::Result<()>
where
    H: Handler,
    F: Fn(&CoreContext) -> H + Send + Sync + 'static,
    X: Fn(usize) -> Vec<String> + Send + 'static,
{
    let metrics = Metrics::new(Readiness::new());
    run_with_metrics(name, common, &metrics, factory, extra)
}

/// [`run_with_stats`], with `metrics` served on `--admin` (when given):
/// the factory registers each core's HTTP or proxy counters in it. The
/// server's readiness is the one `metrics` was made with.
///
/// # Errors
///
/// Start-up and core errors.
pub fn run_with_metrics<H, F, X>(
    name: &str,
    common: &CommonArgs,
    metrics: &Metrics,
    factory: F,
    extra: X,
) -> io::Result<()>
where
    H: Handler,
    F: Fn(&CoreContext) -> H + Send + Sync + 'static,
    X: Fn(usize) -> Vec<String> + Send + 'static,
{
    let mut builder = Server::builder()
        .address(SocketAddr::new(common.host, common.port))
        .backend(common.backend)
        .max_connections(common.max_connections)
        .drain_timeout(common.drain)
        .wait_batching((!common.wait_batch.is_zero()).then_some(common.wait_batch))
        .take_over(common.take_over)
        .steering(if common.steer {
            Steering::Load
        } else {
            Steering::Off
        })
        .readiness(metrics.readiness().clone())
        .unready_delay(common.unready_delay)
        .stall_threshold((!common.stall.is_zero()).then_some(common.stall));
    if common.move_connections {
        builder = builder.move_connections(percore::MovePolicy::default());
    }
    if let Some(cores) = &common.cores {
        builder = builder.cores(cores.iter().copied());
    }
    if let Some(mode) = common.unix_mode {
        builder = builder.unix_mode(mode);
    }
    if let (Some(cert), Some(key)) = (&common.tls_cert, &common.tls_key) {
        let mut tls = percore::tls::ServerTls::new(cert, key);
        if let Some(ca) = &common.tls_client_ca {
            tls = tls.client_ca(ca);
        }
        if common.offer_h2 {
            tls = tls.alpn(&[b"h2", b"http/1.1"]);
        }
        builder = builder
            .tls(tls.build()?)
            .tls_max_handshakes(common.tls_max_handshakes)
            .tls_handshake_timeout(common.tls_handshake_timeout)
            .tls_first_byte_timeout(common.tls_first_byte_timeout);
    }
    let factory = std::sync::Arc::new(factory);
    if let Some(unix) = &common.unix {
        let factory = factory.clone();
        builder = builder.add_listener(unix.clone(), move |core| factory(core));
    }
    if let Some(port) = common.admin {
        let admin = Admin::new(metrics.clone());
        builder = builder.add_listener(SocketAddr::new(common.admin_host, port), move |_core| {
            HttpHandler::new(admin.clone())
        });
    }
    let handle = builder.start(move |core| factory(core))?;
    metrics.set_server(handle.stats_reader());
    handle.shutdown_on_signals()?;
    let unix = match &common.unix {
        Some(_) => format!(" and {}", handle.listeners()[1].addr),
        None => String::new(),
    };
    let tls = if common.tls_cert.is_some() {
        " with TLS"
    } else {
        ""
    };
    tracing::info!(
        "{name} listening on {}{tls}{unix} ({} backend, {})",
        handle.local_addr(),
        handle.backend(),
        match handle.stats().len() {
            1 => "1 core".to_owned(),
            n => format!("{n} cores"),
        }
    );
    if common.admin.is_some() {
        if let Some(admin) = handle.listeners().last() {
            tracing::info!(
                "{name} admin on http://{}/metrics (/healthz, /readyz)",
                admin.addr
            );
        }
    }
    if common.stats {
        let stopper_stats = handle.stats_reader();
        std::thread::Builder::new()
            .name("stats".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_secs(1));
                let at = timestamp();
                for (index, line) in stopper_stats.snapshot().into_iter().enumerate() {
                    // Not `eprintln!`, which panics once stderr's reader is
                    // gone: the lines are dropped then, as the log's are.
                    let _ = writeln!(io::stderr(), "{at} stats {line}");
                    for more in extra(index) {
                        let _ = writeln!(io::stderr(), "{at} stats cpu={} {more}", line.cpu);
                    }
                }
            })?;
    }
    handle.join()
}

/// The time now as the log's lines give it (RFC 3339, UTC), so that a
/// `--stats` line can be placed among them and rates computed from two.
fn timestamp() -> String {
    use tracing_subscriber::fmt::{format::Writer, time::FormatTime};
    let mut at = String::new();
    let _ = tracing_subscriber::fmt::time::SystemTime.format_time(&mut Writer::new(&mut at));
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server with the common options and the HTTP ones.
    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        http: HttpArgs,
    }

    fn parse(args: &[&str]) -> Result<Cli, String> {
        let args = std::iter::once("test").chain(args.iter().copied());
        parse_args_from::<Cli, _>("8080", args).map_err(|e| e.to_string())
    }

    fn host_of(args: &[&str]) -> Result<IpAddr, String> {
        parse(args).map(|cli| cli.common.host)
    }

    #[test]
    fn the_help_is_consistent() {
        command::<Cli>("8080").debug_assert();
    }

    #[test]
    fn defaults() {
        let cli = parse(&[]).expect("no options");
        assert_eq!(cli.common.port, 8080);
        assert_eq!(cli.common.host, IpAddr::from([127, 0, 0, 1]));
        assert_eq!(cli.common.cores, None);
        assert_eq!(cli.common.backend, Backend::Auto);
        assert_eq!(cli.common.max_connections, 10_000);
        assert_eq!(cli.common.drain, Duration::from_secs(10));
        assert_eq!(cli.common.wait_batch, Duration::ZERO);
        assert!(!cli.common.stats && !cli.common.take_over && !cli.common.steer);
        assert!(!cli.common.move_connections);
        assert_eq!(cli.common.tls_max_handshakes, 1024);
        assert_eq!(cli.common.tls_handshake_timeout, Duration::from_secs(10));
        assert_eq!(cli.common.tls_first_byte_timeout, Duration::from_secs(5));
    }

    #[test]
    fn host_takes_addresses_and_names() {
        assert_eq!(
            host_of(&["--host", "0.0.0.0"]),
            Ok(IpAddr::from([0, 0, 0, 0]))
        );
        assert_eq!(host_of(&["--host", "::1"]), Ok("::1".parse().expect("ip")));
        assert_eq!(host_of(&["--host=[::1]"]), Ok("::1".parse().expect("ip")));
        let local = host_of(&["--host", "localhost"]).expect("localhost resolves");
        assert!(local.is_loopback(), "{local}");
    }

    #[test]
    fn switches_take_no_value_and_repeat() {
        let cli = parse(&["--access-log", "--access-log", "--stats"]).expect("switches");
        assert!(cli.http.access_log && cli.common.stats);
        let e = parse(&["--access-log=x"]).expect_err("a value");
        assert!(e.contains("--access-log"), "{e}");
        // The last of a repeated option wins, as it always did.
        let cli = parse(&["--port", "1", "--port", "2"]).expect("repeated");
        assert_eq!(cli.common.port, 2);
    }

    #[test]
    fn bad_values_name_their_option() {
        let cases: [(&[&str], &str); 7] = [
            (
                &["--port", "abc"],
                "'abc' for '--port <N>': expected a number",
            ),
            (
                &["--port", "70000"],
                "'70000' for '--port <N>': 70000 is too large",
            ),
            (
                &["--max-connections", "0"],
                "'0' for '--max-connections <N>': expected a number from 1",
            ),
            (
                &["--wait-batch-us", "1000001"],
                "'1000001' for '--wait-batch-us <N>': expected a number 0-1000000",
            ),
            (
                &["--tls-max-handshakes", "0"],
                "'0' for '--tls-max-handshakes <N>': expected a number from 1",
            ),
            (
                &["--tls-first-byte-ms", "x"],
                "'x' for '--tls-first-byte-ms <N>': expected a number",
            ),
            (
                &["--cores", "0,0"],
                "'0,0' for '--cores <LIST>': CPU 0 is listed twice",
            ),
        ];
        for (args, message) in cases {
            let e = parse(args).expect_err(message);
            assert!(e.contains(message), "{args:?}: {e}");
        }
    }
}
