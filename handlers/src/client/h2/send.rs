//! A request's way over HTTP/2 ([`RequestBuilder::send_h2`]): whether
//! it goes at all, the origin's connection joined or made, the request
//! put in HTTP/2's form, and the one retry of a request the server did
//! not take.

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::rc::Rc;

use percore::net::Stream;
use percore::time::timeout;

use super::exchange::{exchange, Again, H2Request, Outcome};
use super::{chose_h2, Joined};
use crate::client::error::{ClientError, ErrorKind, Op};
use crate::client::request::{connect_any, RequestBuilder};
use crate::client::response::ClientResponse;
use crate::client::url::Url;

/// Where [`RequestBuilder::send_h2`] leaves a request: `Break` with
/// its response (or why it failed) when it went over HTTP/2, `Continue`
/// when it is HTTP/1.1's to send, on the connection given (made for it,
/// whose ALPN chose `http/1.1`) or on the pool's.
type Route = ControlFlow<Result<ClientResponse, ClientError>, Option<Stream>>;

/// The connection fields HTTP/2 forbids (RFC 9113 §8.2.2), and `Host`,
/// which becomes the `:authority`.
fn hop_by_hop(name: &str) -> bool {
    [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
        "host",
    ]
    .iter()
    .any(|n| name.eq_ignore_ascii_case(n))
}

impl RequestBuilder {
    /// Sends the request over HTTP/2 if it goes so: to an `https://`
    /// origin while HTTP/2 is offered and the origin did not choose
    /// HTTP/1.1, or to an `http://` one with prior knowledge.
    pub(crate) async fn send_h2(&self, url: &Url, idempotent: bool) -> Route {
        let wanted = if url.tls {
            self.http2 && self.client.tls_configs().is_some()
        } else {
            self.prior_knowledge
        };
        if !wanted {
            return ControlFlow::Continue(None);
        }
        let request = &self.request;
        let origin = self.client.origin(url);
        let mut addrs: Option<Rc<[SocketAddr]>> = None;
        let mut retried = false;
        loop {
            let connect = self.timeouts.connect;
            let live = match timeout(connect, origin.join()).await {
                Err(_) => {
                    return ControlFlow::Break(Err(ClientError::timeout(
                        request,
                        Op::Connect,
                        connect,
                    )))
                }
                Ok(Joined::Http1) => return ControlFlow::Continue(None),
                Ok(Joined::Live(live)) => live,
                Ok(Joined::Claim(claim)) => {
                    let addrs = match &addrs {
                        Some(addrs) => addrs,
                        None => match self.resolve(url).await {
                            Ok(found) => addrs.insert(found),
                            Err(e) => return ControlFlow::Break(Err(e)),
                        },
                    };
                    let tls = self
                        .client
                        .tls_configs()
                        .filter(|_| url.tls)
                        .map(|configs| (&configs.h2, url.host.as_str()));
                    let conn = match connect_any(addrs, tls, connect).await {
                        Ok(conn) => conn,
                        Err(f) => {
                            return ControlFlow::Break(Err(ClientError::failure(
                                request, f, connect,
                            )))
                        }
                    };
                    if url.tls && !chose_h2(&conn) {
                        claim.http1();
                        return ControlFlow::Continue(Some(conn));
                    }
                    let idle = self.client.config().pool.idle_timeout;
                    match timeout(connect, claim.install(conn, idle)).await {
                        Ok(Some(live)) => live,
                        Ok(None) => {
                            let why = "the HTTP/2 handshake failed";
                            let kind = ErrorKind::Protocol;
                            let e = ClientError::with_detail(request, kind, why.to_owned());
                            return ControlFlow::Break(Err(e));
                        }
                        Err(_) => {
                            let e = ClientError::timeout(request, Op::Connect, connect);
                            return ControlFlow::Break(Err(e));
                        }
                    }
                }
            };
            let head = match self.h2_request(url) {
                Ok(head) => head,
                Err(e) => return ControlFlow::Break(Err(e)),
            };
            let (write, read) = (self.timeouts.write, self.timeouts.head);
            match exchange(&live, head, request, idempotent, write, read).await {
                Outcome::Answered(response) => {
                    let pool = self.client.pool(url);
                    return ControlFlow::Break(Ok(ClientResponse::from_h2(
                        response,
                        pool,
                        Rc::clone(request),
                        self.timeouts.body,
                        self.max_body,
                    )));
                }
                Outcome::Retry(e, again) => {
                    if again == Again::New {
                        origin.retire(live.generation);
                    }
                    if retried {
                        return ControlFlow::Break(Err(e));
                    }
                    tracing::debug!(error = %e, "HTTP/2 request not taken: sent again");
                    retried = true;
                }
                Outcome::Failed(e) => {
                    if matches!(e.kind(), ErrorKind::Io | ErrorKind::Closed) {
                        origin.retire(live.generation);
                    }
                    return ControlFlow::Break(Err(e));
                }
            }
        }
    }

    /// The request in HTTP/2's form: `:method`, `:scheme`, `:authority`
    /// (the `Host` given, else the URL's) and `:path`, the fields given
    /// but the connection's own, and the body with its length.
    fn h2_request(&self, url: &Url) -> Result<H2Request, ClientError> {
        let invalid = |why| ClientError::new(&self.request, ErrorKind::InvalidRequest(why));
        let mut authority = url.authority.as_str();
        let mut builder = http::Request::builder().method(self.request.method.as_str());
        for line in self.fields.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            // Names are tokens, values checked: both as given.
            let name = std::str::from_utf8(&line[..colon]).unwrap_or_default();
            let value = line[colon + 1..].trim_ascii();
            if name.eq_ignore_ascii_case("host") {
                authority = std::str::from_utf8(value).unwrap_or(authority);
            }
            if hop_by_hop(name) || (name.eq_ignore_ascii_case("te") && value != b"trailers") {
                continue;
            }
            builder = builder.header(name, value);
        }
        let method = self.request.method.as_bytes();
        let body = self.body.clone().unwrap_or_default();
        if self.body.is_some() || matches!(method, b"POST" | b"PUT" | b"PATCH") {
            builder = builder.header("content-length", body.len());
        }
        let scheme = if url.tls { "https" } else { "http" };
        let uri = format!("{scheme}://{authority}{}", url.target);
        let head = builder
            .uri(uri)
            .body(())
            .map_err(|_| invalid("the request cannot be put in HTTP/2's form"))?;
        Ok(H2Request { head, body })
    }
}
