//! Upgraded connections through the proxy. With [`Config::width`] 1, a
//! request that asks to switch protocols (RFC 9110 §7.8: a WebSocket
//! handshake, or any `Upgrade`) goes to one upstream, chosen round-robin
//! among those not ejected, on a connection of its own (never pooled).
//! When the upstream answers 101, the client gets the 101 with the
//! upstream's end-to-end fields (say `Sec-WebSocket-Accept`), and from
//! then on the proxy copies bytes both ways unchanged: what either side
//! sent right behind its head first, then the streams, until each side
//! ends its half (passed on as a half-close) or either fails (both are
//! then closed).
//!
//! An upstream that does not switch gets the client a 502 naming its
//! status, as does one that fails to answer; no answer within
//! [`Config::deadline`] (or no connection within
//! [`Config::connect_timeout`]) is a 504. With a wider fan-out an upgrade
//! cannot be joined: such a request is fanned out as any other, without
//! its `Upgrade` (a hop-by-hop field).

use std::io;

use percore::net::Stream;
use percore::time::now;
use percore_http1::forward::write_forwarded;
use percore_http1::response::head;

use super::service::FanOut;
use super::stats::bump;
use super::subrequest::write_request_line;
use super::target::OriginForm;
use crate::client::connect::connect;
use crate::client::exchange::Failure;
use crate::http::{Request, Response};

/// Response fields the proxy does not pass on from the upstream's 101:
/// those about the upstream's connection, and those the HTTP layer
/// writes itself.
const NOT_PASSED: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "date",
    "server",
];

impl FanOut {
    /// Passes the upgrade `req` asks for (to `protocol`) to an upstream
    /// and, once it switches, relays the connection (see the module docs).
    pub(crate) async fn tunnel(
        &self,
        req: &mut Request<'_>,
        res: &mut Response<'_>,
        target: OriginForm<'_>,
        protocol: &str,
    ) -> io::Result<()> {
        let started = now();
        let healthy = self.upstreams.len() - self.ejected_count(started);
        if healthy == 0 {
            return self.reject_all_ejected(res, started);
        }
        bump(&self.stats.requests);
        let k = self.next.get() % healthy;
        self.next.set((k + 1) % healthy);
        let upstream = &self.upstreams[self.nth_healthy(k, started)];
        let mut request = Vec::new();
        write_request_line(&mut request, req.method(), target);
        request.extend_from_slice(&upstream.host_line);
        let client = req.peer_addr().ok().map(|a| a.ip());
        write_forwarded(&mut request, req.headers(), client, self.via.element());
        request.extend_from_slice(b"Connection: Upgrade\r\nUpgrade: ");
        request.extend_from_slice(protocol.as_bytes());
        request.extend_from_slice(b"\r\n\r\n");
        let tls = upstream.tls.as_ref().map(|(c, name)| (c, name.as_str()));
        let conn = match connect(&upstream.addr, tls, self.config.connect_timeout).await {
            Ok(conn) => conn,
            Err(failure) => {
                let timed_out = matches!(failure, Failure::ConnectTimeout);
                return self.tunnel_failed(res, &upstream.name, timed_out, "cannot connect");
            }
        };
        let deadline = self.config.deadline.saturating_sub(started.elapsed());
        let answer = percore::time::timeout(deadline, self.switch(&conn, request)).await;
        let (head_len, mut read) = match answer {
            Err(_) => return self.tunnel_failed(res, &upstream.name, true, "no answer"),
            Ok(Err(why)) => return self.tunnel_failed(res, &upstream.name, false, &why),
            Ok(Ok(switched)) => switched,
        };
        let mut fields = [httparse::EMPTY_HEADER; head::MAX_FIELDS];
        let mut parsed = httparse::Response::new(&mut fields);
        if parsed.parse(&read[..head_len]).is_err() {
            return self.tunnel_failed(res, &upstream.name, false, "a malformed head");
        }
        for field in parsed.headers.iter() {
            if !NOT_PASSED
                .iter()
                .any(|n| field.name.eq_ignore_ascii_case(n))
            {
                res.header(field.name, field.value)?;
            }
        }
        // The upstream's bytes behind its 101 belong to the new protocol.
        let behind = read.split_off(head_len);
        res.upgrade(protocol, move |up| async move {
            // Only HTTP/1.1 upgrades come here (see the service's call).
            let Ok((client, early)) = up.into_connection() else {
                return Err(std::io::Error::other("an HTTP/2 stream cannot be relayed"));
            };
            relay(client, early, conn, behind).await
        })?;
        Ok(())
    }

    /// Sends `request` on `conn` and reads the answer's head: its length
    /// and the bytes read, when it is a 101; else why not.
    async fn switch(&self, conn: &Stream, request: Vec<u8>) -> Result<(usize, Vec<u8>), String> {
        conn.write_all(request)
            .await
            .0
            .map_err(|e| format!("send failed: {e}"))?;
        let mut read = Vec::new();
        loop {
            match head::parse(&read) {
                Ok(Some(h)) if h.status == 101 => return Ok((h.len, read)),
                Ok(Some(h)) => return Err(format!("answered {}, not 101", h.status)),
                Ok(None) if read.len() > self.limits.max_head => {
                    return Err("a head over the limit".to_owned())
                }
                Ok(None) => {}
                Err(_) => return Err("a malformed head".to_owned()),
            }
            match conn.read().await {
                Ok(Some(buf)) => read.extend_from_slice(&buf),
                Ok(None) => return Err("closed before its head".to_owned()),
                Err(e) => return Err(format!("read failed: {e}")),
            }
        }
    }

    /// Answers a tunnel that could not be opened: 504 when `timed_out`,
    /// else 502, naming the upstream and why.
    fn tunnel_failed(
        &self,
        res: &mut Response<'_>,
        upstream: &str,
        timed_out: bool,
        why: &str,
    ) -> io::Result<()> {
        bump(&self.stats.failed);
        if timed_out {
            bump(&self.stats.failed_504);
        }
        let status = if timed_out { 504 } else { 502 };
        let body = format!("upstream {upstream}: {why}\n");
        res.send(status, Some(b"text/plain"), body.as_bytes())?;
        Ok(())
    }
}

/// Copies bytes both ways between `client` and `upstream`, the bytes each
/// sent behind its head first, until both halves end; a failure either
/// way ends both (dropping the streams closes them).
async fn relay(
    client: Stream,
    early: Vec<u8>,
    upstream: Stream,
    behind: Vec<u8>,
) -> io::Result<()> {
    let up = copy(&client, early, &upstream);
    let down = copy(&upstream, behind, &client);
    percore::future::try_join(up, down).await?;
    Ok(())
}

/// Writes `first`, then what `from` reads, to `to`, until `from` ends;
/// then ends `to`'s write half.
async fn copy(from: &Stream, first: Vec<u8>, to: &Stream) -> io::Result<()> {
    if !first.is_empty() {
        to.write_all(first).await.0?;
    }
    while let Some(buf) = from.read().await? {
        to.write_all(buf).await.0?;
    }
    to.shutdown_write()
}
