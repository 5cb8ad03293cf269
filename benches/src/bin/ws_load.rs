//! `ws_load`: the WebSocket load of `benches/ws.sh`, on one tokio
//! current-thread runtime with raw framing (one masked frame built once
//! and sent again and again), so that the client costs little beside the
//! server it measures.
//!
//! - `echo`: `--conns` connections to `/echo`, each sending a binary
//!   message of `--size` bytes and waiting for its echo before the next,
//!   for `--duration` seconds. With `--deflate` the client offers
//!   `permessage-deflate` and sends the message deflated (text alike
//!   from one message to the next; with no context takeover every
//!   message deflates to the same bytes). Prints `messages=N`.
//! - `broadcast`: `--conns` subscribers on `/sub` and one publisher on
//!   `/pub` that sends a message of `--size` bytes, waits until every
//!   subscriber has it, and sends the next. Prints `deliveries=N`.
//! - `idle`: `--conns` WebSockets opened on `/echo` and held, each having
//!   sent and received one message; prints `open=N` and stays until
//!   killed.
//!
//! Usage: `ws_load echo|broadcast|idle --connect 127.0.0.1:P [--conns
//! 100] [--size 64] [--duration 10] [--deflate]`.

use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::{Duration, Instant};

use flate2::{Compress, Compression, FlushCompress};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Options {
    mode: String,
    addr: SocketAddr,
    conns: usize,
    size: usize,
    duration: Duration,
    deflate: bool,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mode = args
        .next()
        .ok_or("a mode is required: echo, broadcast or idle")?;
    let (mut addr, mut conns, mut size, mut duration, mut deflate) = (None, 100, 64, 10, false);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--connect" => addr = Some(value()?.parse().map_err(|e| format!("--connect: {e}"))?),
            "--conns" => conns = value()?.parse().map_err(|e| format!("--conns: {e}"))?,
            "--size" => size = value()?.parse().map_err(|e| format!("--size: {e}"))?,
            "--duration" => duration = value()?.parse().map_err(|e| format!("--duration: {e}"))?,
            "--deflate" => deflate = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Options {
        mode,
        addr: addr.ok_or("--connect ADDR is required")?,
        conns: conns.max(1),
        size,
        duration: Duration::from_secs(duration),
        deflate,
    })
}

/// One client connection after its handshake, with what it read past a
/// frame.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(addr: SocketAddr, path: &str, deflate: bool) -> io::Result<Conn> {
        let mut stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let ext = if deflate {
            "Sec-WebSocket-Extensions: permessage-deflate\r\n"
        } else {
            ""
        };
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: b\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{ext}\r\n"
        );
        stream.write_all(req.as_bytes()).await?;
        let mut conn = Conn {
            stream,
            buf: Vec::with_capacity(4096),
        };
        let end = loop {
            if let Some(end) = conn.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            conn.fill().await?;
        };
        let head = String::from_utf8_lossy(&conn.buf[..end]).to_string();
        if !head.starts_with("HTTP/1.1 101") {
            return Err(io::Error::other(format!("no upgrade: {head}")));
        }
        if deflate && !head.to_ascii_lowercase().contains("permessage-deflate") {
            return Err(io::Error::other("deflate was not agreed"));
        }
        conn.buf.drain(..end);
        Ok(conn)
    }

    async fn fill(&mut self) -> io::Result<()> {
        if self.buf.capacity() - self.buf.len() < 4096 {
            self.buf.reserve(64 * 1024);
        }
        if self.stream.read_buf(&mut self.buf).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(())
    }

    /// Reads one whole server frame; gives its opcode and its payload's
    /// first byte (0 when empty).
    async fn frame(&mut self) -> io::Result<(u8, u8)> {
        loop {
            if let Some((opcode, at, len)) = server_frame(&self.buf) {
                let first = if at < len { self.buf[at] } else { 0 };
                self.buf.drain(..len);
                return Ok((opcode, first));
            }
            self.fill().await?;
        }
    }
}

/// The opcode, payload offset and length of a whole server frame at the
/// start of `buf`.
fn server_frame(buf: &[u8]) -> Option<(u8, usize, usize)> {
    let [b0, b1, ..] = *buf else { return None };
    let (len, at) = match b1 & 0x7f {
        126 => (
            u16::from_be_bytes(buf.get(2..4)?.try_into().ok()?) as usize,
            4,
        ),
        127 => (
            u64::from_be_bytes(buf.get(2..10)?.try_into().ok()?) as usize,
            10,
        ),
        n => (n as usize, 2),
    };
    (buf.len() >= at + len).then_some((b0 & 0x0f, at, at + len))
}

/// A masked client frame (final, binary) of `payload`, RSV1 if deflated.
fn client_frame(payload: &[u8], rsv1: bool) -> Vec<u8> {
    let mut out = vec![0x82 | if rsv1 { 0x40 } else { 0 }];
    match payload.len() {
        n @ 0..=125 => out.push(0x80 | n as u8),
        n @ 126..=0xffff => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

/// The message sent: text alike from one message to the next, deflated
/// (without the sync flush's tail) when asked.
fn message(size: usize, deflate: bool) -> Vec<u8> {
    message_from(
        b"the quick brown fox jumps over a lazy dog; ",
        size,
        deflate,
    )
}

fn message_from(start: &[u8], size: usize, deflate: bool) -> Vec<u8> {
    let text: Vec<u8> = start.iter().copied().cycle().take(size).collect();
    if !deflate {
        return client_frame(&text, false);
    }
    let mut c = Compress::new(Compression::new(1), false);
    let mut out = Vec::with_capacity(size + 64);
    let _ = c.compress_vec(&text, &mut out, FlushCompress::Sync);
    out.truncate(out.len().saturating_sub(4));
    client_frame(&out, true)
}

async fn echo(o: &Options) -> io::Result<u64> {
    let frame = Rc::new(message(o.size, o.deflate));
    let count = Rc::new(Cell::new(0u64));
    let mut conns = Vec::new();
    for _ in 0..o.conns {
        conns.push(Conn::open(o.addr, "/echo", o.deflate).await?);
    }
    let end = Instant::now() + o.duration;
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut c| {
            let (frame, count) = (frame.clone(), count.clone());
            tokio::task::spawn_local(async move {
                while Instant::now() < end {
                    c.stream.write_all(&frame).await?;
                    c.frame().await?;
                    count.set(count.get() + 1);
                }
                Ok::<_, io::Error>(())
            })
        })
        .collect();
    for t in tasks {
        t.await.map_err(io::Error::other)??;
    }
    Ok(count.get())
}

async fn broadcast(o: &Options) -> io::Result<u64> {
    let mut subs = Vec::new();
    for _ in 0..o.conns {
        subs.push(Conn::open(o.addr, "/sub", false).await?);
    }
    let mut publisher = Conn::open(o.addr, "/pub", false).await?;
    // A subscription is made after its 101 went out: warm-up messages
    // (starting with `w`) go until every subscriber has one, and only
    // the measured ones (starting with `t`) are counted.
    let got = Rc::new(Cell::new(0u64));
    let joined = Rc::new(Cell::new(0usize));
    let readers: Vec<_> = subs
        .into_iter()
        .map(|mut c| {
            let (got, joined) = (got.clone(), joined.clone());
            tokio::task::spawn_local(async move {
                let mut warm = false;
                loop {
                    match c.frame().await? {
                        (2, b't') => got.set(got.get() + 1),
                        (2, b'w') if !warm => {
                            warm = true;
                            joined.set(joined.get() + 1);
                        }
                        _ => {}
                    }
                }
                #[allow(unreachable_code)]
                Ok::<_, io::Error>(())
            })
        })
        .collect();
    let warm = message_from(b"warm-up ", o.size, false);
    let deadline = Instant::now() + Duration::from_secs(60);
    while joined.get() < o.conns {
        if Instant::now() > deadline {
            return Err(io::Error::other(format!(
                "{} of {} subscribed",
                joined.get(),
                o.conns
            )));
        }
        publisher.stream.write_all(&warm).await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Let the last warm-up messages arrive.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let frame = message(o.size, false);
    let end = Instant::now() + o.duration;
    let mut sent = 0u64;
    while Instant::now() < end {
        publisher.stream.write_all(&frame).await?;
        sent += 1;
        let want = sent * o.conns as u64;
        let deadline = Instant::now() + Duration::from_secs(10);
        while got.get() < want {
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "{} of {want} delivered",
                    got.get()
                )));
            }
            tokio::task::yield_now().await;
        }
    }
    for r in readers {
        r.abort();
    }
    Ok(got.get())
}

async fn idle(o: &Options) -> io::Result<()> {
    let frame = message(o.size, false);
    let mut conns = Vec::new();
    for _ in 0..o.conns {
        let mut c = Conn::open(o.addr, "/echo", false).await?;
        c.stream.write_all(&frame).await?;
        c.frame().await?;
        conns.push(c);
    }
    println!("open={}", conns.len());
    std::future::pending::<()>().await;
    Ok(())
}

fn main() -> ExitCode {
    let o = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("ws_load: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ws_load: {e}");
            return ExitCode::FAILURE;
        }
    };
    let local = tokio::task::LocalSet::new();
    let done = local.block_on(&rt, async {
        match o.mode.as_str() {
            "echo" => echo(&o).await.map(|n| println!("messages={n}")),
            "broadcast" => broadcast(&o).await.map(|n| println!("deliveries={n}")),
            "idle" => idle(&o).await,
            other => Err(io::Error::other(format!("unknown mode {other:?}"))),
        }
    });
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ws_load: {e}");
            ExitCode::FAILURE
        }
    }
}
