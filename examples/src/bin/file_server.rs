//! A static-file server on percore: `GET` and `HEAD` of the files under
//! `--root`, with ranges, `ETag`/`Last-Modified` and 304s, `index.html`
//! for directories and no listings (see `percore_handlers::files`).
//!
//! ```text
//! file_server --root DIR [--port 8083] [--host 127.0.0.1] [--cores 0,1] [--backend auto]
//!             [--cache-entries 1000] [--cache-valid-ms 1000] [--stats] [--admin 9100]
//! ```

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use percore::Readiness;
use percore_examples::{
    exit_with, init_logging, parse_args, run_with_metrics, CommonArgs, CoreReaders, HttpArgs,
    HTTP_STATS_NOTE,
};
use percore_handlers::files::{StaticFiles, DEFAULT_CACHE_ENTRIES, DEFAULT_CACHE_VALID};
use percore_handlers::http::{HttpHandler, HttpStatsReader};
use percore_handlers::metrics::Metrics;

/// A static-file server on percore: `GET` and `HEAD` of the files under
/// `--root`, never outside it.
#[derive(Debug, Parser)]
#[command(name = "file_server", after_help = HTTP_STATS_NOTE)]
struct Cli {
    /// The directory to serve.
    #[arg(long, value_name = "DIR")]
    root: PathBuf,
    /// Files each core keeps open (the open-file cache); 0 turns the
    /// cache off.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_CACHE_ENTRIES)]
    cache_entries: usize,
    /// How long a cached file is served before its path is looked at
    /// again, in milliseconds; 0 turns the cache off.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_CACHE_VALID.as_millis() as u64)]
    cache_valid_ms: u64,
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    http: HttpArgs,
}

fn main() {
    let cli: Cli = parse_args("8083");
    let (mut common, config) = (cli.common, cli.http.config());
    common.offer_h2 = cfg!(feature = "h2");
    init_logging();
    // Resolved once here, before any core starts: a bad root is a usage
    // error, not a stream of 404s.
    let files = match StaticFiles::new(&cli.root) {
        Ok(files) => files.cache(cli.cache_entries, Duration::from_millis(cli.cache_valid_ms)),
        Err(e) => exit_with(
            2,
            &format!("file_server: --root {}: {e}", cli.root.display()),
        ),
    };
    let http = CoreReaders::<HttpStatsReader>::default();
    let registry = http.clone();
    let metrics = Metrics::new(Readiness::new());
    let exported = metrics.clone();
    let factory = move |core: &percore::CoreContext| {
        let handler = HttpHandler::with_config(files.clone(), config);
        registry.register(core.index, handler.stats_reader());
        exported.register_http(core, handler.stats_reader());
        handler
    };
    let lines = move |index| {
        let line = http.line(index, |r| format!("http {}", r.snapshot()));
        line.into_iter().collect()
    };
    if let Err(e) = run_with_metrics("file_server", &common, &metrics, factory, lines) {
        exit_with(1, &format!("file_server: {e}"));
    }
}
