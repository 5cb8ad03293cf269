//! A raw TCP echo server on percore: every byte comes back in order.
//!
//! ```text
//! echo [--port 7000] [--host 127.0.0.1] [--cores 0,1] [--backend auto] [--stats]
//! ```

use clap::Parser;
use percore_examples::{exit_with, init_logging, parse_args, run, CommonArgs};
use percore_handlers::echo::EchoUntilStop;

/// A TCP echo server on percore: every byte comes back in order, until
/// the peer closes. At Ctrl-C or SIGTERM, connections waiting for their
/// client's next bytes close at once; the stop does not wait for them.
#[derive(Debug, Parser)]
#[command(name = "echo")]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
}

fn main() {
    let cli: Cli = parse_args("7000");
    init_logging();
    if let Err(e) = run("echo", &cli.common, |_core| EchoUntilStop) {
        exit_with(1, &format!("echo: {e}"));
    }
}
