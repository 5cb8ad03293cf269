//! `axum_api`: the axum twin of percore's `json_api` example, the tokio-ct
//! column of the `api` cells. The same small JSON API, written as an axum
//! user would write it (a `Router`, extractors, `Json` and `State`), and
//! served as the harness's tokio-ct servers are: one current-thread
//! runtime per core, pinned, each with its own SO_REUSEPORT listener and
//! its own state, so counters and the upstream pool are per core.
//!
//! With `--on-percore uring|epoll` the very same app is served by percore
//! instead (percore-tokio's `HyperHandler`, one router per core): the
//! other side of `benches/axum_percore.sh`.
//!
//! Usage: `axum_api [--port P] [--cores 0,1] [--upstream HOST:PORT]
//! [--on-percore uring|epoll]`, listening on 127.0.0.1:P (default 8080)
//! until SIGINT or SIGTERM.
//! `benches/api_parity.sh` checks that both servers answer alike.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{rejection::JsonRejection, Path, Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use percore_benches::cli::parse_cpu_list;
use percore_benches::signals::block_stop_signals;
use percore_benches::tokio_servers::{start_ct_with, stopped};

// ===== the app: routes and handlers =====

/// What one core's handlers share. Atomics because axum wants `Sync`
/// state even on a current-thread runtime; one thread uses them.
struct Core {
    next_id: AtomicU64,
    requests: AtomicU64,
    upstream: Option<String>,
    client: Client<HttpConnector, Empty<Bytes>>,
}

fn app(upstream: Option<String>) -> Router {
    let core = Arc::new(Core {
        next_id: AtomicU64::new(1),
        requests: AtomicU64::new(0),
        upstream,
        client: Client::builder(TokioExecutor::new()).build_http(),
    });
    Router::new()
        .route("/users/{id}", get(user))
        .route("/users", post(create_user))
        .route("/search", get(search))
        .route("/stats", get(stats))
        .route("/weather/{city}", get(weather))
        .layer(middleware::from_fn_with_state(core.clone(), count))
        .with_state(core)
}

/// Counts every request of this core, unknown paths included.
async fn count(State(core): State<Arc<Core>>, request: Request, next: Next) -> Response {
    core.requests.fetch_add(1, Relaxed);
    next.run(request).await
}

#[derive(Serialize)]
struct User {
    id: u64,
    name: String,
}

async fn user(Path(id): Path<u64>) -> Json<User> {
    let name = format!("user-{id}");
    Json(User { id, name })
}

#[derive(Deserialize)]
struct NewUser {
    name: String,
}

async fn create_user(
    State(core): State<Arc<Core>>,
    body: Result<Json<NewUser>, JsonRejection>,
) -> Result<(StatusCode, Json<User>), StatusCode> {
    // axum answers 422 to JSON of the wrong shape; the API says 400.
    let Json(new) = body.map_err(|e| match e {
        JsonRejection::MissingJsonContentType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        _ => StatusCode::BAD_REQUEST,
    })?;
    let id = core.next_id.fetch_add(1, Relaxed);
    Ok((StatusCode::CREATED, Json(User { id, name: new.name })))
}

#[derive(Deserialize, Serialize)]
struct Search {
    #[serde(default = "ten")]
    limit: u32,
    #[serde(default)]
    q: String,
}

fn ten() -> u32 {
    10
}

async fn search(Query(search): Query<Search>) -> Json<Search> {
    Json(search)
}

async fn stats(State(core): State<Arc<Core>>) -> Json<Value> {
    Json(json!({ "requests": core.requests.load(Relaxed) }))
}

#[derive(Serialize)]
struct Weather {
    city: String,
    upstream_bytes: usize,
    upstream_status: u16,
}

async fn weather(
    State(core): State<Arc<Core>>,
    Path(city): Path<String>,
) -> Result<Json<Weather>, StatusCode> {
    let upstream = core
        .upstream
        .as_ref()
        .ok_or(StatusCode::SERVICE_UNAVAILABLE)?;
    let uri = format!("http://{upstream}/city/{city}");
    let response = core.client.get(uri.parse().map_err(bad_gateway)?);
    let response = response.await.map_err(bad_gateway)?;
    let upstream_status = response.status().as_u16();
    let body = response.into_body().collect().await.map_err(bad_gateway)?;
    let upstream_bytes = body.to_bytes().len();
    Ok(Json(Weather {
        city,
        upstream_status,
        upstream_bytes,
    }))
}

fn bad_gateway<E>(_: E) -> StatusCode {
    StatusCode::BAD_GATEWAY
}

// ===== runtimes and listeners =====

struct Options {
    port: u16,
    cores: Vec<usize>,
    upstream: Option<String>,
    /// Served by percore on this backend rather than by tokio.
    on_percore: Option<String>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut o = Options {
        port: 8080,
        cores: Vec::new(),
        upstream: None,
        on_percore: None,
    };
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" => o.port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--cores" => o.cores = parse_cpu_list(&value()?)?,
            "--upstream" => o.upstream = Some(value()?),
            "--on-percore" => o.on_percore = Some(value()?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    let o = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!(
                "axum_api: {e}\nusage: axum_api [--port P] [--cores 0,1] [--upstream HOST:PORT] [--on-percore uring|epoll]"
            );
            return ExitCode::from(2);
        }
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], o.port));
    if let Some(backend) = &o.on_percore {
        return on_percore(addr, &o.cores, backend, o.upstream);
    }
    let signals = block_stop_signals();
    let upstream = o.upstream;
    let started = start_ct_with(addr, &o.cores, move |listener, mut stop| {
        // As the other baselines: answers leave at once, not after Nagle.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let serve = axum::serve(listener, app(upstream.clone()));
        async move {
            let stop = async move { stopped(&mut stop).await };
            if let Err(e) = serve.with_graceful_shutdown(stop).await {
                eprintln!("axum_api: {e}");
            }
        }
    });
    let server = match started {
        Ok(s) => s,
        Err(e) => {
            eprintln!("axum_api: cannot start on {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "axum_api: on {} ({} current_thread runtime(s))",
        server.target(),
        o.cores.len().max(1)
    );
    signals.wait();
    match server.stop() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("axum_api: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Serves the same app on percore, until SIGINT or SIGTERM.
#[cfg(feature = "percore")]
fn on_percore(
    addr: SocketAddr,
    cores: &[usize],
    backend: &str,
    upstream: Option<String>,
) -> ExitCode {
    let run = || -> std::io::Result<()> {
        let backend: percore::Backend = backend.parse().map_err(std::io::Error::other)?;
        let mut builder = percore::Server::builder().address(addr).backend(backend);
        if !cores.is_empty() {
            builder = builder.cores(cores.iter().copied());
        }
        let server = builder
            .start(move |_core| percore_tokio::hyper::HyperHandler::new(app(upstream.clone())))?;
        eprintln!("axum_api: on percore ({}), {addr}", server.backend());
        server.shutdown_on_signals()?;
        server.join()
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("axum_api --on-percore: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(not(feature = "percore"))]
fn on_percore(_: SocketAddr, _: &[usize], _: &str, _: Option<String>) -> ExitCode {
    eprintln!("axum_api: built without the feature `percore`");
    ExitCode::from(2)
}
