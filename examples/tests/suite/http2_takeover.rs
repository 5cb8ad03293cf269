//! FAULTS L6 with the `http_echo` binary built with HTTP/2, on both
//! backends: a server replaced with `--take-over` while HTTP/2 clients
//! keep asking. The old server's GOAWAY ends its connections after the
//! streams in flight; clients open new ones, as HTTP/2 clients do, which
//! the new server takes: no connection is refused and every request is
//! answered 200.
#![cfg(feature = "h2")]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use percore_test_kit::*;

const HTTP_ECHO: &str = env!("CARGO_BIN_EXE_http_echo");

fn serve(backend: &str, args: &[&str]) -> ChildServer {
    let mut cmd = std::process::Command::new(HTTP_ECHO);
    cmd.args(["--host", "127.0.0.1", "--backend", backend])
        .args(args)
        .env("RUST_LOG", "info")
        .env_remove("PERCORE_BACKEND")
        .env_remove("PERCORE_FAULT");
    ChildServer::spawn(cmd, Duration::from_secs(60))
        .unwrap_or_else(|f| panic!("http_echo did not start: {f:?}"))
}

fn stop(server: ChildServer) -> String {
    server.signal(libc::SIGTERM);
    let (status, log) = server.wait(Duration::from_secs(60));
    assert!(status.success(), "{status}: {log}");
    log
}

/// What the clients saw.
#[derive(Default)]
struct Seen {
    answered: AtomicU64,
    refused: AtomicU64,
    /// Connections that ended under a client (GOAWAY, close): it went on
    /// on a new one.
    reconnects: AtomicU64,
    wrong: AtomicU64,
}

/// Asks `GET /` over HTTP/2 connections to `addr`, 20 requests a
/// connection, until `done`; a request whose connection ended is asked
/// again on a new connection (what a GOAWAY tells a client it may do).
async fn ask_until(addr: SocketAddr, done: &AtomicBool, seen: &Seen) {
    while !done.load(Ordering::SeqCst) {
        let socket = match tokio::net::TcpStream::connect(addr).await {
            Ok(s) => s,
            Err(e) => {
                assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
                seen.refused.fetch_add(1, Ordering::SeqCst);
                continue;
            }
        };
        let Ok((mut sender, conn)) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(socket)).await
        else {
            seen.reconnects.fetch_add(1, Ordering::SeqCst);
            continue;
        };
        tokio::spawn(conn);
        for _ in 0..20 {
            let req = hyper::Request::get(format!("http://{addr}/"))
                .body(Empty::<Bytes>::new())
                .expect("request");
            let ready = sender.ready().await;
            let resp = match ready {
                Ok(()) => sender.send_request(req).await,
                Err(e) => Err(e),
            };
            match resp {
                Ok(resp) if resp.status() == 200 => {
                    seen.answered.fetch_add(1, Ordering::SeqCst);
                }
                Ok(_) => {
                    seen.wrong.fetch_add(1, Ordering::SeqCst);
                }
                Err(_) => {
                    seen.reconnects.fetch_add(1, Ordering::SeqCst);
                    break;
                }
            }
        }
    }
}

backend_process_tests! {
    fn take_over_with_http2_clients(backend) {
        let old = serve(backend, &["--port", "0"]);
        let addr = old.addr;
        let done = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Seen::default());
        let clients: Vec<_> = (0..4)
            .map(|_| {
                let (done, seen) = (done.clone(), seen.clone());
                std::thread::spawn(move || {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("a tokio runtime")
                        .block_on(ask_until(addr, &done, &seen));
                })
            })
            .collect();
        let answered = || seen.answered.load(Ordering::SeqCst);
        wait_until(Duration::from_secs(60), "requests to the old server", answered, |&n| n >= 200);
        let port = addr.port().to_string();
        let new = serve(backend, &["--port", &port, "--take-over"]);
        assert!(new.log().contains("take-over: sharing the port"), "{}", new.log());
        let log = stop(old);
        assert!(log.contains("stopped"), "{log}");
        let at_stop = answered();
        wait_until(Duration::from_secs(60), "requests to the new server", answered, |&n| n >= at_stop + 200);
        done.store(true, Ordering::SeqCst);
        for client in clients {
            client.join().expect("a client thread");
        }
        let (refused, wrong) = (seen.refused.load(Ordering::SeqCst), seen.wrong.load(Ordering::SeqCst));
        println!("{backend}: {} answered, {} reconnects, {refused} refused", answered(), seen.reconnects.load(Ordering::SeqCst));
        assert_eq!(refused, 0, "{backend}: connections refused during the take-over");
        assert_eq!(wrong, 0, "{backend}: answers other than 200");
        stop(new);
    }
}
