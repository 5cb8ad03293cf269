//! The log a program gets when it installs none: [`ServerBuilder::serve`]
//! prints the server's start, stop and failures to stderr rather than
//! nothing at all.
//!
//! [`ServerBuilder::serve`]: super::ServerBuilder::serve

use std::io::{self, IsTerminal};

use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// Logs to stderr at `info` (or as `RUST_LOG` says: `target=level`
/// directives and a bare default level, e.g. `info,percore=debug`; a value
/// that does not parse is reported and logging stays at `info`), in colour
/// only on a terminal, unless the program has already installed a global
/// `tracing` subscriber, whose choice then stands. A line that cannot be
/// written (stderr's reader gone) is dropped, and the server goes on.
///
/// [`ServerBuilder::serve`](crate::ServerBuilder::serve) calls it; a
/// program that starts its server with [`start`](crate::ServerBuilder::start)
/// may call it first to get the same log.
pub fn log_to_stderr() {
    if tracing::dispatcher::has_been_set() {
        return;
    }
    let info = || Targets::new().with_default(tracing::Level::INFO);
    let (filter, refused) = match std::env::var("RUST_LOG") {
        Ok(value) => match value.parse::<Targets>() {
            Ok(filter) => (filter, None),
            Err(e) => (info(), Some((value, e))),
        },
        Err(_) => (info(), None),
    };
    // A line that cannot be written (stderr's reader gone) is dropped:
    // the server goes on serving.
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(io::stderr().is_terminal())
        .with_writer(io::stderr)
        .log_internal_errors(false)
        .with_filter(filter);
    // Another thread may have installed one meanwhile: then it stands.
    if tracing_subscriber::registry()
        .with(layer)
        .try_init()
        .is_ok()
    {
        if let Some((value, error)) = refused {
            tracing::warn!(%error, "RUST_LOG={value:?} ignored: logging at info");
        }
    }
}
