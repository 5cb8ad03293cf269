//! The same axum app over HTTP/2 in clear text (prior knowledge), on both
//! backends: routes and JSON, many streams of one connection served at
//! once, a graceful stop that lets the streams in flight finish and
//! refuses new ones, and h2load.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http2::SendRequest;
use hyper::{Request, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use percore_test_kit::{installed, wait_until};
use serde_json::{json, Value};

use crate::axum_routes::{start, Gate, HANG};

/// A tokio runtime on the test's thread, for hyper's HTTP/2 client.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// One HTTP/2 connection (prior knowledge) to `addr`, its driver a task.
async fn h2_connect(addr: SocketAddr) -> SendRequest<Full<Bytes>> {
    let socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(socket))
            .await
            .expect("HTTP/2 handshake");
    tokio::spawn(conn);
    sender
}

/// Sends `method path` with `body` and returns the status, the version
/// and the body.
async fn ask(
    sender: &mut SendRequest<Full<Bytes>>,
    method: &str,
    path: &str,
    body: &'static str,
) -> Result<(u16, Version, Bytes), hyper::Error> {
    let req = Request::builder()
        .method(method)
        .uri(format!("http://t{path}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .expect("a valid request");
    sender.ready().await?;
    let resp = sender.send_request(req).await?;
    let (status, version) = (resp.status().as_u16(), resp.version());
    let body = resp.into_body().collect().await?.to_bytes();
    Ok((status, version, body))
}

percore_test_kit::backend_tests! {
    parallel;

    /// Routes, extractors and JSON over HTTP/2; a 404 and a 422; each
    /// answer says HTTP/2.
    fn serves_an_axum_app_over_h2c(backend) {
        let server = start(backend, Arc::default());
        let addr = server.local_addr();
        runtime().block_on(async {
            let mut h2 = h2_connect(addr).await;
            let (status, version, body) = ask(&mut h2, "GET", "/users/7", "").await.expect("GET");
            assert_eq!((status, version), (200, Version::HTTP_2));
            let user: Value = serde_json::from_slice(&body).expect("JSON");
            assert_eq!(user, json!({ "id": 7, "name": "user7" }));
            let (status, _, body) = ask(&mut h2, "POST", "/users", r#"{"name":"ann"}"#).await.expect("POST");
            assert_eq!(status, 201);
            let made: Value = serde_json::from_slice(&body).expect("JSON");
            assert_eq!(made["name"], "ann");
            assert_eq!(ask(&mut h2, "GET", "/nowhere", "").await.expect("404").0, 404);
            assert_eq!(ask(&mut h2, "POST", "/users", "{}").await.expect("422").0, 422);
            let (status, _, body) = ask(&mut h2, "GET", "/nap", "").await.expect("tokio's timer");
            assert_eq!((status, &body[..]), (200, &b"rested"[..]));
        });
        server.shutdown();
        server.join().expect("server stops cleanly");
    }

    /// 50 streams of one connection wait inside the app at the same time
    /// (each answer needs the test to see all 50 held, so they cannot have
    /// been served one after another); released, all 50 are answered.
    fn serves_the_streams_of_one_connection_at_once(backend) {
        let gate = Arc::new(Gate::default());
        let server = start(backend, gate.clone());
        let addr = server.local_addr();
        runtime().block_on(async {
            let h2 = h2_connect(addr).await;
            let asks: Vec<_> = (0..50)
                .map(|_| {
                    let mut h2 = h2.clone();
                    tokio::spawn(async move { ask(&mut h2, "GET", "/held", "").await })
                })
                .collect();
            let waiting = gate.clone();
            tokio::task::spawn_blocking(move || {
                wait_until(HANG, "50 streams held at once", || waiting.held.load(Ordering::SeqCst), |&n| n == 50);
            })
            .await
            .expect("the wait");
            gate.open.notify_waiters();
            for ask in asks {
                let (status, _, body) = ask.await.expect("task").expect("answer");
                assert_eq!((status, &body[..]), (200, &b"released"[..]));
            }
        });
        server.shutdown();
        server.join().expect("server stops cleanly");
    }

    /// At the stop (GOAWAY), the stream in flight is answered once
    /// released; a stream opened after the GOAWAY is refused; then the
    /// connection closes and the server returns.
    fn stops_gracefully_over_h2(backend) {
        let gate = Arc::new(Gate::default());
        let server = start(backend, gate.clone());
        let addr = server.local_addr();
        runtime().block_on(async {
            let h2 = h2_connect(addr).await;
            let mut first = h2.clone();
            let held = tokio::spawn(async move { ask(&mut first, "GET", "/held", "").await });
            let waiting = gate.clone();
            tokio::task::spawn_blocking(move || {
                wait_until(HANG, "the request held", || waiting.held.load(Ordering::SeqCst), |&n| n == 1);
            })
            .await
            .expect("the wait");
            server.shutdown();
            // The GOAWAY reaches the client: a new stream is refused.
            let mut late = h2.clone();
            let refused = tokio::time::timeout(HANG, async {
                loop {
                    match ask(&mut late, "GET", "/users/1", "").await {
                        Err(_) => break,
                        Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
                    }
                }
            })
            .await;
            assert!(refused.is_ok(), "streams were still taken a minute after the stop");
            gate.open.notify_waiters();
            let (status, _, body) = held.await.expect("task").expect("the held stream is answered");
            assert_eq!((status, &body[..]), (200, &b"released"[..]));
        });
        server.join().expect("server stops cleanly");
    }

    /// h2load: 400 requests over 4 connections, 10 streams each at once:
    /// all answered 200.
    fn h2load_smoke(backend) {
        if !installed("h2load") {
            return;
        }
        let server = start(backend, Arc::default());
        let url = format!("http://127.0.0.1:{}/users/42", server.local_addr().port());
        let out = std::process::Command::new("h2load")
            .args(["-n", "400", "-c", "4", "-m", "10", &url])
            .output()
            .expect("run h2load");
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{report}");
        assert!(report.contains("400 succeeded, 0 failed, 0 errored"), "{report}");
        assert!(report.contains("status codes: 400 2xx"), "{report}");
        server.shutdown();
        server.join().expect("server stops cleanly");
    }
}
