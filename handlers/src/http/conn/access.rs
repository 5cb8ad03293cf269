//! The access log: one INFO line per response, when
//! [`Config::access_log`](crate::http::Config::access_log) is on, under the
//! target `percore_handlers::http::access` (so `RUST_LOG` can route or
//! silence it alone).

use std::fmt;
use std::time::Instant;

use percore::Connection;

/// Target of the access log's lines.
const TARGET: &str = "percore_handlers::http::access";

/// The request a response answers, for its line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Exchange<'a> {
    pub(crate) method: &'a str,
    pub(crate) target: &'a str,
    /// When the turn that read the request began (the core's clock).
    pub(crate) started: Instant,
}

/// How a response ended, for its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Put whole in the output.
    Whole,
    /// Its head went out, then the exchange failed (a service error or
    /// panic, the client leaving, the stop) before the rest of its body
    /// did: the client saw a body cut short. The line says
    /// `incomplete=true`.
    Incomplete,
}

/// The status an access line gives a request whose client closed the
/// connection before any response was sent (nginx's convention); no
/// response counts it.
pub(crate) const CLIENT_LEFT: u16 = 499;

/// Logs one response: the client, the request (`-` for one whose head
/// did not parse, 400, 414, 417, 431, 501 or 505, or was too slow to
/// arrive, 408; a `Content-Length` over the limit, 413, has its method
/// and target), the status, and the
/// microseconds from the read that brought the request to the response in
/// the output.
pub(crate) fn log(conn: &Connection, exchange: Option<Exchange<'_>>, status: u16, ending: Ending) {
    log_peer(conn.peer_addr().ok(), exchange, status, ending);
}

/// As [`log`], for a client whose address is known already (an HTTP/2
/// stream's).
pub(crate) fn log_peer(
    peer: Option<std::net::SocketAddr>,
    exchange: Option<Exchange<'_>>,
    status: u16,
    ending: Ending,
) {
    let peer = OrDash(peer);
    let (method, target, micros) = match exchange {
        Some(e) => (
            e.method,
            e.target,
            Instant::now()
                .saturating_duration_since(e.started)
                .as_micros() as u64,
        ),
        None => ("-", "-", 0),
    };
    // Display, not Debug: no quotes. A method is a token; a target cannot
    // hold a space or an ASCII control byte (the parser refused those), and
    // `Escaped` encodes the rest that could end the line or open a quoted
    // field, so the line stays one line of space-separated `key=value`
    // fields.
    let target = Escaped(target);
    match ending {
        Ending::Whole => {
            tracing::info!(target: TARGET, peer = %peer, method = %method, target = %target, status, micros);
        }
        Ending::Incomplete => {
            tracing::info!(target: TARGET, peer = %peer, method = %method, target = %target, status, micros, incomplete = true);
        }
    }
}

/// A value, or `-` when there is none, written without a `String` per line.
struct OrDash<T>(Option<T>);

impl<T: fmt::Display> fmt::Display for OrDash<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(value) => value.fmt(f),
            None => f.write_str("-"),
        }
    }
}

/// A request target as its line shows it: printable ASCII as it came,
/// except `"` and `\`, which a log reader may take for the start of a
/// quoted value or an escape; those, and any other byte (the parser admits
/// UTF-8, NEL and LINE SEPARATOR among it, which some readers take for the
/// end of a line), percent-encoded, as in a URI.
struct Escaped<'a>(&'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.0;
        let mut plain_from = 0;
        for (at, c) in text.char_indices() {
            if matches!(c, '!'..='~') && c != '"' && c != '\\' {
                continue;
            }
            f.write_str(text.get(plain_from..at).unwrap_or_default())?;
            let mut utf8 = [0; 4];
            for b in c.encode_utf8(&mut utf8).bytes() {
                write!(f, "%{b:02X}")?;
            }
            plain_from = at + c.len_utf8();
        }
        f.write_str(text.get(plain_from..).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::Escaped;

    #[test]
    fn targets_keep_printable_ascii_and_encode_the_rest() {
        let cases = [
            ("/hello?x=1&y=%20", "/hello?x=1&y=%20"),
            ("/q\"a\\b", "/q%22a%5Cb"),
            ("/\u{85}\u{2028}é", "/%C2%85%E2%80%A8%C3%A9"),
            ("/a b\n", "/a%20b%0A"),
            ("", ""),
        ];
        for (target, logged) in cases {
            assert_eq!(Escaped(target).to_string(), logged, "{target:?}");
        }
    }
}
