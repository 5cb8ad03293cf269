//! An axum app, written as it would be for tokio, served by percore: one
//! router per core, each core's hyper connections on its own io_uring (or
//! epoll). The handlers may await tokio-based clients and timers
//! (`/slow` sleeps on tokio's timer).
//!
//! ```text
//! cargo run --release --features axum --bin axum_app -- [--port 8084] [--cores 0,1] [--backend auto]
//! curl -s 127.0.0.1:8084/users/7                # {"id":7,"name":"user7"}
//! curl -s --http2-prior-knowledge 127.0.0.1:8084/users/7   # the same over HTTP/2
//! curl -s -d '{"name":"ann"}' -H 'content-type: application/json' 127.0.0.1:8084/users
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use clap::Parser;
use percore_examples::{exit_with, init_logging, parse_args, run, CommonArgs};
use serde::Deserialize;
use serde_json::{json, Value};

// ===== the app, unchanged from a tokio deployment =====

/// State made once per core: axum wants it `Send + Sync`, but only its
/// core touches it, so its counter is never contended.
#[derive(Default)]
struct Users {
    next_id: AtomicU64,
}

#[derive(Deserialize)]
struct NewUser {
    name: String,
}

fn app() -> Router {
    Router::new()
        .route("/users/{id}", get(user))
        .route("/users", axum::routing::post(create_user))
        .route("/slow", get(slow))
        .with_state(Arc::new(Users::default()))
}

async fn user(Path(id): Path<u64>) -> Json<Value> {
    Json(json!({ "id": id, "name": format!("user{id}") }))
}

async fn create_user(State(users): State<Arc<Users>>, Json(new): Json<NewUser>) -> Json<Value> {
    let id = users.next_id.fetch_add(1, Ordering::Relaxed) + 1;
    Json(json!({ "id": id, "name": new.name }))
}

async fn slow() -> &'static str {
    tokio::time::sleep(Duration::from_millis(100)).await;
    "done\n"
}

// ===== serving it on percore =====

/// An axum app, written as for tokio, served by percore.
#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
}

fn main() {
    let Cli { mut common } = parse_args("8084");
    // hyper serves HTTP/2 too: over TLS, ALPN offers it first.
    common.offer_h2 = true;
    init_logging();
    // The factory runs on each core's thread: one router, and one state,
    // per core.
    let factory = |_: &percore::CoreContext| percore_tokio::hyper::HyperHandler::new(app());
    if let Err(e) = run("axum_app", &common, factory) {
        exit_with(1, &format!("axum_app: {e}"));
    }
}
