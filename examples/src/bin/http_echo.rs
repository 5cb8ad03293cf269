//! An HTTP/1.1 echo server on percore (the io_perfomance workload).
//!
//! `GET`/`HEAD` on any path answer `{"message":"Hello!"}`; `POST`/`PUT`
//! echo the request body with its content type; other methods get 405.
//!
//! ```text
//! http_echo [--port 8080] [--host 127.0.0.1] [--cores 0,1] [--backend auto] [--stats]
//!           [--keepalive-requests 1000] [--admin 9100] [--unready-ms 0]
//! ```

use clap::Parser;
use percore::Readiness;
use percore_examples::{
    exit_with, init_logging, parse_args, run_with_metrics, CommonArgs, CoreReaders, HttpArgs,
    HTTP_STATS_NOTE,
};
use percore_handlers::http::{HttpEcho, HttpHandler, HttpStatsReader};
use percore_handlers::metrics::Metrics;

/// An HTTP/1.1 echo server on percore: `GET` and `HEAD` answer
/// `{"message":"Hello!"}`, `POST` and `PUT` echo the body, other methods
/// get 405.
#[derive(Debug, Parser)]
#[command(name = "http_echo", after_help = HTTP_STATS_NOTE)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    http: HttpArgs,
}

fn main() {
    let cli: Cli = parse_args("8080");
    let (mut common, config) = (cli.common, cli.http.config());
    common.offer_h2 = cfg!(feature = "h2");
    init_logging();
    let http = CoreReaders::<HttpStatsReader>::default();
    let registry = http.clone();
    let metrics = Metrics::new(Readiness::new());
    let exported = metrics.clone();
    let factory = move |core: &percore::CoreContext| {
        let handler = HttpHandler::with_config(HttpEcho, config);
        registry.register(core.index, handler.stats_reader());
        exported.register_http(core, handler.stats_reader());
        handler
    };
    let lines = move |index| {
        let line = http.line(index, |r| format!("http {}", r.snapshot()));
        line.into_iter().collect()
    };
    if let Err(e) = run_with_metrics("http_echo", &common, &metrics, factory, lines) {
        exit_with(1, &format!("http_echo: {e}"));
    }
}
