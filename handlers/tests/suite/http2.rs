//! HTTP/2 on both backends: a router answered as over HTTP/1 (a path
//! parameter, a JSON echo, `HEAD`, 404, 405, 413) with curl in clear text
//! (prior knowledge) and over TLS (ALPN `h2`, and `http/1.1` still);
//! streams of one connection served together; h2load without errors; the
//! stop's GOAWAY with the stream in flight served; and the rapid-reset
//! and CONTINUATION floods cut off while another client is served. (Features `h2` and
//! `json`, which `./test.sh` enables.)
#![cfg(all(feature = "h2", feature = "json"))]

use crate::support;

use std::cell::Cell;
use std::io::{self, Read as _, Write as _};
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use percore::tls::ServerTls;
use percore::Server;
use percore_handlers::http::{Routed, Router, Routes};
use percore_test_kit::*;
use support::h2raw::*;
use support::http::*;

#[derive(Default)]
struct App {
    /// Requests of `/together` begun and not yet answered.
    waiting: Cell<u32>,
}

type Res<'a, 'b> = &'a mut Response<'b>;

async fn user(_: &App, req: &mut Routed<'_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let id: u64 = req.param("id")?;
    let body = format!("user {id} v{}\n", req.version());
    res.header("X-Route", b"users")?;
    res.send(200, Some(b"text/plain"), body.as_bytes())?;
    Ok(())
}

async fn echo_json(_: &App, req: &mut Routed<'_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let value: serde_json::Value = req.json().await?;
    res.json(200, &value)?;
    Ok(())
}

async fn count(_: &App, req: &mut Routed<'_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let mut total = 0;
    while let Some(piece) = req.chunk().await? {
        total += piece.len();
    }
    res.send(200, None, total.to_string().as_bytes())?;
    Ok(())
}

/// Streams its body in three flushes.
async fn streamed(_: &App, _: &mut Routed<'_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    for i in 0..3 {
        res.write(format!("part {i}\n").as_bytes());
        res.flush().await?;
    }
    Ok(())
}

/// Answers once `TOGETHER` requests are waiting at once, so that it is
/// answered 200 only when they are served concurrently (after a minute
/// at most, 503).
async fn together(app: &App, _: &mut Routed<'_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    app.waiting.set(app.waiting.get() + 1);
    let until = Instant::now() + Duration::from_secs(60);
    let mut met = false;
    while Instant::now() < until {
        if app.waiting.get() >= TOGETHER {
            met = true;
            break;
        }
        percore::time::sleep(Duration::from_millis(5)).await;
    }
    // Each that met keeps the count up for the others still polling.
    percore::time::sleep(Duration::from_millis(50)).await;
    let status = if met { 200 } else { 503 };
    res.send(status, None, b"")?;
    Ok(())
}

/// Holds its answer for a while: a request in flight at a stop.
async fn slow(_: &App, _: &mut Routed<'_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    percore::time::sleep(Duration::from_millis(300)).await;
    res.send(200, None, b"slow done")?;
    Ok(())
}

const TOGETHER: u32 = 5;

fn routes() -> Routes<App, impl percore_handlers::http::router::Chain<App>> {
    Router::new(App::default())
        .get("/users/{id}", user)
        .post("/json", echo_json)
        .post("/small", count)
        .body_limit(10)
        .get("/streamed", streamed)
        .get("/together", together)
        .get("/slow", slow)
        .build()
        .expect("the test routes do not conflict")
}

/// One curl exchange: status, HTTP version, body.
#[derive(Debug, PartialEq, Eq)]
struct Got {
    status: u16,
    version: String,
    body: String,
}

/// Runs curl with `args` then the URL, and splits what it printed.
fn curl_get(args: &[&str], url: &str) -> Option<Got> {
    let mut all = vec!["-w", "\n%{http_code} %{http_version}"];
    all.extend_from_slice(args);
    all.push(url);
    let out = curl(&all)?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "curl {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (body, tail) = text.rsplit_once('\n').expect("curl's write-out line");
    let (status, version) = tail.split_once(' ').expect("status and version");
    Some(Got {
        status: status.parse().expect("a status"),
        version: version.to_string(),
        body: body.to_string(),
    })
}

/// What `args` get from `url` on HTTP/2 (`h2`, the curl option that asks
/// for it) and on HTTP/1.1: the same status and body, with the version
/// asked for each.
fn same_on_both(h2: &str, extra: &[&str], url: &str) -> Option<Got> {
    let mut args = vec![h2];
    args.extend_from_slice(extra);
    let two = curl_get(&args, url)?;
    let mut args = vec!["--http1.1"];
    args.extend_from_slice(extra);
    let one = curl_get(&args, url)?;
    assert_eq!(two.version, "2", "{two:?}");
    assert_eq!(one.version, "1.1", "{one:?}");
    // The version a service sees differs only in the `user` route's body.
    assert_eq!(
        (two.status, two.body.replace("v2", "v1")),
        (one.status, one.body.clone()),
        "{url} {extra:?}"
    );
    Some(two)
}

/// The router's answers, over HTTP/2 with `h2` (a curl option) at `base`.
fn router_answers(h2: &str, base: &str, extra: &[&str]) -> Option<()> {
    let url = |path: &str| format!("{base}{path}");
    let got = same_on_both(h2, extra, &url("/users/42"))?;
    assert_eq!((got.status, got.body.as_str()), (200, "user 42 v2\n"));
    let mut post = vec!["-H", "Content-Type: application/json", "--data-binary"];
    post.push(r#"{"name":"ann","tags":["a",1]}"#);
    post.extend_from_slice(extra);
    let got = same_on_both(h2, &post, &url("/json"))?;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, r#"{"name":"ann","tags":["a",1]}"#);
    let got = same_on_both(h2, extra, &url("/nowhere"))?;
    assert_eq!(got.status, 404);
    let mut delete = vec!["-X", "DELETE"];
    delete.extend_from_slice(extra);
    let got = same_on_both(h2, &delete, &url("/users/1"))?;
    assert_eq!(got.status, 405);
    let mut big = vec!["--data-binary", "0123456789abcdef"];
    big.extend_from_slice(extra);
    let got = same_on_both(h2, &big, &url("/small"))?;
    assert_eq!(got.status, 413);
    let got = same_on_both(h2, extra, &url("/streamed"))?;
    assert_eq!(
        (got.status, got.body.as_str()),
        (200, "part 0\npart 1\npart 2\n")
    );
    // HEAD: the GET's status and length, no body.
    let mut head = vec![h2, "--head"];
    head.extend_from_slice(extra);
    let got = curl_get(&head, &url("/users/42"))?;
    assert_eq!((got.status, got.version.as_str()), (200, "2"));
    let fields = got.body.to_ascii_lowercase();
    assert!(fields.contains("content-length: 11"), "{fields}");
    assert!(fields.contains("x-route: users"), "{fields}");
    Some(())
}

/// Percore with the test routes over TLS, offering `alpn`.
fn tls_server(backend: Backend, cert: &TestCert, alpn: &[&[u8]]) -> percore::ServerHandle {
    let tls = ServerTls::new(&cert.cert, &cert.key)
        .alpn(alpn)
        .build()
        .expect("server config");
    let server = Server::builder()
        .address(SocketAddr::from(([127, 0, 0, 1], 0)))
        .cores([server_cpu()])
        .backend(backend)
        .tls(tls)
        .start(|_core| HttpHandler::new(routes()))
        .expect("start");
    check_backend(&server, backend);
    server
}

backend_tests! {
    parallel;
    /// Clear text with prior knowledge: the router answers as over HTTP/1.
    fn h2c_answers_as_h1(backend) {
        let server = TestServer::start(backend, Config::default(), routes);
        let base = format!("http://{}", server.addr);
        let _ = router_answers("--http2-prior-knowledge", &base, &[]);
    }

    /// curl's `--http2` in clear text asks for `Upgrade: h2c`, which is not
    /// taken (RFC 9113 dropped it): it is served HTTP/1.1.
    fn an_upgrade_to_h2c_is_served_h1(backend) {
        let server = TestServer::start(backend, Config::default(), routes);
        let url = format!("http://{}/users/5", server.addr);
        if let Some(got) = curl_get(&["--http2"], &url) {
            assert_eq!((got.status, got.version.as_str(), got.body.as_str()), (200, "1.1", "user 5 v1\n"));
        }
    }

    /// A body that grows past the route's limit, with no `Content-Length`
    /// to refuse it by, is answered 413 as it is read.
    fn a_streamed_body_over_the_limit_is_413(backend) {
        let server = TestServer::start(backend, Config::default(), routes);
        let mut s = raw_h2(server.addr);
        let mut block = vec![0x83, 0x86]; // :method POST, :scheme http
        block.extend_from_slice(&[0x04, 6]);
        block.extend_from_slice(b"/small");
        block.extend_from_slice(&[0x01, 0x09]);
        block.extend_from_slice(b"localhost");
        let mut request = frame(HEADERS, 0x4, 1, &block);
        request.extend(frame(0, 0, 1, b"0123456789"));
        request.extend(frame(0, 1, 1, b"abcdef"));
        // And a GOAWAY of the client's own, so that the server closes
        // once it has answered.
        request.extend(frame(GOAWAY, 0, 0, &[0, 0, 0, 1, 0, 0, 0, 0]));
        s.write_all(&request).expect("request");
        let frames = frames_until_close(&mut s);
        let body: Vec<u8> = frames
            .iter()
            .filter(|f| f.0 == 0 && f.2 == 1)
            .flat_map(|f| f.3.clone())
            .collect();
        let body = String::from_utf8_lossy(&body);
        assert_eq!(body, "Content Too Large: request body over limit\n", "{frames:?}");
    }

    /// A connection with no stream open gets GOAWAY at the idle timeout,
    /// and is closed.
    fn an_idle_connection_gets_goaway(backend) {
        let server = TestServer::start(backend, short_config(), routes);
        let mut s = raw_h2(server.addr);
        s.write_all(&get_frame(1, "/users/1")).expect("request");
        let frames = frames_until_close(&mut s);
        assert!(frames.iter().any(|f| f.0 == HEADERS && f.2 == 1), "{frames:?}");
        assert!(frames.iter().any(|f| f.0 == GOAWAY), "{frames:?}");
    }

    /// Over TLS, ALPN `h2` chooses HTTP/2 and `http/1.1` is kept; a
    /// server that offers `http/1.1` alone (the default) is never spoken
    /// to in HTTP/2.
    fn tls_chooses_h2_by_alpn(backend) {
        let Some(cert) = TestCert::new(&format!("h2-alpn-{backend}")) else { return };
        let server = tls_server(backend, &cert, &[b"h2", b"http/1.1"]);
        let base = format!("https://localhost:{}", server.local_addr().port());
        let ca = cert.ca.to_str().expect("utf-8 path");
        let _ = router_answers("--http2", &base, &["--cacert", ca]);
        server.shutdown();
        server.join().expect("join");

        let server = tls_server(backend, &cert, &[b"http/1.1"]);
        let url = format!("https://localhost:{}/users/3", server.local_addr().port());
        if let Some(got) = curl_get(&["--http2", "--cacert", ca], &url) {
            assert_eq!((got.status, got.version.as_str(), got.body.as_str()), (200, "1.1", "user 3 v1\n"));
        }
        server.shutdown();
        server.join().expect("join");
    }

    /// Streams of one connection are served together: each `/together`
    /// answers 200 only once all are waiting at once (503 else). h2load
    /// sends them on one connection, as streams of it; curl 7.88's
    /// `--parallel` breaks its own streams on such a connection.
    fn streams_are_served_concurrently(backend) {
        if !installed("h2load") {
            return;
        }
        let server = TestServer::start(backend, Config::default(), routes);
        let url = format!("http://{}/together", server.addr);
        let n = TOGETHER.to_string();
        let out = Command::new("h2load")
            .args(["-n", &n, "-c", "1", "-m", &n, "-T", "90", &url])
            .output()
            .expect("run h2load");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(&format!("status codes: {n} 2xx, 0 3xx, 0 4xx, 0 5xx")), "{text}");
        assert_eq!(server.stats().accepted, 1, "one connection");
    }

    /// h2load: 2000 requests on 4 connections of 10 streams each, all
    /// answered.
    fn h2load_has_no_errors(backend) {
        if !installed("h2load") {
            return;
        }
        let server = TestServer::start(backend, Config::default(), routes);
        let url = format!("http://{}/users/1", server.addr);
        let out = Command::new("h2load")
            .args(["-n", "2000", "-c", "4", "-m", "10", "-T", "60", &url])
            .output()
            .expect("run h2load");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, 0 errored"),
            "{text}"
        );
        assert!(text.contains("status codes: 2000 2xx"), "{text}");
    }

    /// A stop sends GOAWAY and serves the stream in flight to its end.
    fn stop_sends_goaway_and_drains(backend) {
        let server = TestServer::start(backend, Config::default(), routes);
        let mut s = raw_h2(server.addr);
        s.write_all(&get_frame(1, "/slow")).expect("request");
        // The stream is begun before the stop: its HEADERS reached the
        // server once the server's SETTINGS came back.
        let mut first = [0u8; 9];
        s.read_exact(&mut first).expect("the server's settings");
        assert_eq!(first[3], SETTINGS);
        let len = u32::from_be_bytes([0, first[0], first[1], first[2]]) as usize;
        s.read_exact(&mut vec![0; len]).expect("the settings' payload");
        std::thread::sleep(Duration::from_millis(50));
        server.begin_stop();
        let frames = frames_until_close(&mut s);
        let goaway = frames.iter().position(|f| f.0 == GOAWAY);
        let answer = frames.iter().position(|f| f.0 == HEADERS && f.2 == 1);
        assert!(goaway.is_some(), "GOAWAY: {frames:?}");
        let answer = answer.unwrap_or_else(|| panic!("the stream's answer: {frames:?}"));
        // `:status: 200`, HPACK's static entry 8.
        assert_eq!(frames[answer].3.first(), Some(&0x88), "{frames:?}");
        assert!(frames.iter().any(|f| f.0 == 0 && f.2 == 1 && f.1 & 1 == 1), "body's end: {frames:?}");
    }

    /// Rapid reset (CVE-2023-44487): a client that opens and resets
    /// 10,000 streams in a burst gets GOAWAY `ENHANCE_YOUR_CALM` and is
    /// cut off, while another client, during the burst, is served.
    fn rapid_reset_is_cut_off(backend) {
        let server = TestServer::start(backend, Config::default(), routes);
        let url = format!("http://{}/users/2", server.addr);
        let mut s = raw_h2(server.addr);
        let mut burst = Vec::new();
        for i in 0..10_000u32 {
            let id = 2 * i + 1;
            burst.extend(get_frame(id, "/users/1"));
            burst.extend(frame(RST_STREAM, 0, id, &8u32.to_be_bytes()));
        }
        let other = std::thread::spawn(move || curl_get(&["--http2-prior-knowledge"], &url));
        // The server may cut the connection while the burst is sent.
        let _ = s.write_all(&burst);
        let frames = frames_until_close(&mut s);
        let goaway = frames.iter().find(|f| f.0 == GOAWAY).unwrap_or_else(|| {
            panic!("no GOAWAY in {} frames", frames.len())
        });
        let code = u32::from_be_bytes(goaway.3[4..8].try_into().expect("error code"));
        assert_eq!(code, ENHANCE_YOUR_CALM);
        if let Some(got) = other.join().expect("the other client") {
            assert_eq!((got.status, got.body.as_str()), (200, "user 2 v2\n"));
        }
    }

    /// CONTINUATION flood (CVE-2024-27316): a header block that never
    /// ends is refused at the header-list limit, the connection closed,
    /// and no request of it reaches the service; another client is
    /// served.
    fn a_continuation_flood_is_refused(backend) {
        let server = TestServer::start(backend, Config::default(), routes);
        let mut s = raw_h2(server.addr);
        // HEADERS without END_HEADERS, then CONTINUATIONs of 1 KiB
        // fields, without end: 4 MiB in all.
        let mut flood = frame(HEADERS, 0x1, 1, &[0x82, 0x86, 0x84, 0x01, 0x09]);
        flood.extend_from_slice(b"localhost");
        let first = flood.len() - 9;
        flood[..3].copy_from_slice(&(first as u32).to_be_bytes()[1..]);
        let mut field = vec![0x00, 0x03];
        field.extend_from_slice(b"x-a");
        field.extend_from_slice(&[0x7f, 0x81, 0x07]); // a 1,024-byte value
        field.extend(std::iter::repeat_n(b'v', 1024));
        for _ in 0..4096 {
            flood.extend(frame(9, 0, 1, &field));
        }
        let _ = s.write_all(&flood);
        let frames = frames_until_close(&mut s);
        assert!(
            !frames.iter().any(|f| f.0 == HEADERS && f.2 == 1 && f.3.first() == Some(&0x88)),
            "served: {frames:?}"
        );
        assert!(frames.iter().any(|f| f.0 == GOAWAY), "no GOAWAY in {frames:?}");
        let url = format!("http://{}/users/3", server.addr);
        if let Some(got) = curl_get(&["--http2-prior-knowledge"], &url) {
            assert_eq!((got.status, got.body.as_str()), (200, "user 3 v2\n"));
        }
    }
}
