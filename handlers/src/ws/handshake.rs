//! The opening handshake (RFC 6455 §4.2): checks a client's upgrade
//! request, answers the refusals, and computes the accept key.

use std::future::Future;
use std::io;

use base64::Engine as _;

use super::config::WsConfig;
use super::socket::{run, WebSocket};
use crate::http::{HttpError, Request, Response};

/// The GUID RFC 6455 §1.3 appends to the client's key.
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// A client's valid WebSocket upgrade request, not yet accepted.
///
/// A route makes one with [`Handshake::new`], which answers an invalid
/// request itself; looks at the [`origin`](Self::origin) and the
/// [`protocols`](Self::protocols) offered; and [`accept`](Self::accept)s
/// (or answers as it likes, a 403 for an origin it refuses, and the
/// connection stays HTTP).
///
/// ```no_run
/// use percore_handlers::http::{Request, Response};
/// use percore_handlers::ws::{Handshake, WsConfig};
///
/// async fn chat(req: &mut Request<'_>, res: &mut Response<'_>) -> std::io::Result<()> {
///     let Some(mut handshake) = Handshake::new(req, res) else {
///         return Ok(()); // answered: 400, or 426 for another version
///     };
///     if handshake.origin().is_some_and(|o| o != b"https://example.com") {
///         res.send(403, None, b"")?;
///         return Ok(());
///     }
///     handshake.select_protocol(&["chat.v1"]);
///     handshake.accept(res, WsConfig::default(), |mut ws| async move {
///         while let Some(msg) = ws.recv().await? {
///             ws.send(msg)?; // an echo
///         }
///         Ok(())
///     })?;
///     Ok(())
/// }
/// ```
#[derive(Debug)]
pub struct Handshake<'r> {
    /// The `Sec-WebSocket-Accept` value, on HTTP/1.1.
    accept: Option<[u8; 28]>,
    origin: Option<&'r [u8]>,
    offered: Option<&'r [u8]>,
    selected: Option<&'r str>,
    /// The first `permessage-deflate` offer the server can honour.
    #[cfg(feature = "ws-deflate")]
    deflate: Option<super::deflate::Offer>,
}

impl<'r> Handshake<'r> {
    /// The handshake of `req`, or `None` after answering `res` with the
    /// refusal (FAULTS M1): 400 for a request that is not a `GET` asking
    /// to upgrade to `websocket` (say one with a body) nor an HTTP/2
    /// extended CONNECT with `:protocol websocket` (RFC 8441), or, on
    /// HTTP/1.1, whose `Sec-WebSocket-Key` is missing, repeated or not 16
    /// bytes in base64; 426 with `Sec-WebSocket-Version: 13` for a
    /// missing or another version, on either. Nothing is upgraded then.
    pub fn new(req: &Request<'r>, res: &mut Response<'_>) -> Option<Handshake<'r>> {
        match Self::check(req) {
            Ok(handshake) => Some(handshake),
            Err(refusal) => {
                refusal.answer(res);
                None
            }
        }
    }

    fn check(req: &Request<'r>) -> Result<Handshake<'r>, Refusal> {
        let upgrade = req.upgrade_protocol();
        // HTTP/2 asks by extended CONNECT (RFC 8441 §4), HTTP/1.1 by `GET`.
        let h2 = req.version() == 2;
        let method = if h2 { "CONNECT" } else { "GET" };
        if req.method() != method || !upgrade.is_some_and(|p| p.eq_ignore_ascii_case(b"websocket"))
        {
            return Err(Refusal::Bad("not a WebSocket upgrade request"));
        }
        let version = only(req, "sec-websocket-version").ok_or(Refusal::Version(
            "missing or repeated Sec-WebSocket-Version",
        ))?;
        if version.trim_ascii() != b"13" {
            return Err(Refusal::Version("unsupported WebSocket version"));
        }
        // RFC 8441 §5: on HTTP/2 there is no key and no accept value; the
        // stream itself is the proof of a WebSocket-aware peer.
        let accept = if h2 { None } else { Some(Self::key(req)?) };
        Ok(Handshake {
            accept,
            origin: only(req, "origin"),
            offered: req.header("sec-websocket-protocol"),
            selected: None,
            #[cfg(feature = "ws-deflate")]
            deflate: super::deflate::Offer::first(
                req.headers()
                    .iter()
                    .filter(|h| h.name.eq_ignore_ascii_case("sec-websocket-extensions"))
                    .map(|h| h.value),
            ),
        })
    }

    /// The accept value for the request's `Sec-WebSocket-Key`, which must
    /// be one field of 16 bytes in base64.
    fn key(req: &Request<'r>) -> Result<[u8; 28], Refusal> {
        let key = only(req, "sec-websocket-key")
            .ok_or(Refusal::Bad("missing or repeated Sec-WebSocket-Key"))?
            .trim_ascii();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(key)
            .map_err(|_| Refusal::Bad("Sec-WebSocket-Key is not base64"))?;
        if decoded.len() != 16 {
            return Err(Refusal::Bad("Sec-WebSocket-Key is not 16 bytes"));
        }
        Ok(accept_key(key))
    }

    /// The `Origin` the client sent (browsers always do): the route
    /// decides whether to accept a page of that origin (RFC 6455 §10.2).
    pub fn origin(&self) -> Option<&'r [u8]> {
        self.origin
    }

    /// The subprotocols the client offered, in its order of preference
    /// (its first `Sec-WebSocket-Protocol` field, split at commas).
    pub fn protocols(&self) -> impl Iterator<Item = &'r str> {
        self.offered
            .and_then(|v| std::str::from_utf8(v).ok())
            .into_iter()
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|p| !p.is_empty())
    }

    /// Chooses the client's most preferred subprotocol among `supported`,
    /// which the 101 then names; `None` (and none named) when the client
    /// offered none of them. A client that offered some and gets none may
    /// close the connection itself.
    pub fn select_protocol(&mut self, supported: &[&str]) -> Option<&'r str> {
        self.selected = self.protocols().find(|p| supported.contains(p));
        self.selected
    }

    /// The `Sec-WebSocket-Accept` value the 101 carries; `None` on
    /// HTTP/2, whose handshake has no key (RFC 8441 §5).
    pub fn accept_value(&self) -> Option<&str> {
        self.accept
            .as_ref()
            .and_then(|a| std::str::from_utf8(a).ok())
    }

    /// Accepts: `res` becomes the 101 (on HTTP/2, the 200 that opens the
    /// stream as the WebSocket), and once the route returns `then`
    /// runs with the [`WebSocket`], in the connection's task, until its
    /// future ends; the server then closes the WebSocket (1000, or 1011
    /// if `then` failed) and waits up to
    /// [`close_timeout`](WsConfig::close_timeout) for the client's close.
    ///
    /// # Errors
    ///
    /// A 500 [`HttpError`] once the response's head was sent.
    pub fn accept<F, Fut>(
        self,
        res: &mut Response<'_>,
        config: WsConfig,
        then: F,
    ) -> Result<(), HttpError>
    where
        F: FnOnce(WebSocket) -> Fut + 'static,
        Fut: Future<Output = io::Result<()>> + 'static,
    {
        if let Some(accept) = &self.accept {
            res.header("Sec-WebSocket-Accept", accept)?;
        }
        if let Some(protocol) = self.selected {
            res.header("Sec-WebSocket-Protocol", protocol.as_bytes())?;
        }
        #[cfg(feature = "ws-deflate")]
        {
            let deflate = config
                .deflate
                .zip(self.deflate)
                .map(|(config, offer)| super::deflate::Negotiated::new(offer, config));
            if let Some(deflate) = &deflate {
                res.header("Sec-WebSocket-Extensions", deflate.answer().as_bytes())?;
            }
            res.upgrade("websocket", move |upgraded| {
                run(upgraded, config, deflate, then)
            })
        }
        #[cfg(not(feature = "ws-deflate"))]
        res.upgrade("websocket", move |upgraded| run(upgraded, config, then))
    }
}

/// The value of the one field named `name`, `None` if absent or repeated.
fn only<'r>(req: &Request<'r>, name: &str) -> Option<&'r [u8]> {
    let mut found = req
        .headers()
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case(name));
    let first = found.next()?;
    found.next().is_none().then_some(first.value)
}

/// `base64(SHA-1(key + GUID))` (RFC 6455 §4.2.2, step 5.4).
pub fn accept_key(key: &[u8]) -> [u8; 28] {
    let mut sha = sha1_smol::Sha1::new();
    sha.update(key);
    sha.update(GUID);
    let mut out = [0u8; 28];
    let written = base64::engine::general_purpose::STANDARD
        .encode_slice(sha.digest().bytes(), &mut out)
        .unwrap_or(0);
    debug_assert_eq!(written, 28);
    out
}

/// Why a handshake was refused.
enum Refusal {
    /// 400.
    Bad(&'static str),
    /// 426 with the version the server speaks.
    Version(&'static str),
}

impl Refusal {
    fn answer(self, res: &mut Response<'_>) {
        let (status, reason) = match self {
            Refusal::Bad(reason) => (400, reason),
            Refusal::Version(reason) => {
                // A valid constant field: cannot fail.
                let _ = res.header("Sec-WebSocket-Version", b"13");
                (426, reason)
            }
        };
        let _ = res.close_connection();
        let _ = res.send(status, Some(b"text/plain"), reason.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_rfc_example_key() {
        // RFC 6455 §1.3.
        let accept = super::accept_key(b"dGhlIHNhbXBsZSBub25jZQ==");
        assert_eq!(&accept, b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }
}
