//! The command line shared by the example servers (`echo`, `http_echo`,
//! `fanout`): `--port`, `--cores`, `--backend`, `--stats`, the HTTP servers'
//! `--keepalive-requests`, plus options of their own, and the common start-up
//! (logging, stats line, signals).

use std::io::{self, IsTerminal, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use percore::{Backend, CoreContext, Handler, Server};

mod http_args;
mod stats_lines;
pub use http_args::{http_config, HTTP_FLAGS, HTTP_STATS_USAGE, HTTP_USAGE};
pub use stats_lines::CoreReaders;

/// Options every example server takes.
#[derive(Debug, Clone)]
pub struct CommonArgs {
    /// TCP port to listen on.
    pub port: u16,
    /// Address to bind (default 127.0.0.1: only this machine, until
    /// `--host` says otherwise).
    pub host: IpAddr,
    /// CPUs to run on (all available when `None`).
    pub cores: Option<Vec<usize>>,
    /// The executor backend.
    pub backend: Backend,
    /// Print a line of counters per core every second (and any lines of
    /// the binary's own, see [`run_with_stats`]).
    pub stats: bool,
    /// Open connections per core before accept pauses.
    pub max_connections: usize,
    /// Graceful-stop drain deadline.
    pub drain: Duration,
    /// Opt-in io_uring wait batching bound on busy cores (`--wait-batch-us`).
    pub wait_batch: Option<Duration>,
    /// Join the server already on the port, to replace it (`--take-over`).
    pub take_over: bool,
}

/// A binary's own flags that take no value (returned with an empty one).
const SWITCHES: &[&str] = &["--access-log"];

/// Splits the command line into the common options and the rest (returned
/// as `(flag, value)` pairs for the binary to interpret; a switch such as
/// `--access-log` with an empty value).
///
/// # Errors
///
/// A message for the user: an unknown flag, a missing or bad value.
pub fn parse_common(
    default_port: u16,
    args: impl IntoIterator<Item = String>,
    own_flags: &[&str],
) -> Result<(CommonArgs, Vec<(String, String)>), String> {
    let mut common = CommonArgs {
        port: default_port,
        host: IpAddr::V4(Ipv4Addr::LOCALHOST),
        cores: None,
        backend: Backend::Auto,
        stats: false,
        max_connections: 10_000,
        drain: Duration::from_secs(10),
        wait_batch: None,
        take_over: false,
    };
    let mut rest = Vec::new();
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        let (flag, inline) = match flag.split_once('=') {
            Some((f, v)) => (f.to_owned(), Some(v.to_owned())),
            None => (flag, None),
        };
        if own_flags.contains(&flag.as_str()) && SWITCHES.contains(&flag.as_str()) {
            if let Some(v) = inline {
                return Err(format!("{flag} takes no value, got {v:?}"));
            }
            rest.push((flag, String::new()));
            continue;
        }
        if flag == "--stats" || flag == "--take-over" {
            if let Some(v) = inline {
                return Err(format!("{flag} takes no value, got {v:?}"));
            }
            if flag == "--stats" {
                common.stats = true;
            } else {
                common.take_over = true;
            }
            continue;
        }
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--port" => {
                let v = value()?;
                common.port = v
                    .parse()
                    .map_err(|_| format!("--port: expected a number 0-65535, got {v:?}"))?
            }
            "--host" => common.host = resolve_host(&value()?)?,
            "--cores" => {
                let cpus = percore::runtime::cpus::parse_list(&value()?)
                    .and_then(|cpus| percore::runtime::cpus::check(&cpus).map(|()| cpus))
                    .map_err(|e| format!("--cores: {e}"))?;
                common.cores = Some(cpus);
            }
            "--backend" => {
                common.backend = value()?
                    .parse()
                    .map_err(|e: percore::ParseBackendError| format!("--backend: {e}"))?
            }
            "--max-connections" => {
                let v = value()?;
                common.max_connections = usize::try_from(positive(&flag, &v)?)
                    .map_err(|_| format!("--max-connections: {v} is too large"))?;
            }
            "--wait-batch-us" => {
                // The ring takes at most a second (`wait_batching` clamps).
                let usec: u64 = value()?
                    .parse()
                    .ok()
                    .filter(|&usec| usec <= 1_000_000)
                    .ok_or_else(|| "--wait-batch-us: expected a number 0-1000000".to_owned())?;
                common.wait_batch = (usec > 0).then(|| Duration::from_micros(usec));
            }
            "--drain-ms" => common.drain = Duration::from_millis(number(&flag, &value()?)?),
            f if own_flags.contains(&f) => rest.push((flag.clone(), value()?)),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok((common, rest))
}

/// A flag's numeric value, or a message naming the flag.
///
/// # Errors
///
/// `FLAG: expected a number, got "VALUE"`, or `FLAG: VALUE is too large`
/// for digits the type cannot hold.
pub fn number<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T, String> {
    value.parse().map_err(|_| {
        if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
            format!("{flag}: {value} is too large")
        } else {
            format!("{flag}: expected a number, got {value:?}")
        }
    })
}

/// A flag's value where zero would make no sense (a width, a timeout).
///
/// # Errors
///
/// As [`number`], and `FLAG: expected a number from 1, got "0"`.
pub fn positive(flag: &str, value: &str) -> Result<u64, String> {
    match number::<u64>(flag, value)? {
        0 => Err(format!("{flag}: expected a number from 1, got {value:?}")),
        n => Ok(n),
    }
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
        .map_err(|e| format!("--host: cannot resolve {host:?}: {e}"))?;
    found
        .next()
        .map(|addr| addr.ip())
        .ok_or_else(|| format!("--host: {host:?} has no address"))
}

/// The usage text of the common options.
pub const COMMON_USAGE: &str = "  --port N              TCP port (0 picks a free one)
  --host ADDR           address or name to bind (default 127.0.0.1; 0.0.0.0, ::1, localhost)
  --cores LIST          CPUs to run on, e.g. 0 or 0,1 or 0-3 (default: all)
  --backend B           uring, epoll or auto (default auto; PERCORE_BACKEND overrides)
  --max-connections N   open connections per core before accept pauses (default 10000)
  --drain-ms N          graceful-stop drain deadline in ms (default 10000)
  --wait-batch-us N     io_uring: a busy core waits up to N µs for a batch of
                        completions (fewer syscalls with many connections, slower with
                        a few dozen busy ones; default 0 = off; at most 1000000)
  --stats               print a line of counters per core every second (after
                        the time, RFC 3339 UTC, as the log's lines)
  --take-over           share the port with the server already on it, to replace
                        it without refusing connections: start this, then stop
                        that one (same user; see net.ipv4.tcp_migrate_req)
  RUST_LOG=debug        more logging

SIGINT, SIGTERM or SIGHUP (unless ignored, as under nohup) stops gracefully (no
new connections; open ones get the drain deadline); a second one exits at once
(status 128 + signal).";

/// Prints the `--help` text on stdout. A reader that stops early
/// (`--help | head -1`) is no error: the rest is dropped, where `println!`
/// would panic.
pub fn print_help(text: &str) {
    let _ = writeln!(io::stdout(), "{text}");
}

/// Says why on stderr and exits with `status` (2 for a usage error, 1 for
/// a server that failed): a stderr whose reader is gone must not turn
/// that status into a panic's.
pub fn exit_with(status: i32, text: &str) -> ! {
    let _ = writeln!(io::stderr(), "{text}");
    std::process::exit(status)
}

/// Logs to stderr at `info` unless `RUST_LOG` says otherwise, in colour
/// only on a terminal (a log file or a pipe gets plain text).
///
/// A log line that cannot be written is dropped: by default the subscriber
/// reports it with `eprintln!`, which panics when stderr is a pipe whose
/// reader is gone, and the server must go on serving (and stopping) then.
pub fn init_logging() {
    let (filter, refused) = match tracing_subscriber::EnvFilter::try_from_default_env() {
        Ok(filter) => (filter, None),
        Err(e) => (
            tracing_subscriber::EnvFilter::new("info"),
            std::env::var("RUST_LOG").ok().map(|value| (value, e)),
        ),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(io::stderr().is_terminal())
        .with_writer(io::stderr)
        .log_internal_errors(false)
        .init();
    if let Some((value, error)) = refused {
        tracing::warn!(%error, "RUST_LOG={value:?} ignored: logging at info");
    }
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
    let mut builder = Server::builder()
        .address(SocketAddr::new(common.host, common.port))
        .backend(common.backend)
        .max_connections(common.max_connections)
        .drain_timeout(common.drain)
        .wait_batching(common.wait_batch)
        .take_over(common.take_over);
    if let Some(cores) = &common.cores {
        builder = builder.cores(cores.iter().copied());
    }
    let handle = builder.start(factory)?;
    handle.shutdown_on_signals()?;
    tracing::info!(
        "{name} listening on {} ({} backend, {})",
        handle.local_addr(),
        handle.backend(),
        match handle.stats().len() {
            1 => "1 core".to_owned(),
            n => format!("{n} cores"),
        }
    );
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

    fn host_of(args: &[&str]) -> Result<IpAddr, String> {
        let args = args.iter().map(|a| (*a).to_owned());
        parse_common(8080, args, &[]).map(|(common, _)| common.host)
    }

    #[test]
    fn host_takes_addresses_and_names() {
        assert_eq!(host_of(&[]), Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        assert_eq!(
            host_of(&["--host", "0.0.0.0"]),
            Ok(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
        );
        assert_eq!(
            host_of(&["--host", "127.0.0.1"]),
            Ok(Ipv4Addr::LOCALHOST.into())
        );
        assert_eq!(host_of(&["--host", "::1"]), Ok("::1".parse().expect("ip")));
        assert_eq!(host_of(&["--host=[::1]"]), Ok("::1".parse().expect("ip")));
        let local = host_of(&["--host", "localhost"]).expect("localhost resolves");
        assert!(local.is_loopback(), "{local}");
    }

    #[test]
    fn switches_take_no_value_and_only_where_known() {
        let parse = |args: &[&str], own: &[&str]| {
            let args = args.iter().map(|a| (*a).to_owned());
            parse_common(8080, args, own).map(|(_, rest)| rest)
        };
        let switch = ("--access-log".to_owned(), String::new());
        assert_eq!(
            parse(&["--access-log", "--access-log"], HTTP_FLAGS),
            Ok(vec![switch.clone(), switch])
        );
        assert_eq!(
            parse(&["--access-log=x"], HTTP_FLAGS),
            Err("--access-log takes no value, got \"x\"".to_owned())
        );
        assert_eq!(
            parse(&["--access-log"], &[]),
            Err("unknown option --access-log".to_owned())
        );
    }
}
