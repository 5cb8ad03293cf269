//! Extended CONNECT (RFC 8441): an HTTP/2 stream whose request carries a
//! `:protocol` is an upgrade request, served by the same route as an
//! HTTP/1.1 `Upgrade`. A route that accepts (with
//! [`Response::upgrade`]) gets `200` and the stream as an
//! [`Upgraded`]; one that answers otherwise ends the stream with its
//! answer, except a 2xx that accepts nothing, which the client would
//! take for an open tunnel: that becomes a 501 (so does a 2xx to a plain
//! CONNECT, a TCP tunnel this server does not make).

use super::body::StreamBody;
use super::out::StreamOut;
use super::tunnel::H2Tunnel;
use crate::http::proto::HttpError;
use crate::http::response::{effective_status, Response};
use crate::http::tunnel::Tunnel;
use crate::http::upgrade::{OnUpgrade, Upgraded};

/// What a service's answer makes of a stream.
pub(super) enum Verdict {
    /// The answer goes out as it is.
    Answer,
    /// The answer is refused with this error instead.
    Refuse(HttpError),
    /// The stream is a tunnel from now on, run by this.
    Tunnel(OnUpgrade),
}

/// Judges the answer `res` of a service that returned well, to a request
/// whose `:protocol` is `protocol` (`connect`: whose method is CONNECT).
pub(super) fn verdict(res: &mut Response<'_>, protocol: Option<&[u8]>, connect: bool) -> Verdict {
    let then = res.upgrade.take();
    let accepted = then.is_some() && res.status == 101;
    match (protocol, then) {
        (Some(_), Some(then)) if accepted && !res.head_sent() => Verdict::Tunnel(then),
        // As on HTTP/1: an upgrade of a request that asked for none, or
        // of a response already streamed, is the service's error.
        _ if accepted => Verdict::Refuse(HttpError::new(
            500,
            "upgrade of a request that cannot be upgraded",
        )),
        // A 2xx to a CONNECT opens a tunnel (RFC 9113 §8.5, RFC 8441
        // §4): the client must not take an ordinary answer for one.
        _ if connect && (200..300).contains(&effective_status(res.status)) => Verdict::Refuse(
            HttpError::new(501, "the route does not accept this CONNECT"),
        ),
        _ => Verdict::Answer,
    }
}

/// Sends the 200 with the route's fields (`headers`, encoded lines) and
/// makes the stream the [`Upgraded`] the route's protocol runs on; `None`
/// when the client left before the 200 went out.
pub(super) fn open(
    mut out: StreamOut,
    body: StreamBody,
    headers: &[u8],
    date: &crate::http::date::SharedDate,
) -> Option<Upgraded> {
    out.send_head(200, headers, None, date, false).ok()?;
    let peer = body.peer_addr().ok();
    let tunnel = Tunnel::H2(H2Tunnel::new(out.stream, peer));
    Some(Upgraded::new(tunnel, Vec::new()))
}
