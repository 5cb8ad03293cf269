//! A raw TCP echo server on percore: every byte comes back in order.
//!
//! ```text
//! echo [--port 7000] [--cores 0,1] [--backend auto] [--stats]
//! ```

use percore_examples::{init_logging, parse_common, run, COMMON_USAGE};
use percore_handlers::echo::Echo;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("echo: a TCP echo server on percore (port 7000 unless --port)\n\nOptions:\n{COMMON_USAGE}");
        return;
    }
    let common = match parse_common(7000, args, &[]) {
        Ok((common, _)) => common,
        Err(e) => {
            eprintln!("echo: {e}\n\nOptions:\n{COMMON_USAGE}");
            std::process::exit(2);
        }
    };
    init_logging();
    if let Err(e) = run("echo", &common, |_core| Echo) {
        eprintln!("echo: {e}");
        std::process::exit(1);
    }
}
