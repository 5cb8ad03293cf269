//! The `json_api` example as a user runs it, in a child process, on both
//! backends: each route's answer, the router's 404 and 405, the refusals
//! of bad parameters and bodies, and `/weather/{city}` calling an
//! `http_echo` upstream (and failing clearly when it is down).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use percore_test_kit::upstream::Fake;
use percore_test_kit::*;

const JSON_API: &str = env!("CARGO_BIN_EXE_json_api");
const HTTP_ECHO: &str = env!("CARGO_BIN_EXE_http_echo");

fn start(bin: &str, backend: &str, args: &[&str]) -> ChildServer {
    let mut cmd = server_command(bin, backend, &["--port", "0"]);
    cmd.args(args);
    ChildServer::spawn(cmd, Duration::from_secs(60))
        .unwrap_or_else(|f| panic!("did not start: {f:?}"))
}

/// One request on a connection of its own: the status and the body.
fn exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<(&str, &str)>,
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
    if let Some((content_type, body)) = body {
        req.push_str(&format!(
            "Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ));
    } else {
        req.push_str("\r\n");
    }
    s.write_all(req.as_bytes()).expect("send");
    let mut bytes = Vec::new();
    s.read_to_end(&mut bytes).expect("read the response");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    exchange(addr, "GET", path, None)
}

fn stop(child: ChildServer) {
    child.signal(libc::SIGTERM);
    let (status, log) = child.wait(Duration::from_secs(60));
    assert!(status.success(), "exited with {status}:\n{log}");
}

backend_process_tests! {
    /// Every route, with JSON out and in, typed parameters and their 400s,
    /// the router's 404 and 405, and the upstream call.
    fn every_route_answers(backend) {
        let echo = start(HTTP_ECHO, backend, &[]);
        let upstream = echo.addr.to_string();
        let api = start(JSON_API, backend, &["--upstream", &upstream]);
        let a = api.addr;
        assert_eq!(get(a, "/users/42"), (200, r#"{"id":42,"name":"user-42"}"#.into()));
        let (status, body) = get(a, "/users/x");
        assert_eq!(status, 400);
        assert!(body.contains("path parameter `id`"), "{body}");
        let json = Some(("application/json", r#"{"name":"ann"}"#));
        assert_eq!(exchange(a, "POST", "/users", json), (201, r#"{"id":1,"name":"ann"}"#.into()));
        assert_eq!(exchange(a, "POST", "/users", json), (201, r#"{"id":2,"name":"ann"}"#.into()));
        assert_eq!(exchange(a, "POST", "/users", Some(("text/plain", "x"))).0, 415);
        assert_eq!(exchange(a, "POST", "/users", Some(("application/json", "{"))).0, 400);
        let (status, body) = get(a, "/search?q=caf%C3%A9+au+lait&limit=3");
        assert_eq!((status, body.as_str()), (200, r#"{"limit":3,"q":"café au lait"}"#));
        assert_eq!(get(a, "/search?limit=x").0, 400);
        // Eight answers so far on the one core, this one the ninth.
        assert_eq!(get(a, "/stats"), (200, r#"{"requests":9}"#.into()));
        let (status, body) = get(a, "/weather/san%20jose");
        assert_eq!(status, 200);
        assert_eq!(body, r#"{"city":"san jose","upstream_bytes":20,"upstream_status":200}"#);
        assert_eq!(exchange(a, "DELETE", "/users/1", None).0, 405);
        assert_eq!(get(a, "/nowhere").0, 404);
        stop(api);
        stop(echo);
    }

    /// `/weather/{city}` puts the city into the upstream's path as one
    /// segment, seen by an upstream that records the targets it is
    /// asked for: `..%2F`, `%2F`, dot segments, `%00` and CR/LF never
    /// name another upstream path nor split the request; what cannot be
    /// one segment is a 400 and reaches no upstream.
    fn the_city_is_one_upstream_segment(backend) {
        let upstream = Fake::answering_ok();
        let api = start(JSON_API, backend, &["--upstream", &upstream.addr.to_string()]);
        let cases: [(&str, Option<&str>); 11] = [
            ("/weather/..%2Finternal%2Fkeys", None),
            ("/weather/..%2F..%2Finternal", None),
            ("/weather/%2F", None),
            ("/weather/%2E%2E", None),
            ("/weather/%2e", None),
            ("/weather/..%5Cinternal", None),
            ("/weather/san%20jose", Some("/city/san%20jose")),
            ("/weather/%00", Some("/city/%00")),
            ("/weather/x%0D%0AX-Injected:%201", Some("/city/x%0D%0AX-Injected%3A%201")),
            ("/weather/a%3Fb%23c", Some("/city/a%3Fb%23c")),
            ("/weather/..%252F", Some("/city/..%252F")),
        ];
        let mut expected = Vec::new();
        for (path, target) in cases {
            let (status, body) = get(api.addr, path);
            match target {
                Some(target) => {
                    assert_eq!(status, 200, "{path}: {body}");
                    expected.push(target);
                }
                None => {
                    assert_eq!(status, 400, "{path}: {body}");
                    assert!(body.contains("not a city name"), "{path}: {body}");
                }
            }
        }
        let seen: Vec<String> = upstream
            .requests()
            .iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect();
        let targets: Vec<&str> = seen
            .iter()
            .map(|r| r.split(' ').nth(1).unwrap_or_default())
            .collect();
        assert_eq!(targets, expected, "{seen:?}");
        for request in &seen {
            // The request line, Host, and the blank line: nothing added.
            assert_eq!(request.matches("\r\n").count(), 3, "{request:?}");
        }
        stop(api);
    }

    /// An upstream that refuses connections is a 502 that says so.
    fn the_upstream_call_fails_clearly(backend) {
        let dead = TcpListener::bind("127.0.0.1:0").expect("bind");
        let dead_addr = dead.local_addr().expect("addr").to_string();
        drop(dead);
        let api = start(JSON_API, backend, &["--upstream", &dead_addr]);
        let (status, body) = get(api.addr, "/weather/x");
        assert_eq!(status, 502);
        assert!(body.starts_with("Bad Gateway: upstream: connecting failed: "), "{body}");
        assert!(!body.contains(&dead_addr), "the upstream's address stays inside: {body}");
        stop(api);
    }
}
