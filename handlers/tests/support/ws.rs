//! WebSocket test servers; the raw client they are tested with is the
//! test kit's ([`percore_test_kit::ws`]).

use std::io;

use percore::{Backend, ServerHandle};
use percore_handlers::http::{HttpHandler, Request, Response, Service};
use percore_handlers::ws::{Handshake, Message, WsConfig, WsStatsReader};
use percore_test_kit::*;

pub(crate) use percore_test_kit::ws::*;

/// A WebSocket echo at `/echo` (subprotocols `chat` and `echo`, origin
/// `http://evil.example` refused with 403), a raw-bytes echo protocol
/// `x-echo` at `/raw` (the general upgrade), and 200 `plain` elsewhere.
pub(crate) struct WsEcho(pub(crate) WsConfig);

impl Service for WsEcho {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        match req.path() {
            "/echo" => {
                let Some(mut hs) = Handshake::new(req, res) else {
                    return Ok(());
                };
                if hs.origin() == Some(b"http://evil.example") {
                    res.send(403, None, b"origin refused")?;
                    return Ok(());
                }
                hs.select_protocol(&["chat", "echo"]);
                hs.accept(res, self.0, |mut ws| async move {
                    while let Some(msg) = ws.recv().await? {
                        ws.send(msg)?;
                    }
                    Ok(())
                })?;
            }
            "/flood" => {
                // Sends 256 KiB messages every millisecond until the
                // connection is dropped: a client that never reads is a
                // slow reader.
                let Some(hs) = Handshake::new(req, res) else {
                    return Ok(());
                };
                hs.accept(res, self.0, |ws| async move {
                    let msg = Message::binary(vec![7u8; 256 << 10]);
                    while ws.send(msg.clone()).is_ok() {
                        percore::time::sleep(std::time::Duration::from_millis(1)).await;
                    }
                    Ok(())
                })?;
            }
            "/raw" if req.upgrade_protocol() == Some(b"x-echo") => {
                res.upgrade("x-echo", |mut up| async move {
                    let read = up.take_read();
                    if !read.is_empty() {
                        up.write_all(read).await.0?;
                    }
                    while let Some(chunk) = up.read().await? {
                        up.write_all(chunk.to_vec()).await.0?;
                    }
                    // The client may have left already.
                    let _ = up.shutdown_write();
                    Ok(())
                })?;
            }
            _ => res.send(200, Some(b"text/plain"), b"plain")?,
        }
        Ok(())
    }
}

/// [`WsEcho`] with `config` on one core.
pub(crate) fn ws_server(backend: Backend, config: WsConfig) -> ServerHandle {
    ws_server_with_stats(backend, config).0
}

/// [`ws_server`], with a reader of its core's WebSocket counters.
pub(crate) fn ws_server_with_stats(
    backend: Backend,
    config: WsConfig,
) -> (ServerHandle, WsStatsReader) {
    let (tx, rx) = std::sync::mpsc::channel();
    let server = builder(backend)
        .start(move |_core| {
            let _ = tx.send(percore_handlers::ws::stats_reader());
            HttpHandler::new(WsEcho(config))
        })
        .expect("start");
    check_backend(&server, backend);
    let stats = rx.recv().expect("the core's counters");
    (server, stats)
}
