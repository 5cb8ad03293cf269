//! A raw TCP echo server on percore: every byte comes back in order.
//!
//! ```text
//! echo [--port 7000] [--cores 0,1] [--backend auto] [--stats]
//! ```

use percore_examples::{exit_with, init_logging, parse_common, print_help, run, COMMON_USAGE};
use percore_handlers::echo::Echo;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print_help(&format!(
            "echo: a TCP echo server on percore (port 7000 unless --port)\n\nOptions:\n{COMMON_USAGE}"
        ));
        return;
    }
    let common = match parse_common(7000, args, &[]) {
        Ok((common, _)) => common,
        Err(e) => exit_with(2, &format!("echo: {e}\n\nOptions:\n{COMMON_USAGE}")),
    };
    init_logging();
    if let Err(e) = run("echo", &common, |_core| Echo) {
        exit_with(1, &format!("echo: {e}"));
    }
}
