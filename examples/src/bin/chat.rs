//! A chat server: rooms on every core, over WebSockets, with the page
//! that talks to it served at `/`.
//!
//! A WebSocket at `/ws` sends commands as text messages and receives JSON
//! objects, one per message:
//!
//! | client sends | the server |
//! |---|---|
//! | `/nick NAME` | names the client (1 to 32 characters, no spaces; `guest` until then); answers `{"type":"nick","name":..}` |
//! | `/join ROOM` | leaves the room the client is in, joins ROOM (1 to 64 characters, no spaces); answers `{"type":"joined","room":..}`, then tells the room `{"type":"join","room":..,"name":..}` |
//! | `/leave` | tells the room `{"type":"leave",..}`, leaves it; answers `{"type":"left","room":..}` |
//! | any other text | sends `{"type":"message","room":..,"name":..,"text":..}` to everyone in the client's room, the sender too |
//!
//! A room's members may be on any core: each core keeps its own list of
//! the WebSockets in each room ([`hub`]), and a message is handed to
//! every core's in turn, so everyone in the room gets a sender's messages
//! once and in the order sent. Once `joined` (or `left`) has arrived,
//! every later message of the room reaches the client (or none does).
//! Anything else (binary messages, unknown commands, text outside a room)
//! is answered `{"type":"error","text":..}`. A browser page of another
//! site (its `Origin` not this `Host`) is refused with 403.
//!
//! ```text
//! chat [--port 8090] [--cores 0,1] [--backend auto] [--admin 9100] [--stats]
//! open http://127.0.0.1:8090/?room=lobby&name=ada     # joins on load
//! ```
//!
//! With `--tls-cert` and `--tls-key`, built with the feature `h2`, the
//! server offers HTTP/2 by ALPN, and the same route serves WebSockets
//! opened as streams of the page's connection (extended CONNECT, RFC
//! 8441), as a browser does when its HTTP/2 connection allows it.

use std::io;

use clap::Parser;
use percore::Readiness;
use percore_examples::{
    exit_with, init_logging, parse_args, run_with_metrics, CommonArgs, CoreReaders,
};
use percore_handlers::http::{HttpHandler, Request, Response, Service};
use percore_handlers::metrics::Metrics;
use percore_handlers::ws::{hub, Handshake, Message, WebSocket, WsConfig, WsStatsReader};
use serde_json::json;

/// The page: a WebSocket client in a few lines of JavaScript.
const PAGE: &[u8] = include_bytes!("chat/index.html");

/// Chat rooms over WebSockets at `/ws`, the page that uses them at `/`.
#[derive(Debug, Parser)]
#[command(name = "chat")]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
}

/// The longest name and room name, in bytes.
const MAX_NAME: usize = 32;
const MAX_ROOM: usize = 64;

struct Chat {
    config: WsConfig,
}

impl Service for Chat {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        match (req.method(), req.path()) {
            (_, "/ws") => {
                let Some(hs) = Handshake::new(req, res) else {
                    // Not an upgrade: `Handshake::new` has answered.
                    return Ok(());
                };
                if !same_origin(hs.origin(), req.header("host")) {
                    res.send(403, Some(b"text/plain"), b"another site's page\n")?;
                    return Ok(());
                }
                hs.accept(res, self.config, |ws| Member::new(ws).serve())?;
            }
            ("GET" | "HEAD", "/") => res.send(200, Some(b"text/html; charset=utf-8"), PAGE)?,
            ("GET" | "HEAD", _) => res.send(404, Some(b"text/plain"), b"not found\n")?,
            _ => res.send(405, Some(b"text/plain"), b"method not allowed\n")?,
        }
        Ok(())
    }
}

/// One client: its name and the room it is in.
struct Member {
    ws: WebSocket,
    name: String,
    room: Option<(String, hub::Subscription)>,
}

impl Member {
    fn new(ws: WebSocket) -> Self {
        Self {
            ws,
            name: "guest".to_owned(),
            room: None,
        }
    }

    async fn serve(mut self) -> io::Result<()> {
        let served = self.serve_messages().await;
        self.leave().await;
        served
    }

    async fn serve_messages(&mut self) -> io::Result<()> {
        while let Some(msg) = self.ws.recv().await? {
            let Some(text) = msg.as_text() else {
                self.reply(json!({"type": "error", "text": "text messages only"}))?;
                continue;
            };
            let text = text.to_owned();
            self.command(&text).await?;
        }
        Ok(())
    }

    async fn command(&mut self, text: &str) -> io::Result<()> {
        let (verb, arg) = text.split_once(' ').unwrap_or((text, ""));
        match verb {
            "/nick" => match word(arg, MAX_NAME) {
                Some(name) => {
                    self.name = name.to_owned();
                    self.reply(json!({"type": "nick", "name": name}))
                }
                None => self.error("a name is 1 to 32 characters, no spaces"),
            },
            "/join" => match word(arg, MAX_ROOM) {
                Some(room) => {
                    self.leave().await;
                    let sub = hub::subscribe(room, self.ws.sender());
                    self.room = Some((room.to_owned(), sub));
                    self.reply(json!({"type": "joined", "room": room}))?;
                    let event = json!({"type": "join", "room": room, "name": self.name});
                    hub::publish(room, &Message::text(event.to_string())).await;
                    Ok(())
                }
                None => self.error("a room is 1 to 64 characters, no spaces"),
            },
            "/leave" => match self.leave().await {
                Some(room) => self.reply(json!({"type": "left", "room": room})),
                None => self.error("not in a room"),
            },
            _ if verb.starts_with('/') => self.error("unknown command (/nick, /join, /leave)"),
            _ => match &self.room {
                Some((room, _)) => {
                    let said =
                        json!({"type": "message", "room": room, "name": self.name, "text": text});
                    hub::publish(room, &Message::text(said.to_string())).await;
                    Ok(())
                }
                None => self.error("join a room first (/join ROOM)"),
            },
        }
    }

    /// Leaves the room, if in one, telling the others; returns its name.
    async fn leave(&mut self) -> Option<String> {
        let (room, sub) = self.room.take()?;
        // Out of the room first, so the event goes to the others only.
        drop(sub);
        let event = json!({"type": "leave", "room": room, "name": self.name});
        hub::publish(&room, &Message::text(event.to_string())).await;
        Some(room)
    }

    fn reply(&self, value: serde_json::Value) -> io::Result<()> {
        self.ws.send_text(&value.to_string())
    }

    fn error(&self, text: &str) -> io::Result<()> {
        self.reply(json!({"type": "error", "text": text}))
    }
}

/// Whether a browser's page may open a WebSocket: a page of another
/// site would act with its visitor's cookies (RFC 6455 §10.2), so the
/// `Origin` (sent by browsers, not by other clients) must name this host.
fn same_origin(origin: Option<&[u8]>, host: Option<&[u8]>) -> bool {
    let Some(origin) = origin else { return true };
    let site = origin
        .iter()
        .position(|&b| b == b':')
        .and_then(|i| origin.get(i + 3..));
    site.is_some_and(|site| host.is_some_and(|host| site.eq_ignore_ascii_case(host)))
}

/// `arg` if it is one word of 1 to `max` bytes.
fn word(arg: &str, max: usize) -> Option<&str> {
    let arg = arg.trim();
    (!arg.is_empty() && arg.len() <= max && !arg.contains(char::is_whitespace)).then_some(arg)
}

fn main() {
    let mut cli: Cli = parse_args("8090");
    // Over TLS, HTTP/2 when built with it: browsers then open the
    // WebSocket as a stream of the page's connection (RFC 8441).
    cli.common.offer_h2 = cfg!(feature = "h2");
    init_logging();
    let mut config = WsConfig::default();
    // Chat lines are short: a client that sends more is refused (1009).
    config.max_message = 64 << 10;
    config.max_frame = 64 << 10;
    let metrics = Metrics::new(Readiness::new());
    let (exported, ws) = (metrics.clone(), CoreReaders::<WsStatsReader>::default());
    let registry = ws.clone();
    let factory = move |core: &percore::CoreContext| {
        let handler = HttpHandler::new(Chat { config });
        let counters = percore_handlers::ws::stats_reader();
        registry.register(core.index, counters.clone());
        exported.register_http(core, handler.stats_reader());
        exported.register_ws(core, counters);
        handler
    };
    let stats = move |index| {
        let line = ws.line(index, |r| format!("ws {}", r.snapshot()));
        line.into_iter().collect()
    };
    if let Err(e) = run_with_metrics("chat", &cli.common, &metrics, factory, stats) {
        exit_with(1, &format!("chat: {e}"));
    }
}
