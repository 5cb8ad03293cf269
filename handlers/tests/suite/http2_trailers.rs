//! Trailers over HTTP/2 on both backends, with the `h2` crate as the
//! client: a request's trailer fields reach the service once it has read
//! the body, and the service's trailers follow its body, also when it
//! streams it or has none. (Features `h2` and `json`.)
#![cfg(all(feature = "h2", feature = "json"))]

use crate::support;

use std::net::SocketAddr;

use ::http::{HeaderMap, HeaderValue, Request};
use bytes::Bytes;
use percore_handlers::http::{Routed, Router, Routes};
use percore_test_kit::*;
use support::http::*;

/// Reads the body, then answers its length with the request's
/// `x-check` trailer in a trailer of its own (`x-seen`), and a fixed one.
async fn sum(_: &(), req: &mut Routed<'_, '_>, res: &mut Response<'_>) -> std::io::Result<()> {
    let len = req.body().await?.len();
    let seen = req.trailer("x-check").unwrap_or(b"none").to_vec();
    res.send(200, None, len.to_string().as_bytes())?;
    res.trailer("x-seen", &seen)?;
    res.trailer("grpc-status", b"0")?;
    Ok(())
}

/// Streams two pieces, then trailers.
async fn streamed(_: &(), _: &mut Routed<'_, '_>, res: &mut Response<'_>) -> std::io::Result<()> {
    res.write(b"one ");
    res.flush().await?;
    res.write(b"two");
    res.trailer("x-parts", b"2")?;
    Ok(())
}

/// No body, only trailers.
async fn empty(_: &(), _: &mut Routed<'_, '_>, res: &mut Response<'_>) -> std::io::Result<()> {
    res.trailer("x-empty", b"yes")?;
    Ok(())
}

fn routes() -> Routes<(), impl percore_handlers::http::router::Chain<()>> {
    Router::new(())
        .post("/sum", sum)
        .get("/streamed", streamed)
        .get("/empty", empty)
        .build()
        .expect("the test routes do not conflict")
}

/// `method path` with `body` and `trailers` on one h2 connection:
/// status, body, trailers.
async fn ask(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &'static [u8],
    trailers: Option<HeaderMap>,
) -> (u16, Vec<u8>, Option<HeaderMap>) {
    let socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (client, conn) = h2::client::handshake(socket).await.expect("handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut client = client.ready().await.expect("ready");
    let req = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .body(())
        .expect("request");
    let end = body.is_empty() && trailers.is_none();
    let (resp, mut send) = client.send_request(req, end).expect("send");
    if !body.is_empty() {
        send.send_data(Bytes::from_static(body), trailers.is_none())
            .expect("data");
    }
    if let Some(t) = trailers {
        send.send_trailers(t).expect("trailers");
    }
    let resp = resp.await.expect("response");
    let status = resp.status().as_u16();
    let mut recv = resp.into_body();
    let mut got = Vec::new();
    while let Some(data) = recv.data().await {
        let data = data.expect("data");
        let _ = recv.flow_control().release_capacity(data.len());
        got.extend_from_slice(&data);
    }
    let trailers = recv.trailers().await.expect("trailers");
    (status, got, trailers)
}

backend_tests! {
    parallel;
    fn trailers_both_ways(backend) {
        let server = TestServer::start(backend, Config::default(), routes);
        let addr = server.addr;
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let mut t = HeaderMap::new();
            t.insert("x-check", HeaderValue::from_static("abc"));
            let (status, body, trailers) = ask(addr, "POST", "/sum", b"12345", Some(t)).await;
            assert_eq!((status, &body[..]), (200, &b"5"[..]));
            let trailers = trailers.expect("trailers");
            assert_eq!(trailers.get("x-seen").map(|v| v.as_bytes()), Some(&b"abc"[..]));
            assert_eq!(trailers.get("grpc-status").map(|v| v.as_bytes()), Some(&b"0"[..]));

            let (_, _, trailers) = ask(addr, "POST", "/sum", b"12345", None).await;
            assert_eq!(trailers.expect("trailers").get("x-seen").map(|v| v.as_bytes()), Some(&b"none"[..]));

            let (status, body, trailers) = ask(addr, "GET", "/streamed", b"", None).await;
            assert_eq!((status, &body[..]), (200, &b"one two"[..]));
            assert_eq!(trailers.expect("trailers").get("x-parts").map(|v| v.as_bytes()), Some(&b"2"[..]));

            let (status, body, trailers) = ask(addr, "GET", "/empty", b"", None).await;
            assert_eq!((status, body.len()), (200, 0));
            assert_eq!(trailers.expect("trailers").get("x-empty").map(|v| v.as_bytes()), Some(&b"yes"[..]));
        });
    }
}
