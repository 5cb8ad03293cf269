//! Cookbook: structured logs and metrics.
//!
//! Logs: `tracing` events with fields, written one JSON object a line by
//! `tracing-subscriber`'s `json` formatter, for a log shipper to parse.
//! percore's own lines (the backend chosen, the stop) come out the same way.
//!
//! Metrics: percore-handlers' [`Metrics`] gathers the framework's counters
//! and each core's HTTP counters (the factory registers them); an admin
//! listener serves them in Prometheus's text format at `/metrics`, with
//! `/healthz` and `/readyz`, and adds the program's own counter after them.
//!
//! ```text
//! cookbook_observability [--port 8094] [--admin 9094]
//! curl localhost:8094/hello/ann        # logs {"fields":{"message":"greeted","name":"ann",...},...}
//! curl localhost:9094/metrics          # percore_*, http_*, and app_greetings_total
//! ```

use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use clap::Parser;
use percore::{core_index, Readiness, Server};
use percore_examples::{exit_with, parse_args, CommonArgs};
use percore_handlers::http::{HttpError, HttpHandler, Request, Response, Routed, Router, Service};
use percore_handlers::metrics::{Admin, Metrics};

/// The program's own counter, shared by every core.
type Greetings = Arc<AtomicU64>;

async fn hello(
    greetings: &Greetings,
    req: &mut Routed<'_, '_>,
    res: &mut Response<'_>,
) -> io::Result<()> {
    let name = req.param_str("name")?;
    greetings.fetch_add(1, Ordering::Relaxed);
    // Fields, not text pasted into the message: each is a JSON key.
    tracing::info!(name = %name, core = core_index(), "greeted");
    Ok(res.send(
        200,
        Some(b"text/plain"),
        format!("hello, {name}\n").as_bytes(),
    )?)
}

/// The admin listener: `/metrics` with the program's counter appended,
/// and percore-handlers' `/healthz` and `/readyz`.
#[derive(Clone)]
struct AdminService {
    admin: Admin,
    metrics: Metrics,
    greetings: Greetings,
}

impl Service for AdminService {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        if req.path() == "/metrics" {
            let format = b"text/plain; version=0.0.4; charset=utf-8";
            let mut out = Vec::new();
            self.metrics.render(&mut out);
            let greetings = self.greetings.load(Ordering::Relaxed);
            let _ = write!(
                out,
                "# HELP app_greetings_total Greetings answered.\n\
                 # TYPE app_greetings_total counter\n\
                 app_greetings_total {greetings}\n"
            );
            return Ok(res.send(200, Some(format), &out)?);
        }
        if self.admin.answer(req.path(), res)? {
            return Ok(());
        }
        Err(HttpError::new(404, "").into())
    }
}

/// Structured logs (JSON lines on stderr) and Prometheus metrics.
#[derive(Debug, Parser)]
#[command(name = "cookbook_observability")]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
}

fn main() {
    let Cli { common } = parse_args("8094");
    // One JSON object a line; `RUST_LOG` is not read here, to keep it short.
    tracing_subscriber::fmt()
        .json()
        .with_writer(io::stderr)
        .log_internal_errors(false)
        .init();
    if let Err(e) = serve(&common) {
        exit_with(1, &format!("cookbook_observability: {e}"));
    }
}

fn serve(common: &CommonArgs) -> io::Result<()> {
    let readiness = Readiness::new();
    let metrics = Metrics::new(readiness.clone());
    let greetings = Greetings::default();
    let admin = AdminService {
        admin: Admin::new(metrics.clone()),
        metrics: metrics.clone(),
        greetings: greetings.clone(),
    };
    let admin_port = common.admin.unwrap_or(9094);
    let registry = metrics.clone();
    let mut builder = Server::builder()
        .address(SocketAddr::new(common.host, common.port))
        .backend(common.backend)
        .readiness(readiness)
        .add_listener(
            SocketAddr::new(common.admin_host, admin_port),
            move |_core| HttpHandler::new(admin.clone()),
        );
    if let Some(cores) = &common.cores {
        builder = builder.cores(cores.iter().copied());
    }
    let server = builder.start(move |core| {
        let routes = Router::new(greetings.clone()).get("/hello/{name}", hello);
        let handler = HttpHandler::new(routes.build().expect("the routes do not conflict"));
        registry.register_http(core, handler.stats_reader());
        handler
    })?;
    metrics.set_server(server.stats_reader());
    server.shutdown_on_signals()?;
    let admin_addr = server.listeners().last().map(|l| l.addr.to_string());
    tracing::info!(
        "cookbook_observability listening on {} (admin on {})",
        server.local_addr(),
        admin_addr.unwrap_or_default()
    );
    server.join()
}
