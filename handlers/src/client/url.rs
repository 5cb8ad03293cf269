//! The URLs a [`Client`](super::Client) takes: `http://host[:port][/path][?query]`
//! (and `https://` with a TLS config), split into what a request needs.
//!
//! Only what can be sent as is: no userinfo (RFC 9110 §4.2.4 calls it an
//! error in an `http` URI), no byte that could split the request line or
//! a header (spaces, controls, anything not ASCII: percent-encode it), no
//! IPv6 zone. A fragment is the caller's own and is not sent (RFC 3986
//! §3.5).
//!
//! Values from elsewhere (a client's path parameter, say) join a URL
//! through [`Url::push_segment`] and [`Url::push_query_pair`], which
//! percent-encode them, so that no value can name another path, add a
//! query parameter, or split the request.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use crate::http::proto::chars::is_host;

/// What a path segment keeps as is: RFC 3986's unreserved characters.
/// Everything else is encoded, even what `pchar` allows: `/`, `%`, `?`,
/// `#`, controls and non-ASCII bytes must be, and servers give `;`
/// (path parameters), `+` or `:` meanings of their own.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

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

impl Url {
    /// Appends `segment` to the path as one segment, percent-encoded:
    /// `%2F` becomes `%252F`, `a?b` `a%3Fb`, and a CR, LF, NUL or
    /// non-ASCII byte its `%XX` form. A path that ends with `/` has its
    /// empty last segment replaced (`http://h/` and `http://h` give
    /// `/segment`), as `url`'s `pop_if_empty().push()` does.
    ///
    /// What no encoding keeps one segment on every server is refused:
    /// `.` and `..` (servers resolve them, encoded too, since RFC 3986
    /// §6.2.2.2 lets them decode `%2E` first), an empty segment (it names
    /// the parent), and a `/` or `\` anywhere (nginx, and routers that
    /// match the decoded path, take `%2F` for a separator: `../keys`
    /// sent as `..%2Fkeys` reaches `/keys` there; some servers take `\`
    /// for one).
    pub(crate) fn push_segment(&mut self, segment: &str) -> Result<(), &'static str> {
        if matches!(segment, "" | "." | "..") {
            return Err("a path segment is empty, `.` or `..`, which would name another path");
        }
        if segment.contains(['/', '\\']) {
            return Err(
                "a path segment holds `/` or `\\`, which servers that decode \
                        the path take for a separator",
            );
        }
        let end = self.target.find('?').unwrap_or(self.target.len());
        let mut path = String::with_capacity(self.target.len() + segment.len() + 1);
        path.push_str(&self.target[..end]);
        if !path.ends_with('/') {
            path.push('/');
        }
        path.extend(utf8_percent_encode(segment, SEGMENT));
        path.push_str(&self.target[end..]);
        self.target = path;
        Ok(())
    }

    /// Appends `name=value` to the query, each encoded as a form's
    /// (`application/x-www-form-urlencoded`: a space as `+`, `&`, `=`,
    /// `#`, `%`, controls and non-ASCII bytes as `%XX`), so that a value
    /// stays one value of one parameter.
    pub(crate) fn push_query_pair(&mut self, name: &str, value: &str) {
        match self.target.find('?') {
            None => self.target.push('?'),
            Some(q) if q + 1 < self.target.len() && !self.target.ends_with('&') => {
                self.target.push('&');
            }
            Some(_) => {}
        }
        self.target
            .extend(form_urlencoded::byte_serialize(name.as_bytes()));
        self.target.push('=');
        self.target
            .extend(form_urlencoded::byte_serialize(value.as_bytes()));
    }

    /// The URL as sent, for the messages that name it: no fragment, and
    /// the segments and pairs pushed.
    pub(crate) fn to_text(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{}", self.authority, self.target)
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

    fn with_segments(base: &str, segments: &[&str]) -> Result<String, &'static str> {
        let mut url = Url::parse(base).expect("a base");
        for segment in segments {
            url.push_segment(segment)?;
        }
        Ok(url.target)
    }

    #[test]
    fn a_segment_is_one_segment() {
        for (segment, sent) in [
            ("paris", "/city/paris"),
            ("san jose", "/city/san%20jose"),
            ("..%2Finternal%2Fkeys", "/city/..%252Finternal%252Fkeys"),
            ("%2e%2e", "/city/%252e%252e"),
            ("x\0", "/city/x%00"),
            ("x\r\nHost: evil", "/city/x%0D%0AHost%3A%20evil"),
            ("a?b=c#d", "/city/a%3Fb%3Dc%23d"),
            ("a;jsessionid=1", "/city/a%3Bjsessionid%3D1"),
            ("zürich", "/city/z%C3%BCrich"),
            ("...", "/city/..."),
            ("a.b-c_d~e", "/city/a.b-c_d~e"),
        ] {
            assert_eq!(
                with_segments("http://h/city", &[segment]).as_deref(),
                Ok(sent),
                "{segment:?}"
            );
        }
    }

    #[test]
    fn segments_join_the_path_before_the_query() {
        assert_eq!(with_segments("http://h", &["a"]).as_deref(), Ok("/a"));
        assert_eq!(
            with_segments("http://h/", &["a", "b"]).as_deref(),
            Ok("/a/b")
        );
        assert_eq!(
            with_segments("http://h/v1/", &["a"]).as_deref(),
            Ok("/v1/a")
        );
        assert_eq!(
            with_segments("http://h/v1?x=1#frag", &["a b"]).as_deref(),
            Ok("/v1/a%20b?x=1")
        );
        assert_eq!(with_segments("http://h?q", &["a"]).as_deref(), Ok("/a?q"));
    }

    #[test]
    fn dot_empty_and_slashed_segments_are_refused() {
        for segment in ["", ".", "..", "/", "../keys", "a/b", "..\\keys", "a\\"] {
            assert!(
                with_segments("http://h/city", &[segment]).is_err(),
                "{segment:?} was taken"
            );
        }
    }

    #[test]
    fn a_query_pair_is_one_pair() {
        let pairs = |base: &str, pairs: &[(&str, &str)]| {
            let mut url = Url::parse(base).expect("a base");
            for (name, value) in pairs {
                url.push_query_pair(name, value);
            }
            url.target
        };
        assert_eq!(pairs("http://h/s", &[("q", "a b")]), "/s?q=a+b");
        assert_eq!(
            pairs("http://h/s?x=1", &[("q", "1&admin=true#f")]),
            "/s?x=1&q=1%26admin%3Dtrue%23f"
        );
        assert_eq!(
            pairs("http://h/s?", &[("a", "\r\n"), ("b", "é")]),
            "/s?a=%0D%0A&b=%C3%A9"
        );
        assert_eq!(pairs("http://h/s?x&", &[("a", "1")]), "/s?x&a=1");
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
