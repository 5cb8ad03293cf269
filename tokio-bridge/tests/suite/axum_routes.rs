//! An axum app on percore: routes, extractors, JSON, a 404, tokio inside
//! an axum handler, a graceful stop with a request in flight, and wrk.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use percore_test_kit::http::{one, Client};
use percore_test_kit::{builder, check_backend, wait_until, wrk, ServerHandle};
use percore_tokio::hyper::HyperHandler;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::Notify;

/// A hang detector, not a speed limit.
pub(crate) const HANG: Duration = Duration::from_secs(60);

/// One core's state. axum wants it `Send + Sync`; it is made per core by
/// the server's factory, so only that core touches it.
struct Core {
    next_id: AtomicU64,
    gate: Arc<Gate>,
}

/// What holds `/held` requests: the test opens it.
#[derive(Default)]
pub(crate) struct Gate {
    /// Requests waiting inside `/held`.
    pub(crate) held: AtomicU64,
    pub(crate) open: Notify,
}

#[derive(Deserialize)]
struct NewUser {
    name: String,
}

#[derive(Deserialize)]
struct Search {
    q: String,
    limit: Option<u32>,
}

fn app(gate: Arc<Gate>) -> Router {
    let core = Arc::new(Core {
        next_id: AtomicU64::new(1),
        gate,
    });
    Router::new()
        .route("/users/{id}", get(user))
        .route("/users", post(create_user))
        .route("/search", get(search))
        .route("/nap", get(nap))
        .route("/held", get(held))
        .with_state(core)
}

async fn user(Path(id): Path<u64>) -> Json<Value> {
    Json(json!({ "id": id, "name": format!("user{id}") }))
}

async fn create_user(
    State(core): State<Arc<Core>>,
    Json(new): Json<NewUser>,
) -> (StatusCode, Json<Value>) {
    let id = core.next_id.fetch_add(1, Ordering::Relaxed);
    (
        StatusCode::CREATED,
        Json(json!({ "id": id, "name": new.name })),
    )
}

async fn search(Query(s): Query<Search>) -> String {
    format!("{}:{}", s.q, s.limit.unwrap_or(10))
}

/// tokio's timer inside an axum handler.
async fn nap() -> &'static str {
    tokio::time::sleep(Duration::from_millis(5)).await;
    "rested"
}

/// Waits until the test lets it go.
async fn held(State(core): State<Arc<Core>>) -> &'static str {
    let open = core.gate.open.notified();
    core.gate.held.fetch_add(1, Ordering::SeqCst);
    open.await;
    "released"
}

pub(crate) fn start(backend: percore::Backend, gate: Arc<Gate>) -> ServerHandle {
    let server = builder(backend)
        .start(move |_core| HyperHandler::new(app(gate.clone())))
        .expect("server starts");
    check_backend(&server, backend);
    server
}

fn body(addr: SocketAddr, req: &str) -> (u16, String) {
    let resp = one(addr, req.as_bytes());
    (
        resp.status,
        String::from_utf8(resp.body).expect("UTF-8 body"),
    )
}

percore_test_kit::backend_tests! {
    /// Routes, extractors, JSON in and out, a 404 and a 422, kept alive.
    fn serves_an_axum_app(backend) {
        let server = start(backend, Arc::default());
        let addr = server.local_addr();

        let (status, user) = body(addr, "GET /users/7 HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(status, 200);
        let user: Value = serde_json::from_str(&user).expect("JSON");
        assert_eq!(user, json!({ "id": 7, "name": "user7" }));

        let json = r#"{"name":"ann"}"#;
        let post = format!(
            "POST /users HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
            json.len()
        );
        let mut c = Client::connect(addr);
        for id in 1..=3 {
            let resp = c.roundtrip(post.as_bytes());
            assert_eq!(resp.status, 201);
            let made: Value = serde_json::from_slice(&resp.body).expect("JSON");
            assert_eq!(made, json!({ "id": id, "name": "ann" }));
        }
        let resp = c.roundtrip(b"GET /search?q=rust%20io&limit=3 HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!((resp.status, &resp.body[..]), (200, &b"rust io:3"[..]));
        let resp = c.roundtrip(b"GET /nap HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!((resp.status, &resp.body[..]), (200, &b"rested"[..]));
        let resp = c.roundtrip(b"GET /nowhere HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(resp.status, 404);
        let bad = "POST /users HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
        let resp = c.roundtrip(bad.as_bytes());
        assert_eq!(resp.status, 422);
        let resp = c.roundtrip(b"GET /search HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(resp.status, 400);

        server.shutdown();
        server.join().expect("server stops cleanly");
    }

    /// At the stop a request in flight is answered, then its connection
    /// closes; an idle keep-alive connection closes at once.
    fn stops_gracefully(backend) {
        let gate = Arc::new(Gate::default());
        let server = start(backend, gate.clone());
        let addr = server.local_addr();

        // 1. One idle keep-alive connection, one request held in a handler.
        let mut idle = Client::connect(addr);
        assert_eq!(idle.roundtrip(b"GET /users/1 HTTP/1.1\r\nHost: t\r\n\r\n").status, 200);
        let mut busy = Client::connect(addr);
        busy.send(b"GET /held HTTP/1.1\r\nHost: t\r\n\r\n");
        wait_until(HANG, "the request held", || gate.held.load(Ordering::SeqCst), |&n| n == 1);

        // 2. The stop: the idle connection ends, the held one waits.
        server.shutdown();
        idle.expect_eof_within(HANG);

        // 3. Released, the held request is answered and its connection ends.
        gate.open.notify_waiters();
        let resp = busy.response();
        assert_eq!((resp.status, &resp.body[..]), (200, &b"released"[..]));
        busy.expect_eof_within(HANG);
        server.join().expect("server stops cleanly");
    }

    /// wrk against the app: every answer a 200, no socket error.
    fn wrk_smoke(backend) {
        let server = start(backend, Arc::default());
        let url = format!("http://127.0.0.1:{}/users/42", server.local_addr().port());
        if let Some(out) = wrk(&["-t1", "-c16", "-d1s", &url]) {
            let report = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{report}");
            assert!(!report.contains("Non-2xx"), "{report}");
            assert!(!report.contains("Socket errors"), "{report}");
            assert!(report.contains(" requests in "), "{report}");
        }
        server.shutdown();
        server.join().expect("server stops cleanly");
    }
}
