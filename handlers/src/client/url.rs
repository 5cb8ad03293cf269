//! The URLs a [`Client`](super::Client) takes: `http://host[:port][/path][?query]`
//! (and `https://` with a TLS config), split into what a request needs.
//!
//! Only what can be sent as is: no userinfo (RFC 9110 §4.2.4 calls it an
//! error in an `http` URI), no byte that could split the request line or
//! a header (spaces, controls, anything not ASCII: percent-encode it), no
//! IPv6 zone. A fragment is the caller's own and is not sent (RFC 3986
//! §3.5).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::http::proto::chars::is_host;

/// A URL taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Url {
    /// `https`.
    pub(crate) tls: bool,
    /// The host as written, lowercased, without the brackets of an IPv6
    /// literal: what a name is resolved from, and the TLS server name.
    pub(crate) host: String,
    /// Set when the host is an IP literal: nothing to resolve.
    pub(crate) ip: Option<IpAddr>,
    pub(crate) port: u16,
    /// What the `Host` field says: the authority as written.
    pub(crate) authority: String,
    /// The origin-form target: the path (at least `/`) and the query.
    pub(crate) target: String,
}

impl Url {
    /// Takes `url` apart, or says what is wrong with it.
    pub(crate) fn parse(url: &str) -> Result<Url, &'static str> {
        if !url.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("a space, control or non-ASCII byte (percent-encode it)");
        }
        let (scheme, rest) = url
            .split_once("://")
            .ok_or("no scheme (expected http:// or https://)")?;
        // Schemes are case-insensitive (RFC 3986 §3.1).
        let (tls, default_port) = if scheme.eq_ignore_ascii_case("http") {
            (false, 80)
        } else if scheme.eq_ignore_ascii_case("https") {
            (true, 443)
        } else {
            return Err("the scheme is neither http nor https");
        };
        // RFC 3986 §3.2: the authority ends at the first `/`, `?` or `#`.
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.contains('@') {
            return Err("userinfo (user@host) is not allowed in an http URL");
        }
        if !is_host(authority.as_bytes()) {
            return Err("the host is not a valid host name or IP literal");
        }
        let (host, port) = split_port(authority)?;
        let port = port.unwrap_or(default_port);
        let (host, ip) = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Some(v6) => {
                let ip = v6
                    .parse::<Ipv6Addr>()
                    .map_err(|_| "the IPv6 literal is not an address (zones are not allowed)")?;
                (v6.to_ascii_lowercase(), Some(IpAddr::V6(ip)))
            }
            None if host.is_empty() => return Err("no host"),
            None => (
                host.to_ascii_lowercase(),
                host.parse::<Ipv4Addr>().ok().map(IpAddr::V4),
            ),
        };
        let tail = tail.split_once('#').map_or(tail, |(before, _)| before);
        let target = if tail.starts_with('/') {
            tail.to_owned()
        } else {
            // `http://host?q`: RFC 9112 §3.2.1 sends `/` for an empty path.
            format!("/{tail}")
        };
        Ok(Url {
            tls,
            host,
            ip,
            port,
            authority: authority.to_owned(),
            target,
        })
    }
}

/// The host and the port of an authority `is_host` accepted: the port
/// follows the last `:`, except inside an IPv6 literal. An empty port
/// (`host:`) is the default one (RFC 3986 §3.2.3).
fn split_port(authority: &str) -> Result<(&str, Option<u16>), &'static str> {
    match authority.rfind(':') {
        Some(colon) if !authority[colon..].contains(']') => {
            let port = &authority[colon + 1..];
            let port = if port.is_empty() {
                None
            } else {
                match port.parse::<u16>() {
                    Ok(0) | Err(_) => return Err("the port is not a number from 1 to 65535"),
                    Ok(port) => Some(port),
                }
            };
            Ok((&authority[..colon], port))
        }
        _ => Ok((authority, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(url: &str) -> (bool, String, Option<IpAddr>, u16, String, String) {
        let u = Url::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        (u.tls, u.host, u.ip, u.port, u.authority, u.target)
    }

    #[test]
    fn takes_urls_apart() {
        let v4 = Some(IpAddr::from([127, 0, 0, 1]));
        assert_eq!(
            parts("http://127.0.0.1:8080/x?q=1#frag"),
            (
                false,
                "127.0.0.1".into(),
                v4,
                8080,
                "127.0.0.1:8080".into(),
                "/x?q=1".into()
            )
        );
        assert_eq!(
            parts("HTTP://Example.COM"),
            (
                false,
                "example.com".into(),
                None,
                80,
                "Example.COM".into(),
                "/".into()
            )
        );
        assert_eq!(parts("http://h?q").5, "/?q");
        assert_eq!(parts("http://h:/").3, 80);
        assert_eq!(parts("https://h/").3, 443);
        let (_, host, ip, port, authority, _) = parts("http://[::1]:9/");
        assert_eq!(
            (host.as_str(), port, authority.as_str()),
            ("::1", 9, "[::1]:9")
        );
        assert_eq!(ip, Some(IpAddr::from(Ipv6Addr::LOCALHOST)));
    }

    #[test]
    fn refuses_what_cannot_be_sent() {
        for bad in [
            "",
            "127.0.0.1:80/x",
            "ftp://h/",
            "http:///x",
            "http://user@h/",
            "http://h:0/",
            "http://h:65536/",
            "http://h:x/",
            "http://h/a b",
            "http://h/\r\nX: y",
            "http://h/é",
            "http://[fe80::1%25eth0]/",
            "http://[::1/",
            "http://a:b:c/",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad:?} was taken");
        }
    }
}
