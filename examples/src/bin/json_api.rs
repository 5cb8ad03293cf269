//! A JSON API on percore's router (`curl localhost:8082/users/42`): path and
//! query parameters, JSON in and out, per-core counters, another service.

use std::{cell::Cell, io};

use clap::Parser;
use percore_examples::{exit_with, init_logging, parse_args, run, CommonArgs};
use percore_handlers::client::{Client, ErrorKind};
use percore_handlers::http::{Config, HttpError, HttpHandler, HttpStatsReader};
use percore_handlers::http::{Response, Routed, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
    /// The service `/weather/{city}` asks
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8080")]
    upstream: String,
}

/// One per core: a plain `Cell`, no locks.
struct App {
    next_id: Cell<u64>,
    client: Client,
    upstream: String,
    counters: HttpStatsReader,
}

type Req<'a, 'b, 'c> = &'a mut Routed<'b, 'c>;
type Res<'a, 'b> = &'a mut Response<'b>;

#[derive(Serialize, Deserialize)]
struct User {
    #[serde(default)]
    id: u64,
    name: String,
}

async fn user(_: &App, req: Req<'_, '_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let id: u64 = req.param("id")?;
    let name = format!("user-{id}");
    Ok(res.json(200, &User { id, name })?)
}

async fn create(app: &App, req: Req<'_, '_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let mut user: User = req.json().await?;
    user.id = app.next_id.get() + 1;
    app.next_id.set(user.id);
    Ok(res.json(201, &user)?)
}

async fn search(_: &App, req: Req<'_, '_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let limit: u32 = req.query_as("limit")?.unwrap_or(10);
    let q = req.query_value("q").unwrap_or_default();
    Ok(res.json(200, &json!({ "q": q, "limit": limit }))?)
}

async fn stats(app: &App, _: Req<'_, '_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let s = app.counters.snapshot(); // this core's answers, all but this one
    let requests = s.status_2xx + s.status_3xx + s.status_4xx + s.status_5xx + 1;
    Ok(res.json(200, &json!({ "requests": requests }))?)
}

async fn weather(app: &App, req: Req<'_, '_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let city = req.param_str("city")?;
    // The city joins the upstream's path as one encoded segment, never
    // pasted into the URL: `..%2Fadmin` must not reach `/admin` there.
    let url = format!("http://{}/city", app.upstream);
    let call = app.client.get(&url).path_segment(&city).send().await;
    let mut answer = match call {
        Err(e) if matches!(e.kind(), ErrorKind::InvalidSegment(_)) => {
            return Err(HttpError::new(400, "not a city name (`.`, `..`, `/`)").into());
        }
        answer => answer?,
    };
    let body = answer.body().await?;
    let (status, bytes) = (answer.status(), body.len());
    let out = json!({ "city": city, "upstream_status": status, "upstream_bytes": bytes });
    Ok(res.json(200, &out)?)
}

fn main() {
    let Cli {
        mut common,
        upstream,
    } = parse_args("8082");
    common.offer_h2 = cfg!(feature = "h2");
    init_logging();
    let factory = move |_: &percore::CoreContext| {
        HttpHandler::with_stats(Config::default(), |counters| {
            let app = App {
                next_id: Cell::new(0),
                client: Client::new(),
                upstream: upstream.clone(),
                counters,
            };
            let routes = Router::new(app)
                .get("/users/{id}", user)
                .post("/users", create)
                .get("/search", search)
                .get("/stats", stats)
                .get("/weather/{city}", weather);
            routes.build().expect("the routes do not conflict")
        })
    };
    if let Err(e) = run("json_api", &common, factory) {
        exit_with(1, &format!("json_api: {e}"));
    }
}
