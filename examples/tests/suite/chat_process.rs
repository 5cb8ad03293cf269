//! The `chat` binary as an operator runs it, on both backends and both
//! cores: members of two rooms, on connections spread over the cores,
//! each get every message of their room once and in order, and none of
//! the other room's; a member who left gets no more; the scrape counts
//! what was sent; the page is served at `/`.

use std::collections::{BTreeSet, HashMap};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use percore_test_kit::http::one;
use percore_test_kit::ws::{upgrade_request, WsClient};
use percore_test_kit::*;
use serde_json::Value;

const CHAT: &str = env!("CARGO_BIN_EXE_chat");
const LIMIT: Duration = Duration::from_secs(60);
/// Messages each member sends to its room (then one `NAME#done`).
const MESSAGES: usize = 20;

/// `chat` on every core with an admin port; returns it and the admin
/// address.
fn start(backend: &str) -> (ChildServer, SocketAddr) {
    let mut cmd = Command::new(CHAT);
    cmd.args(["--port", "0", "--admin", "0", "--backend", backend])
        .env("RUST_LOG", "info")
        .env_remove("PERCORE_BACKEND")
        .env_remove("PERCORE_FAULT");
    let server = ChildServer::spawn(cmd, LIMIT).unwrap_or_else(|f| panic!("did not start: {f:?}"));
    assert!(
        server.wait_for_log("admin on http://", LIMIT),
        "{}",
        server.log()
    );
    let log = server.log();
    let admin = log
        .split("admin on http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|addr| addr.parse().ok())
        .unwrap_or_else(|| panic!("no admin address in {log}"));
    (server, admin)
}

/// The samples of `family` in a scrape, by their `core` label.
fn per_core(admin: SocketAddr, family: &str) -> HashMap<String, f64> {
    let resp = one(admin, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(resp.status, 200);
    let prefix = format!("{family}{{core=\"");
    String::from_utf8(resp.body)
        .expect("UTF-8")
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|l| {
            let (core, value) = l.split_once("\"} ").expect("a sample");
            (core.to_owned(), value.parse().expect("a number"))
        })
        .collect()
}

/// A chat client: its name, the core that serves it and its room.
struct Member {
    name: String,
    core: String,
    room: &'static str,
    ws: WsClient<TcpStream>,
}

impl Member {
    fn send(&mut self, text: &str) {
        self.ws.send_frame(true, 1, text.as_bytes());
    }

    /// The next JSON object the server sends.
    fn next(&mut self) -> Value {
        let f = self
            .ws
            .data_frame()
            .unwrap_or_else(|e| panic!("{}: {e}", self.name));
        assert_eq!(f.opcode, 1, "{}: text frames only", self.name);
        serde_json::from_slice(&f.payload).expect("JSON")
    }

    /// Reads up to the object of `kind` (an answer to a command);
    /// returns the chat messages that came before it, `(from, text)`.
    /// Join and leave events of the member's own room are skipped.
    fn until(&mut self, kind: &str) -> Vec<(String, String)> {
        let mut said = Vec::new();
        loop {
            let v = self.next();
            let t = v["type"].as_str().expect("a type");
            if t == kind {
                return said;
            }
            match t {
                "message" => {
                    assert_eq!(
                        v["room"], self.room,
                        "{}: another room's message: {v}",
                        self.name
                    );
                    said.push((
                        v["name"].as_str().expect("name").to_owned(),
                        v["text"].as_str().expect("text").to_owned(),
                    ));
                }
                "join" | "leave" => assert_eq!(v["room"], self.room, "{}: {v}", self.name),
                _ => panic!("{}: unexpected {v} waiting for {kind}", self.name),
            }
        }
    }
}

/// Opens members one at a time, each seen on its core by the scrape,
/// until `per_core` of them are on every core (at most 64 tries: the
/// kernel spreads connections over the cores' listeners by their
/// ports); returns them with the cores' names.
fn spread(addr: SocketAddr, admin: SocketAddr, per: usize) -> Vec<Member> {
    let mut opened = per_core(admin, "percore_ws_opened_total");
    let cores = opened.len();
    // The server runs on every CPU this process may use.
    assert_eq!(
        cores,
        percore::runtime::cpus::available().len(),
        "{opened:?}"
    );
    let mut members: Vec<Member> = Vec::new();
    for i in 0..64 {
        let mut ws = WsClient::new(connect(addr));
        ws.handshake("/ws", "");
        // The count rises as the WebSocket's task starts, which may come
        // after the client has read the 101.
        let before = opened.clone();
        let now = wait_until(
            std::time::Duration::from_secs(60),
            "the new WebSocket counted",
            || per_core(admin, "percore_ws_opened_total"),
            |now| {
                now.iter()
                    .any(|(c, n)| *n > before.get(c).copied().unwrap_or(0.0))
            },
        );
        let core = now
            .iter()
            .find(|(c, n)| **n > before.get(*c).copied().unwrap_or(0.0))
            .map(|(c, _)| c.clone())
            .expect("the core that took the connection");
        opened = now;
        let on_core = members.iter().filter(|m| m.core == core).count();
        if on_core < per {
            let name = format!("m{i}");
            members.push(Member {
                name,
                core,
                room: "",
                ws,
            });
        }
        if members.len() == per * cores {
            return members;
        }
    }
    panic!("64 connections did not reach {per} per core");
}

backend_process_tests! {
    /// Two rooms, each with members on both cores: every member gets its
    /// room's messages once, in each sender's order, and nothing of the
    /// other room; after `/leave` nothing more arrives.
    fn rooms_across_cores(backend) {
        let (server, admin) = start(backend);
        let members = spread(server.addr, admin, 3);
        let cores: BTreeSet<String> = members.iter().map(|m| m.core.clone()).collect();
        // Alternate the cores, so that each half (a room) spans them all.
        let mut by_core: Vec<Vec<Member>> = cores.iter().map(|_| Vec::new()).collect();
        for m in members {
            let rank = cores.iter().position(|c| *c == m.core).expect("a known core");
            by_core[rank].push(m);
        }
        let mut interleaved = Vec::new();
        while by_core.iter().any(|v| !v.is_empty()) {
            for v in &mut by_core {
                if let Some(m) = v.pop() {
                    interleaved.push(m);
                }
            }
        }
        let half = interleaved.len() / 2;
        let mut members = interleaved;
        for (i, m) in members.iter_mut().enumerate() {
            m.room = if i < half { "red" } else { "blue" };
            let (nick, join) = (format!("/nick {}", m.name), format!("/join {}", m.room));
            m.send(&nick);
            m.until("nick");
            m.send(&join);
            assert!(m.until("joined").is_empty());
        }
        for room in ["red", "blue"] {
            let on: BTreeSet<&str> = members.iter().filter(|m| m.room == room).map(|m| m.core.as_str()).collect();
            assert_eq!(on.len(), cores.len(), "{room} spans every core");
        }
        // 1. Every member sends its messages, the members' interleaved.
        for i in 0..=MESSAGES {
            for m in &mut members {
                let text = if i == MESSAGES { format!("{}#done", m.name) } else { format!("{}#{i}", m.name) };
                m.send(&text);
            }
        }
        // 2. Each reads until every member of its room is done.
        let rooms: Vec<(&str, Vec<String>)> = ["red", "blue"]
            .iter()
            .map(|r| (*r, members.iter().filter(|m| m.room == *r).map(|m| m.name.clone()).collect()))
            .collect();
        for m in &mut members {
            let senders = &rooms.iter().find(|(r, _)| *r == m.room).expect("room").1;
            let mut got: HashMap<String, Vec<String>> = HashMap::new();
            while got.len() < senders.len() || got.values().any(|v| !v.last().is_some_and(|t| t.ends_with("#done"))) {
                let v = m.next();
                match v["type"].as_str() {
                    Some("message") => {
                        assert_eq!(v["room"], m.room, "{}: {v}", m.name);
                        let from = v["name"].as_str().expect("name").to_owned();
                        assert!(senders.contains(&from), "{}: from outside the room: {v}", m.name);
                        got.entry(from).or_default().push(v["text"].as_str().expect("text").to_owned());
                    }
                    Some("join" | "leave") => {}
                    _ => panic!("{}: unexpected {v}", m.name),
                }
            }
            for from in senders {
                let mut want: Vec<String> = (0..MESSAGES).map(|i| format!("{from}#{i}")).collect();
                want.push(format!("{from}#done"));
                assert_eq!(got[from], want, "{} from {from}: once each, in order", m.name);
            }
        }
        // 3. The first member leaves; a message to its room after that
        // (its sender's next answer comes once every core has it) does
        // not reach it.
        let [first, second, ..] = &mut members[..] else { unreachable!() };
        assert_eq!((first.room, second.room), ("red", "red"));
        first.send("/leave");
        assert!(first.until("left").is_empty());
        let second_name = second.name.clone();
        second.send("after the leave");
        let nick = format!("/nick {}", second.name);
        second.send(&nick);
        assert_eq!(second.until("nick"), [(second.name.clone(), "after the leave".to_owned())]);
        let nick = format!("/nick {}", first.name);
        first.send(&nick);
        assert!(first.until("nick").is_empty(), "nothing after the leave");
        // 4. Everyone else leaves: nothing of the other room was queued
        // behind what they read.
        for m in members.iter_mut().skip(1) {
            m.send("/leave");
            let rest = m.until("left");
            if m.room == "red" && m.name != second_name {
                assert_eq!(rest, [(second_name.clone(), "after the leave".to_owned())], "{}", m.name);
            } else {
                assert!(rest.is_empty(), "{}: {rest:?}", m.name);
            }
        }
        // 5. The scrape counts every text the members sent: nick, join,
        // the messages and the leave, and the three more of step 3.
        let received: f64 = per_core(admin, "percore_ws_messages_received_total").values().sum();
        let sent = members.len() * (2 + MESSAGES + 1 + 1) + 3;
        assert_eq!(received, sent as f64);
        drop(members);
        server.signal(libc::SIGTERM);
        let (status, log) = server.wait(LIMIT);
        assert!(status.success(), "{status}: {log}");
    }

    /// `/` is the page, a WebSocket client of `/ws`; other paths are 404.
    fn serves_the_page(backend) {
        let (server, _admin) = start(backend);
        let page = one(server.addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(page.status, 200);
        let html = String::from_utf8(page.body).expect("UTF-8");
        assert!(html.starts_with("<!doctype html>") && html.contains("new WebSocket("), "{html}");
        assert_eq!(one(server.addr, b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n").status, 404);
        // Not an upgrade: the handshake's refusal.
        assert_eq!(one(server.addr, b"GET /ws HTTP/1.1\r\nHost: x\r\n\r\n").status, 400);
        // A page of another site may not open a WebSocket here.
        let mut c = WsClient::new(connect(server.addr));
        c.send_raw(&upgrade_request("/ws", "Origin: http://elsewhere.example\r\n"));
        let head = c.read_head();
        assert!(head.starts_with("HTTP/1.1 403 "), "{head}");
    }
}
