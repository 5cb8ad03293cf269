//! `ws_echo`: the WebSocket echo of `benches/ws.sh`, on percore (io_uring
//! or epoll, percore-handlers' WebSocket) or on tokio-tungstenite on a
//! tokio current-thread runtime, so that one server core runs each.
//!
//! Every server echoes each data message at `/echo`; percore's also
//! broadcasts at `/sub` (a subscriber) and `/pub` (each message a
//! publisher sends goes to every subscriber of the core, through
//! `ws::hub`), and tokio's does the same with a `tokio::sync::broadcast`
//! channel. percore's offers `permessage-deflate` when a client asks
//! (shared coders, the default), tokio-tungstenite has no deflate.
//!
//! Usage: `ws_echo --server uring|epoll|tokio [--port 8080] [--cores 0]
//! [--takeover]`, on 0.0.0.0:P; `--takeover` keeps each connection's
//! deflate windows (feature `ws-deflate`). percore's stops gracefully on SIGINT or SIGTERM.

use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;

use futures_util::{SinkExt, StreamExt};
use percore::Backend;
use percore_benches::cli::parse_cpu_list;
use percore_handlers::http::{HttpHandler, Request, Response, Service};
use percore_handlers::ws::{hub, Handshake, WsConfig};

struct Options {
    server: String,
    port: u16,
    cores: Vec<usize>,
    /// permessage-deflate with context takeover (own coders).
    takeover: bool,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut o = Options {
        server: "uring".into(),
        port: 8080,
        cores: vec![0],
        takeover: false,
    };
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--server" => o.server = value()?,
            "--port" => o.port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--cores" => o.cores = parse_cpu_list(&value()?)?,
            "--takeover" => o.takeover = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

/// The percore service: echo, subscribe and publish.
struct Ws(WsConfig);

impl Service for Ws {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        let path = req.path().to_owned();
        let Some(hs) = Handshake::new(req, res) else {
            return Ok(());
        };
        let config = self.0;
        match path.as_str() {
            "/sub" => hs.accept(res, config, |mut ws| async move {
                let _sub = hub::subscribe("bench", ws.sender());
                while ws.recv().await?.is_some() {}
                Ok(())
            })?,
            "/pub" => hs.accept(res, config, |mut ws| async move {
                while let Some(msg) = ws.recv().await? {
                    hub::publish("bench", &msg).await;
                }
                Ok(())
            })?,
            _ => hs.accept(res, config, |mut ws| async move {
                while let Some(msg) = ws.recv().await? {
                    ws.send(msg)?;
                }
                Ok(())
            })?,
        }
        Ok(())
    }
}

fn percore(o: &Options, backend: Backend) -> Result<(), String> {
    #[allow(unused_mut)]
    let mut config = WsConfig::default();
    #[cfg(feature = "ws-deflate")]
    if o.takeover {
        let mut deflate = percore_handlers::ws::Deflate::default();
        deflate.context_takeover = true;
        config.deflate = Some(deflate);
    }
    percore::Server::builder()
        .address(SocketAddr::from(([0, 0, 0, 0], o.port)))
        .backend(backend)
        .cores(o.cores.clone())
        // The broadcast and idle loads hold 10,000 WebSockets and more;
        // the default limit (10,000 a core) would hold some back.
        .max_connections(100_000)
        .serve(move |_ctx: &percore::CoreContext| HttpHandler::new(Ws(config)))
        .map_err(|e| e.to_string())
}

/// tokio-tungstenite on one current-thread runtime.
fn tokio(o: &Options) -> Result<(), String> {
    if let Some(&core) = o.cores.first() {
        core_affinity::set_for_current(core_affinity::CoreId { id: core });
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(|e| e.to_string())?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], o.port)))
            .await
            .map_err(|e| e.to_string())?;
        let (tx, _) = tokio::sync::broadcast::channel::<tungstenite::Message>(1024);
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let tx = tx.clone();
            tokio::task::spawn_local(async move {
                let _ = serve_tokio(stream, tx).await;
            });
        }
    })
}

async fn serve_tokio(
    stream: tokio::net::TcpStream,
    tx: tokio::sync::broadcast::Sender<tungstenite::Message>,
) -> Result<(), tungstenite::Error> {
    let mut path = String::new();
    // tungstenite's callback signature, whose error is a whole response.
    #[expect(clippy::result_large_err, reason = "the signature tungstenite takes")]
    let callback = |req: &tungstenite::handshake::server::Request, res| {
        path = req.uri().path().to_owned();
        Ok(res)
    };
    let ws = tokio_tungstenite::accept_hdr_async(stream, callback).await?;
    let (mut sink, mut stream) = ws.split();
    match path.as_str() {
        "/sub" => {
            let mut rx = tx.subscribe();
            loop {
                tokio::select! {
                    msg = rx.recv() => match msg {
                        Ok(msg) => sink.send(msg).await?,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(_) => return Ok(()),
                    },
                    msg = stream.next() => if msg.is_none() { return Ok(()) },
                }
            }
        }
        "/pub" => {
            while let Some(msg) = stream.next().await {
                let msg = msg?;
                if msg.is_text() || msg.is_binary() {
                    let _ = tx.send(msg);
                }
            }
        }
        _ => {
            while let Some(msg) = stream.next().await {
                let msg = msg?;
                if msg.is_text() || msg.is_binary() {
                    sink.send(msg).await?;
                }
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let o = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("ws_echo: {e}");
            return ExitCode::from(2);
        }
    };
    let served = match o.server.as_str() {
        "uring" => percore(&o, Backend::Uring),
        "epoll" => percore(&o, Backend::Epoll),
        "tokio" => tokio(&o),
        other => Err(format!("unknown server {other:?} (uring, epoll, tokio)")),
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ws_echo: {e}");
            ExitCode::FAILURE
        }
    }
}
