//! The tokio fan-out baseline: an HTTP/1.1 front that does what
//! `percore_handlers::proxy::FanOut` does with policy `all`, on tokio.
//!
//! Per client request (parsed with httparse, as hyper does) it writes the
//! request line and the forwarded part of the sub-request (end-to-end
//! fields, `Via`, `X-Forwarded-For`) once, then sends `width` GET
//! sub-requests, each those two parts around its upstream's `Host` line,
//! round-robin over the upstreams, over keep-alive connections taken from
//! a per-thread pool (a `RefCell` in a thread-local: one pool per core for
//! tokio-ct, per worker for tokio-mt), runs them concurrently inside the
//! connection's own task with a hand-rolled join (one poll-based state
//! machine per branch, no task and no boxed future per branch), under a
//! 15 s deadline like the proxy's default. Each upstream response head is
//! scanned by the proxy's scanner and its body framed by `Content-Length`.
//! When every branch has answered, it answers 200 with the same JSON array
//! as the proxy (`upstream`, `status`, `latency_ms`, `body` as an escaped
//! JSON string); any failure answers 502.
//!
//! The application-level code is the proxy's own, not a copy: the
//! `percore-http1` crate's `response::head` and `forward` (head scanner,
//! forwarded fields and sub-request assembly), and the proxy's own
//! `combine.rs` (JSON entries with their prefixes escaped once and their
//! bounds counted once), compiled into this crate from its file in
//! `percore-handlers`. None of it needs percore, so this builds without it
//! (`--no-default-features`). Only
//! the request line (the proxy's takes a parsed target) and the glue around
//! the runtime are written here; they follow the proxy's steps, so that the
//! comparison measures the runtimes rather than two ways of doing the same
//! work.
//!
//! What it measures: nothing by itself; it is the comparison point for the
//! `fan_out` workloads. Steady state allocates nothing per request: the
//! branch states and their buffers belong to the client connection and are
//! reused, the pooled connections go back to the pool. What it does not
//! do, where the proxy does more (so the comparison, if anything, favours
//! tokio): request bodies (a request with a body gets 501), chunked and
//! interim upstream responses, retries, connect timeouts, idle ageing of
//! the pool, the `Date` header and the other policies. A pooled connection
//! is checked before reuse with one non-blocking `try_read` (free while
//! tokio's cached readiness says "not readable"), as the proxy checks its
//! own.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use crate::baseline_http::write_decimal;
use combine::{entry_bound, entry_prefix, write_entry, write_failure, Entry};
use percore_http1::forward::{write_forwarded, write_request};
use percore_http1::response::head;

/// The proxy's answer writer, the very file `percore-handlers` compiles:
/// it needs only std, and this crate must build without percore.
#[path = "../../handlers/src/proxy/combine.rs"]
mod combine;

/// The `Via` element, as long as the proxy's (`1.1 percore-` and 16 hex
/// digits) so that both forward the same bytes; the baseline does not look
/// for loops, so its name need not be its own.
const VIA: &[u8] = b"1.1 percore-0000000000000000";

/// The proxy's default deadline for a whole fan-out.
pub const DEADLINE: Duration = Duration::from_secs(15);
/// Most idle connections kept per upstream per thread (the proxy's default).
const MAX_IDLE: usize = 1024;
/// Initial size of a branch's response buffer (grows up to `MAX_RESPONSE`).
const RESPONSE_BUF: usize = 4 * 1024;
/// Largest upstream response accepted.
const MAX_RESPONSE: usize = 1024 * 1024;
/// Client request buffer.
const REQUEST_BUF: usize = 8 * 1024;
/// Header fields parsed per client request.
const MAX_HEADERS: usize = 32;

/// What one fan-out server does: where to send, and how many.
#[derive(Debug)]
pub struct Spec {
    upstreams: Vec<Upstream>,
    width: usize,
}

#[derive(Debug)]
struct Upstream {
    addr: SocketAddr,
    name: String,
    host_line: Vec<u8>,
    /// Its JSON entries' start, escaped once (see [`entry_prefix`]).
    entry_prefix: Box<[u8]>,
}

impl Spec {
    /// `width` sub-requests per request over `upstreams` (at least one).
    pub fn new(upstreams: &[SocketAddr], width: usize) -> io::Result<Spec> {
        if upstreams.is_empty() || width == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "fan-out needs an upstream and a width of at least 1",
            ));
        }
        Ok(Spec {
            upstreams: upstreams
                .iter()
                .map(|&addr| {
                    let name = addr.to_string();
                    Upstream {
                        addr,
                        host_line: format!("Host: {name}\r\n").into_bytes(),
                        entry_prefix: entry_prefix(&name),
                        name,
                    }
                })
                .collect(),
            width,
        })
    }
}

/// This thread's idle connections, per upstream address, and where the
/// next request's first branch goes.
struct Core {
    pools: RefCell<Vec<(SocketAddr, Vec<TcpStream>)>>,
    next: Cell<usize>,
}

thread_local! {
    static CORE: Core = const {
        Core {
            pools: RefCell::new(Vec::new()),
            next: Cell::new(0),
        }
    };
}

/// A live idle connection to `addr` from this thread's pool, if any.
fn checkout(addr: SocketAddr) -> Option<TcpStream> {
    CORE.with(|core| {
        let mut pools = core.pools.borrow_mut();
        let (_, idle) = pools.iter_mut().find(|(a, _)| *a == addr)?;
        while let Some(conn) = idle.pop() {
            let mut probe = [0u8; 1];
            // WouldBlock: nothing to say, reusable. End of stream, bytes
            // never asked for or an error: close it.
            if matches!(conn.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            {
                return Some(conn);
            }
        }
        None
    })
}

/// Gives a connection that read exactly one complete response back.
fn release(addr: SocketAddr, conn: TcpStream) {
    CORE.with(|core| {
        let mut pools = core.pools.borrow_mut();
        let i = match pools.iter().position(|(a, _)| *a == addr) {
            Some(i) => i,
            None => {
                pools.push((addr, Vec::with_capacity(64)));
                pools.len() - 1
            }
        };
        let idle = &mut pools[i].1;
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    });
}

/// Where a branch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Writing,
    Reading,
    Done,
    Failed(&'static str),
}

/// One sub-request; its buffers are reused by the next request of the
/// same client connection.
struct Branch {
    upstream: usize,
    conn: Option<TcpStream>,
    req: Vec<u8>,
    written: usize,
    resp: Vec<u8>,
    filled: usize,
    phase: Phase,
    status: u16,
    body: Range<usize>,
    reusable: bool,
    latency: Duration,
    /// The [`entry_bound`] of its answer, counted once, when it arrives.
    bound: usize,
}

impl Branch {
    fn new() -> Branch {
        Branch {
            upstream: 0,
            conn: None,
            req: Vec::with_capacity(256),
            written: 0,
            resp: vec![0; RESPONSE_BUF],
            filled: 0,
            phase: Phase::Done,
            status: 0,
            body: 0..0,
            reusable: false,
            latency: Duration::ZERO,
            bound: 0,
        }
    }

    /// Drives the exchange as far as it goes without waiting; `prefix` is
    /// its upstream's entry prefix.
    fn poll(&mut self, cx: &mut Context<'_>, started: Instant, prefix: &[u8]) -> Poll<()> {
        if matches!(self.phase, Phase::Done | Phase::Failed(_)) {
            return Poll::Ready(());
        }
        loop {
            let Some(conn) = self.conn.as_mut() else {
                self.phase = Phase::Failed("no connection");
                return Poll::Ready(());
            };
            match self.phase {
                Phase::Done | Phase::Failed(_) => return Poll::Ready(()),
                Phase::Writing => {
                    match Pin::new(&mut *conn).poll_write(cx, &self.req[self.written..]) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                            self.phase = Phase::Failed("send failed")
                        }
                        Poll::Ready(Ok(n)) => {
                            self.written += n;
                            if self.written == self.req.len() {
                                self.phase = Phase::Reading;
                            }
                        }
                    }
                }
                Phase::Reading => {
                    if self.filled == self.resp.len() {
                        if self.resp.len() >= MAX_RESPONSE {
                            self.phase = Phase::Failed("response too large");
                            continue;
                        }
                        self.resp.resize(self.resp.len() * 2, 0);
                    }
                    let mut rb = ReadBuf::new(&mut self.resp[self.filled..]);
                    match Pin::new(&mut *conn).poll_read(cx, &mut rb) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Err(_)) => self.phase = Phase::Failed("receive failed"),
                        Poll::Ready(Ok(())) => {
                            let n = rb.filled().len();
                            if n == 0 {
                                self.phase = Phase::Failed("closed before a whole response");
                                continue;
                            }
                            self.filled += n;
                            self.parse(started, prefix);
                        }
                    }
                }
            }
        }
    }

    /// Frames the response read so far with the proxy's head scanner: a
    /// `Content-Length` body that is all in is the answer, as the proxy
    /// takes a whole response without its body decoder.
    fn parse(&mut self, started: Instant, prefix: &[u8]) {
        let head = match head::parse(&self.resp[..self.filled]) {
            Ok(None) => return,
            Ok(Some(head)) => head,
            Err(_) => {
                self.phase = Phase::Failed("malformed response");
                return;
            }
        };
        let fields = head.fields;
        if let Some(why) = fields.invalid {
            self.phase = Phase::Failed(why);
            return;
        }
        let length = fields.length.filter(|_| !fields.chunked);
        let Some(len) = length.and_then(|n| usize::try_from(n).ok()) else {
            self.phase = Phase::Failed("not framed by Content-Length");
            return;
        };
        if len <= self.filled - head.len {
            let end = head.len + len;
            self.status = head.status;
            self.body = head.len..end;
            self.reusable = head.minor == 1 && !fields.close && self.filled == end;
            self.latency = started.elapsed();
            self.bound = entry_bound(prefix, &self.resp[head.len..end]);
            self.phase = Phase::Done;
        }
    }
}

/// Serves one client connection until it closes.
pub async fn serve(mut s: TcpStream, spec: Arc<Spec>) -> io::Result<()> {
    let peer = s.peer_addr().ok().map(|a| a.ip());
    let mut inb = vec![0u8; REQUEST_BUF];
    let mut filled = 0usize;
    let mut line: Vec<u8> = Vec::with_capacity(64);
    let mut shared: Vec<u8> = Vec::with_capacity(256);
    let mut body: Vec<u8> = Vec::with_capacity(256 * spec.width);
    let mut out: Vec<u8> = Vec::with_capacity(256 * spec.width + 128);
    let mut branches: Vec<Branch> = (0..spec.width).map(|_| Branch::new()).collect();
    loop {
        // One request head (our clients do not pipeline, but a second head
        // already in the buffer is served next without reading).
        let used = loop {
            let mut headers = [std::mem::MaybeUninit::uninit(); MAX_HEADERS];
            let mut req = httparse::Request::new(&mut []);
            match req.parse_with_uninit_headers(&inb[..filled], &mut headers) {
                Ok(httparse::Status::Complete(used)) => {
                    let method = req.method.unwrap_or("GET");
                    let target = req.path.unwrap_or("/");
                    let has_body = req.headers.iter().any(|h| {
                        (h.name.eq_ignore_ascii_case("content-length")
                            && h.value.trim_ascii() != b"0")
                            || h.name.eq_ignore_ascii_case("transfer-encoding")
                    });
                    if has_body {
                        s.write_all(b"HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                            .await?;
                        return Ok(());
                    }
                    // Written once per request: each sub-request is then
                    // three copies, as the proxy's are.
                    line.clear();
                    line.extend_from_slice(method.as_bytes());
                    line.push(b' ');
                    line.extend_from_slice(target.as_bytes());
                    line.extend_from_slice(b" HTTP/1.1\r\n");
                    shared.clear();
                    write_forwarded(&mut shared, req.headers, peer, VIA);
                    shared.extend_from_slice(b"\r\n");
                    let first = CORE.with(|c| {
                        let first = c.next.get();
                        c.next.set((first + spec.width) % spec.upstreams.len());
                        first
                    });
                    for (i, b) in branches.iter_mut().enumerate() {
                        let up = (first + i) % spec.upstreams.len();
                        b.upstream = up;
                        b.req.clear();
                        write_request(&mut b.req, &line, &spec.upstreams[up].host_line, &shared);
                    }
                    break used;
                }
                Ok(httparse::Status::Partial) => {}
                Err(_) => {
                    s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                        .await?;
                    return Ok(());
                }
            }
            if filled == inb.len() {
                return Ok(()); // head larger than the buffer: not our workload
            }
            let n = s.read(&mut inb[filled..]).await?;
            if n == 0 {
                return Ok(());
            }
            filled += n;
        };
        inb.copy_within(used..filled, 0);
        filled -= used;

        let ok = fan_out(&spec, &mut branches).await;
        out.clear();
        if ok {
            body.clear();
            body.reserve(branches.iter().map(|b| b.bound).sum::<usize>() + 2);
            body.push(b'[');
            for (i, b) in branches.iter().enumerate() {
                let entry = Entry {
                    prefix: &spec.upstreams[b.upstream].entry_prefix,
                    status: b.status,
                    latency: b.latency,
                    body: &b.resp[b.body.clone()],
                    bound: b.bound,
                };
                write_entry(&mut body, &entry, i == 0);
            }
            body.push(b']');
            out.extend_from_slice(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ",
            );
            write_decimal(&mut out, body.len() as u64);
            out.extend_from_slice(b"\r\n\r\n");
            out.extend_from_slice(&body);
        } else {
            body.clear();
            for b in branches.iter() {
                let why = match b.phase {
                    Phase::Failed(why) => why,
                    Phase::Done => continue,
                    _ => "no answer before the deadline",
                };
                write_failure(&mut body, &spec.upstreams[b.upstream].name, &why, None);
            }
            let _ = write!(
                out,
                "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            out.extend_from_slice(&body);
        }
        // Connections go back to the pool only after a whole response.
        for b in branches.iter_mut() {
            if let Some(conn) = b.conn.take() {
                if b.phase == Phase::Done && b.reusable {
                    release(spec.upstreams[b.upstream].addr, conn);
                }
            }
        }
        s.write_all(&out).await?;
    }
}

/// Runs every branch (already holding its request bytes) to its end;
/// `true` when all answered.
async fn fan_out(spec: &Spec, branches: &mut [Branch]) -> bool {
    let started = Instant::now();
    for b in branches.iter_mut() {
        let addr = spec.upstreams[b.upstream].addr;
        b.written = 0;
        b.filled = 0;
        b.phase = Phase::Writing;
        b.conn = match checkout(addr) {
            Some(c) => Some(c),
            // Only while the pool fills up (connects run one after the
            // other; steady state never gets here).
            None => match TcpStream::connect(addr).await {
                Ok(c) => {
                    let _ = c.set_nodelay(true);
                    Some(c)
                }
                Err(_) => {
                    b.phase = Phase::Failed("connect failed");
                    None
                }
            },
        };
    }
    let join = poll_fn(|cx| {
        let mut pending = false;
        for b in branches.iter_mut() {
            match b.poll(cx, started, &spec.upstreams[b.upstream].entry_prefix) {
                Poll::Pending => pending = true,
                // Policy `all` fails fast, as the proxy does.
                Poll::Ready(()) if b.phase != Phase::Done => return Poll::Ready(false),
                Poll::Ready(()) => {}
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(true)
        }
    });
    tokio::time::timeout(DEADLINE, join).await.unwrap_or(false)
}
