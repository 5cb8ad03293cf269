//! An HTTP/1.1 echo server on percore (the io_perfomance workload).
//!
//! `GET`/`HEAD` on any path answer `{"message":"Hello!"}`; `POST`/`PUT`
//! echo the request body with its content type; other methods get 405.
//!
//! ```text
//! http_echo [--port 8080] [--cores 0,1] [--backend auto] [--stats]
//!           [--keepalive-requests 1000]
//! ```

use percore_examples::{
    exit_with, http_config, init_logging, parse_common, print_help, run_with_stats, CoreReaders,
    COMMON_USAGE, HTTP_FLAGS, HTTP_STATS_USAGE, HTTP_USAGE,
};
use percore_handlers::http::{HttpEcho, HttpHandler, HttpStatsReader};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print_help(&format!(
            "http_echo: an HTTP/1.1 echo server on percore (port 8080 unless --port)\n\nOptions:\n{HTTP_USAGE}\n{COMMON_USAGE}\n\n{HTTP_STATS_USAGE}"
        ));
        return;
    }
    let parsed = parse_common(8080, args, HTTP_FLAGS)
        .and_then(|(common, own)| Ok((common, http_config(&own)?)));
    let (common, config) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => exit_with(
            2,
            &format!("http_echo: {e}\n\nOptions:\n{HTTP_USAGE}\n{COMMON_USAGE}"),
        ),
    };
    init_logging();
    let http = CoreReaders::<HttpStatsReader>::default();
    let registry = http.clone();
    let factory = move |core: &percore::CoreContext| {
        let handler = HttpHandler::with_config(HttpEcho, config);
        registry.register(core.index, handler.stats_reader());
        handler
    };
    let lines = move |index| {
        let line = http.line(index, |r| format!("http {}", r.snapshot()));
        line.into_iter().collect()
    };
    if let Err(e) = run_with_stats("http_echo", &common, factory, lines) {
        exit_with(1, &format!("http_echo: {e}"));
    }
}
