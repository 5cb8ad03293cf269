//! HTTP keep-alive clients (one connection with blocking std sockets, many
//! with tokio) and the fan-out variants that check the proxy's combined
//! answer. The exchanges are generic over the stream, so that the HTTPS
//! clients (`https`) run them over TLS.

use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::*;
use crate::http;

/// `read`, retried on EINTR (std's `read_exact`/`write_all` already do).
fn read_retrying<R: Read>(s: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match s.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            r => return r,
        }
    }
}

/// Reads one framed response into `buf[..*filled]` and removes it.
fn read_response<R: Read>(s: &mut R, buf: &mut [u8], filled: &mut usize) -> io::Result<usize> {
    loop {
        if let Some(len) = http::frame_response(&buf[..*filled])? {
            buf.copy_within(len..*filled, 0);
            *filled -= len;
            return Ok(len);
        }
        if *filled == buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "HTTP response too large",
            ));
        }
        let n = read_retrying(s, &mut buf[*filled..])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "server closed",
            ));
        }
        *filled += n;
    }
}

async fn read_response_async<S: AsyncRead + Unpin>(
    s: &mut S,
    buf: &mut [u8],
    filled: &mut usize,
) -> io::Result<usize> {
    loop {
        if let Some(len) = http::frame_response(&buf[..*filled])? {
            buf.copy_within(len..*filled, 0);
            *filled -= len;
            return Ok(len);
        }
        if *filled == buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "HTTP response too large",
            ));
        }
        let n = s.read(&mut buf[*filled..]).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "server closed",
            ));
        }
        *filled += n;
    }
}

/// Room for one response: a fan-out answer of width 64 is about 6 KiB.
const RESPONSE_BUF: usize = 64 * 1024;

/// Whether the body of a framed response (a 200, see
/// [`http::frame_response`]) is exactly the 20-byte JSON answer.
pub(super) fn check_body(response: &[u8]) -> io::Result<()> {
    check_body_is(response, http::BODY)
}

/// Whether the body of a framed response is exactly `expected`.
fn check_body_is(response: &[u8], expected: &[u8]) -> io::Result<()> {
    let body = http::header_end(response).map(|head| &response[head..]);
    if body == Some(expected) {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "HTTP body is {:?}, not the expected {:?}",
                String::from_utf8_lossy(body.unwrap_or_default()),
                String::from_utf8_lossy(expected)
            ),
        ))
    }
}

/// Sends `request` and flushes it: a TLS stream may hold records back
/// until flushed, and a TcpStream's flush costs nothing.
async fn send_async<S: AsyncWrite + Unpin>(s: &mut S, request: &[u8]) -> io::Result<()> {
    s.write_all(request).await?;
    s.flush().await
}

/// One exchange of `request` whose response `check` accepts, before the
/// measured window.
async fn validate_async_with<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    request: &[u8],
    check: &dyn Fn(&[u8]) -> io::Result<()>,
) -> io::Result<()> {
    send_async(s, request).await?;
    let mut buf = vec![0u8; RESPONSE_BUF];
    let mut filled = 0;
    loop {
        let n = tokio::time::timeout(IO_TIMEOUT, s.read(&mut buf[filled..]))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no HTTP answer"))??;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "server closed",
            ));
        }
        filled += n;
        if let Some(len) = http::frame_response(&buf[..filled])? {
            return check(&buf[..len]);
        }
        if filled == buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "HTTP response too large",
            ));
        }
    }
}

/// One exchange that checks the body, before the measured window.
pub(super) fn http_validate(s: &mut TcpStream) -> io::Result<()> {
    validate_with(s, http::REQUEST, &check_body)
}

/// One exchange of `request` whose response `check` accepts.
pub(super) fn validate_with<S: Read + Write>(
    s: &mut S,
    request: &[u8],
    check: &dyn Fn(&[u8]) -> io::Result<()>,
) -> io::Result<()> {
    s.write_all(request)?;
    let mut buf = vec![0u8; RESPONSE_BUF];
    let mut filled = 0;
    loop {
        let n = read_retrying(s, &mut buf[filled..])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "server closed",
            ));
        }
        filled += n;
        if let Some(len) = http::frame_response(&buf[..filled])? {
            return check(&buf[..len]);
        }
        if filled == buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "HTTP response too large",
            ));
        }
    }
}

/// Adds how many requests the connection had served to an error.
fn after_requests(e: io::Error, ops: u64) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("{e} (after {ops} requests on the connection)"),
    )
}

/// Keep-alive GETs on one blocking connection, one at a time. ops = requests.
pub fn http_single(addr: SocketAddr, window: Duration, probe: &mut Probe<'_>) -> io::Result<Load> {
    single_loop(addr, &check_body, window, probe)
}

/// Keep-alive GETs on one blocking connection, one at a time, after one
/// exchange `check` accepts. ops = requests.
fn single_loop(
    addr: SocketAddr,
    check: &dyn Fn(&[u8]) -> io::Result<()>,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    let mut s = connect(addr)?;
    validate_with(&mut s, http::REQUEST, check)?;
    let mut buf = vec![0u8; RESPONSE_BUF];
    let mut filled = 0;
    let mut ops = 0u64;
    probe.start();
    let deadline = Instant::now() + window;
    while ops < MAX_OPS {
        s.write_all(http::REQUEST)
            .map_err(|e| after_requests(e, ops))?;
        read_response(&mut s, &mut buf, &mut filled).map_err(|e| after_requests(e, ops))?;
        ops += 1;
        if Instant::now() >= deadline {
            break;
        }
    }
    probe.stop();
    Ok(Load {
        ops,
        ..Load::default()
    })
}

/// `conns` keep-alive connections on one tokio current_thread runtime, each
/// with one request in flight (closed loop). ops = requests.
pub fn http_concurrent(
    addr: SocketAddr,
    conns: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    let exchange = Exchange {
        request: http::REQUEST,
        check: &check_body,
    };
    concurrent_loop(|| connect_async(addr), conns, exchange, window, probe)
}

/// `conns` keep-alive connections to the JSON API on one tokio
/// current_thread runtime, each with one `GET /users/42` in flight (closed
/// loop), each connection's first answer checked byte for byte.
/// ops = requests.
pub fn api_concurrent(
    addr: SocketAddr,
    conns: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    let exchange = Exchange {
        request: http::API_USER_REQUEST,
        check: &|r| check_body_is(r, http::API_USER_BODY),
    };
    concurrent_loop(|| connect_async(addr), conns, exchange, window, probe)
}

/// What a closed-loop connection sends, and what it accepts as the first
/// answer (later answers are only framed: checking each would load the
/// client CPU, which sets the pace).
#[derive(Clone, Copy)]
pub(super) struct Exchange<'a> {
    /// The request, sent again as soon as its answer is in.
    pub(super) request: &'static [u8],
    /// Judges the first answer of each connection.
    pub(super) check: &'a dyn Fn(&[u8]) -> io::Result<()>,
}

/// `conns` keep-alive connections made by `connect` on one tokio
/// current_thread runtime, each validated with the exchange's check and
/// then with one request in flight (closed loop). ops = requests.
pub(super) fn concurrent_loop<S, C, F>(
    connect: C,
    conns: usize,
    exchange: Exchange<'_>,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    C: Fn() -> F,
    F: Future<Output = io::Result<S>>,
{
    let Exchange { request, check } = exchange;
    block_on(
        window + IO_TIMEOUT * 2 + Duration::from_millis(conns as u64 * 5),
        async {
            let mut streams = Vec::with_capacity(conns);
            for _ in 0..conns {
                let mut s = connect().await?;
                validate_async_with(&mut s, request, check).await?;
                streams.push((s, vec![0u8; RESPONSE_BUF]));
            }
            probe.start();
            let deadline = Instant::now() + window;
            let mut set = tokio::task::JoinSet::new();
            for (mut s, mut buf) in streams {
                set.spawn(async move {
                    let mut filled = 0;
                    let mut ops = 0u64;
                    while ops < MAX_OPS {
                        send_async(&mut s, request)
                            .await
                            .map_err(|e| after_requests(e, ops))?;
                        read_response_async(&mut s, &mut buf, &mut filled)
                            .await
                            .map_err(|e| after_requests(e, ops))?;
                        ops += 1;
                        if Instant::now() >= deadline {
                            break;
                        }
                    }
                    Ok::<u64, io::Error>(ops)
                });
            }
            let mut ops = 0;
            while let Some(r) = set.join_next().await {
                ops += r.map_err(task_error)??;
            }
            probe.stop();
            Ok(Load {
                ops,
                ..Load::default()
            })
        },
    )
}

// ------------------------------------------------------------ fan-out ----

/// Whether `response` is a fan-out proxy's 200 with a JSON array of
/// exactly `width` entries, each the upstream's 20-byte JSON body.
pub fn check_fan_out(response: &[u8], width: usize) -> io::Result<()> {
    let bad = |why: String| Err(io::Error::new(io::ErrorKind::InvalidData, why));
    let Some(head) = http::header_end(response) else {
        return bad("fan-out response without a head".into());
    };
    let body = &response[head..];
    if !(body.starts_with(b"[") && body.ends_with(b"]")) {
        return bad(format!(
            "fan-out body is not a JSON array: {:?}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        ));
    }
    let count = |needle: &[u8]| body.windows(needle.len()).filter(|w| *w == needle).count();
    let entries = count(b"{\"upstream\":");
    let answers = count(br#""status":200,"#);
    let bodies = count(br#""body":"{\"message\":\"Hello!\"}""#);
    if entries != width || answers != width || bodies != width {
        return bad(format!(
            "fan-out body has {entries} entries, {answers} with status 200, {bodies} with the \
             upstream body; expected {width}"
        ));
    }
    Ok(())
}

/// Keep-alive GETs through a fan-out proxy of `width` on one blocking
/// connection, one at a time; the first answer is checked entry by entry,
/// later ones for status 200 and framing. ops = front requests.
pub fn fan_out_single(
    addr: SocketAddr,
    width: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    single_loop(addr, &|r| check_fan_out(r, width), window, probe)
}

/// `conns` keep-alive connections to a fan-out proxy of `width`, each with
/// one request in flight (closed loop), so `conns` fan-outs are in flight
/// at once. ops = front requests.
pub fn fan_out_concurrent(
    addr: SocketAddr,
    conns: usize,
    width: usize,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    let exchange = Exchange {
        request: http::REQUEST,
        check: &|r| check_fan_out(r, width),
    };
    concurrent_loop(|| connect_async(addr), conns, exchange, window, probe)
}
