//! JSON bodies in and out and the `http` crate's types, behind a router,
//! on both backends: round trips, and the 400, 413 and 415 answers that
//! say what was wrong. (Features `json` and `http`, which `./test.sh`
//! turns on.)
#![cfg(all(feature = "json", feature = "http"))]

use crate::support;

use std::borrow::Cow;
use std::cell::Cell;
use std::io;

use percore_handlers::http::{Routed, Router, Routes};
use percore_test_kit::http::*;
use percore_test_kit::*;
use serde::{Deserialize, Serialize};
use support::http::*;

#[derive(Default)]
struct App {
    next_id: Cell<u64>,
}

#[derive(Deserialize)]
struct NewUser<'a> {
    /// Borrowed from the body unless it holds escapes.
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(default)]
    tags: Vec<String>,
}

#[derive(Serialize)]
struct User<'a> {
    id: u64,
    name: &'a str,
    tags: &'a [String],
}

async fn create(app: &App, req: &mut Routed<'_, '_>, res: &mut Response<'_>) -> io::Result<()> {
    let new: NewUser<'_> = req.json().await?;
    app.next_id.set(app.next_id.get() + 1);
    let user = User {
        id: app.next_id.get(),
        name: &new.name,
        tags: &new.tags,
    };
    res.json(201, &user)?;
    Ok(())
}

/// Answers with the request head as the `http` crate sees it, through
/// an `http::Response`.
async fn parts(_: &App, req: &mut Routed<'_, '_>, res: &mut Response<'_>) -> io::Result<()> {
    let parts = req.to_http_parts()?;
    let body = format!(
        "{} {} {:?} {:?}",
        parts.method,
        parts.uri,
        parts.version,
        parts.headers.get("x-thing")
    );
    let answer = ::http::Response::builder()
        .status(202)
        .header("X-Seen", parts.headers.len().to_string())
        .header("Content-Length", "999")
        .body(body)
        .map_err(io::Error::other)?;
    res.set_http(answer)?;
    Ok(())
}

/// Every error answer as a JSON object.
fn json_errors(error: &percore_handlers::http::HttpError, body: &mut Vec<u8>) -> &'static str {
    let value = serde_json::json!({ "status": error.status, "error": error.reason });
    serde_json::to_writer(body, &value).expect("a JSON value serializes");
    "application/json"
}

fn routes() -> Routes<App, impl percore_handlers::http::router::Chain<App>> {
    Router::new(App::default())
        .post("/users", create)
        .body_limit(64)
        .get("/parts/{x}", parts)
        .error_body(json_errors)
        .build()
        .expect("routes")
}

fn json_post(path: &str, content_type: &str, body: &str) -> Vec<u8> {
    post(path, content_type, body.as_bytes())
}

backend_tests! {
    /// JSON in (strings borrowed from the body), JSON out, per-core ids.
    fn json_round_trips(backend) {
        let server = TestServer::start(backend, Config::default(), routes);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&json_post("/users", "application/json", r#"{"name":"ann","tags":["a"]}"#));
        assert_eq!(r.status, 201);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.body, br#"{"id":1,"name":"ann","tags":["a"]}"#);
        let r = c.roundtrip(&json_post("/users", "application/problem+json; charset=utf-8", r#"{"name":"b\u00e9"}"#));
        assert_eq!(String::from_utf8_lossy(&r.body), r#"{"id":2,"name":"bé","tags":[]}"#);
    }

    /// Malformed JSON and JSON of the wrong shape are 400s that say
    /// where; another content type is a 415; a body over the route's
    /// limit a 413. All in the router's JSON error format.
    fn bad_json_is_refused_with_a_reason(backend) {
        let server = TestServer::start(backend, Config::default(), routes);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&json_post("/users", "application/json", r#"{"name":"#));
        assert_eq!(r.status, 400);
        assert_eq!(String::from_utf8_lossy(&r.body), r#"{"error":"invalid JSON: EOF while parsing a value at line 1 column 8","status":400}"#);
        assert!(!r.closes());
        let r = c.roundtrip(&json_post("/users", "application/json", r#"{"nom":"x"}"#));
        assert_eq!(String::from_utf8_lossy(&r.body), r#"{"error":"invalid JSON: missing field `name` at line 1 column 11","status":400}"#);
        let r = c.roundtrip(&json_post("/users", "text/plain", r#"{"name":"x"}"#));
        assert_eq!(r.status, 415);
        assert_eq!(String::from_utf8_lossy(&r.body), r#"{"error":"expected Content-Type: application/json","status":415}"#);
        let r = c.roundtrip(b"POST /users HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}");
        assert_eq!(r.status, 415);
        let long = format!(r#"{{"name":"{}"}}"#, "x".repeat(64));
        let r = c.roundtrip(&json_post("/users", "application/json", &long));
        assert_eq!(r.status, 413);
        assert_eq!(r.header("content-type"), Some("application/json"));
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/nowhere"));
        assert_eq!(String::from_utf8_lossy(&r.body), r#"{"error":"Not Found","status":404}"#);
    }

    /// A request head as `http::request::Parts`, and an `http::Response`
    /// as the answer (its `Content-Length` left to the server).
    fn http_crate_types_convert(backend) {
        let server = TestServer::start(backend, Config::default(), routes);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(b"GET /parts/1?q=2 HTTP/1.1\r\nHost: t\r\nX-Thing: yes\r\n\r\n");
        assert_eq!(r.status, 202);
        assert_eq!(r.header("x-seen"), Some("2"));
        assert_eq!(r.body, br#"GET /parts/1?q=2 HTTP/1.1 Some("yes")"#);
        assert_eq!(r.header("content-length"), Some(r.body.len().to_string().as_str()));
    }
}
