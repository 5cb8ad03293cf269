//! One branch of a fan-out to an upstream that speaks HTTP/2
//! ([`Config::upstream_http2`](super::Config::upstream_http2)): the
//! sub-request goes as a stream of the upstream's one connection on this
//! core (the client's, `client::h2`), its response is read whole into
//! the branch's buffer, and the reply is the same as over HTTP/1.1.
//!
//! A branch cut off (a met policy, the deadline) drops its stream, which
//! resets it (`CANCEL`): nothing is left to drain. A sub-request the
//! upstream did not take (past a GOAWAY's last stream, or refused) is sent
//! once more, as the client does.

use std::cell::Cell;
use std::rc::Rc;

use bytes::Bytes;
use percore::time::{now, timeout};

use super::branch::{BranchError, Job, Reply, Target};
use super::service::FanOut;
use super::stats::bump;
use super::upstream::Upstream;
use crate::client::error::{ClientError, ErrorKind, Request};
use crate::client::exchange::Failure;
use crate::client::h2::{chose_h2, exchange, Again, H2Request, Joined, Live, Origin, Outcome};
use crate::proxy::combine::entry_bound;
use percore_http1::forward::write_request;

/// The connection fields HTTP/2 forbids (RFC 9113 §8.2.2), and `Host`,
/// which becomes the `:authority`.
const CONNECTION_FIELDS: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "host",
];

impl FanOut {
    /// A branch to upstream `index` over HTTP/2. Returns its buffer to
    /// the pool on failure; on success the reply carries it.
    pub(crate) async fn branch_h2(
        &self,
        at: &Cell<Target>,
        job: Job<'_>,
        origin: &Rc<Origin>,
    ) -> Result<Reply, BranchError> {
        let index = at.get().upstream % self.upstreams.len();
        let upstream = &self.upstreams[index];
        let mut buf = self.bufs.take();
        buf.clear();
        write_request(&mut buf, job.line, &upstream.host_line, job.shared);
        let result = self.exchange_h2(upstream, origin, &job, &mut buf).await;
        match result {
            Ok(status) => {
                if status >= 500 {
                    bump(&self.stats.upstream_5xx);
                }
                self.record(index, status < 500, job.counted);
                let body = 0..buf.len();
                Ok(Reply {
                    upstream: index,
                    status,
                    done: now(),
                    bound: entry_bound(&upstream.entry_prefix, &buf),
                    buf,
                    body,
                })
            }
            Err(failure) => {
                self.log_failure(index, failure);
                self.record(index, false, job.counted);
                self.bufs.put(buf);
                Err(BranchError {
                    upstream: index,
                    failure,
                    moved_from: at.get().moved_from,
                })
            }
        }
    }

    /// Sends the sub-request in `buf` (HTTP/1.1's bytes, put in HTTP/2's
    /// form) and reads the response's body into `buf`: its status.
    async fn exchange_h2(
        &self,
        upstream: &Upstream,
        origin: &Rc<Origin>,
        job: &Job<'_>,
        buf: &mut Vec<u8>,
    ) -> Result<u16, Failure> {
        let tls = upstream.tls.is_some();
        let mut retried = false;
        loop {
            let (head, body, named) = h2_request(buf, tls, &upstream.name)?;
            let live = self.live_h2(upstream, origin).await?;
            bump(&self.stats.sub_requests);
            let left = job.deadline.saturating_duration_since(now());
            let req = H2Request { head, body };
            match exchange(&live, req, &named, job.idempotent, left, left).await {
                Outcome::Answered(response) => {
                    let status = response.status().as_u16();
                    let mut body = response.into_body();
                    buf.clear();
                    while let Some(piece) = body.next(&named, left).await.map_err(failure)? {
                        if buf.len() + piece.len() > self.limits.max_body {
                            return Err(Failure::Bad("response body over the limit"));
                        }
                        if !job.head_only {
                            buf.extend_from_slice(&piece);
                        }
                    }
                    return Ok(status);
                }
                Outcome::Retry(e, again) => {
                    if again == Again::New {
                        origin.retire(live.generation());
                    }
                    if retried {
                        bump(&self.stats.errors_exchange);
                        return Err(failure(e));
                    }
                    retried = true;
                    bump(&self.stats.retries);
                }
                Outcome::Failed(e) => {
                    if matches!(e.kind(), ErrorKind::Io | ErrorKind::Closed) {
                        origin.retire(live.generation());
                    }
                    bump(&self.stats.errors_exchange);
                    return Err(failure(e));
                }
            }
        }
    }

    /// The upstream's connection, made if it has none.
    async fn live_h2(&self, upstream: &Upstream, origin: &Rc<Origin>) -> Result<Live, Failure> {
        let within = self.config.connect_timeout;
        let claim = match timeout(within, origin.join()).await {
            Err(_) => return Err(Failure::ConnectTimeout),
            Ok(Joined::Live(live)) => {
                bump(&self.stats.reuses);
                return Ok(live);
            }
            // Only `h2` is offered: a server that chose otherwise failed
            // the handshake.
            Ok(Joined::Http1) => return Err(Failure::Tls("the upstream did not choose h2")),
            Ok(Joined::Claim(claim)) => claim,
        };
        let conn = match self.connect(upstream).await {
            Ok(conn) => conn,
            Err(f) => {
                bump(&self.stats.errors_connect);
                return Err(f);
            }
        };
        if upstream.tls.is_some() && !chose_h2(&conn) {
            bump(&self.stats.errors_connect);
            return Err(Failure::Tls("the upstream did not choose h2 by ALPN"));
        }
        let idle = self.config.pool.idle_timeout;
        match timeout(within, claim.install(conn, idle)).await {
            Ok(Some(live)) => Ok(live),
            Ok(None) => Err(Failure::Bad("the HTTP/2 handshake failed")),
            Err(_) => Err(Failure::ConnectTimeout),
        }
    }
}

/// The sub-request `wire` (a whole HTTP/1.1 request) in HTTP/2's form:
/// its head, its body, and its name for errors.
fn h2_request(
    wire: &[u8],
    tls: bool,
    upstream: &str,
) -> Result<(http::Request<()>, Bytes, Rc<Request>), Failure> {
    const MALFORMED: Failure = Failure::Bad("the sub-request cannot be put in HTTP/2's form");
    let mut fields = [httparse::EMPTY_HEADER; 128];
    let mut parsed = httparse::Request::new(&mut fields);
    let Ok(httparse::Status::Complete(len)) = parsed.parse(wire) else {
        return Err(MALFORMED);
    };
    let (Some(method), Some(path)) = (parsed.method, parsed.path) else {
        return Err(MALFORMED);
    };
    let mut authority = upstream;
    let mut head = http::Request::builder().method(method);
    for field in parsed.headers.iter() {
        let value = field.value.trim_ascii();
        if field.name.eq_ignore_ascii_case("host") {
            authority = std::str::from_utf8(value).unwrap_or(authority);
        }
        let refused = CONNECTION_FIELDS
            .iter()
            .any(|n| field.name.eq_ignore_ascii_case(n))
            || (field.name.eq_ignore_ascii_case("te") && value != b"trailers");
        if !refused {
            head = head.header(field.name, value);
        }
    }
    let scheme = if tls { "https" } else { "http" };
    let head = head
        .uri(format!("{scheme}://{authority}{path}"))
        .body(())
        .map_err(|_| MALFORMED)?;
    let named = Rc::new(Request {
        method: method.to_owned(),
        url: format!("{scheme}://{upstream}{path}"),
    });
    Ok((head, Bytes::copy_from_slice(&wire[len..]), named))
}

/// A failed HTTP/2 sub-request as the proxy tells it.
fn failure(e: ClientError) -> Failure {
    match e.kind() {
        ErrorKind::Timeout(_) => Failure::Deadline,
        ErrorKind::Closed => Failure::Closed,
        ErrorKind::Truncated => Failure::Truncated,
        ErrorKind::Io => e.io_failure().map_or(Failure::Closed, Failure::Io),
        ErrorKind::Reset => Failure::Bad("the upstream reset the HTTP/2 stream"),
        ErrorKind::GoAway => Failure::Bad("the upstream is closing its HTTP/2 connection"),
        _ => Failure::Bad("HTTP/2 protocol error"),
    }
}
