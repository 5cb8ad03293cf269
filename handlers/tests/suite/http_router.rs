//! The router on both backends: matching (parameters, static segments, a
//! catch-all, trailing slashes, percent-encoded segments, nested
//! prefixes), the router's own 404, 405 and `OPTIONS` answers, `HEAD` on
//! `GET` routes, typed parameters and their 400s, owned error reasons,
//! per-route body limits, decoded queries and forms, and the tracing span.

use crate::support;

use std::cell::Cell;
use std::io;
use std::io::Write as _;

use percore_handlers::http::{self, HttpError, Routed, Router, Routes};
use percore_test_kit::http::*;
use percore_test_kit::log_capture;
use percore_test_kit::*;
use support::http::*;

#[derive(Default)]
struct App {
    served: Cell<u64>,
}

type Res<'a, 'b> = &'a mut Response<'b>;

async fn user(app: &App, req: &mut Routed<'_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    app.served.set(app.served.get() + 1);
    let id: u64 = req.param("id")?;
    if id == 0 {
        return Err(HttpError::new(404, format!("no user {id}")).into());
    }
    tracing::info!("looking up user {id}");
    let body = format!(
        "user {id} on {} ({} served)\n",
        req.route(),
        app.served.get()
    );
    res.send(200, Some(b"text/plain"), body.as_bytes())?;
    Ok(())
}

async fn me(_: &App, _: &mut Routed<'_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    res.send(200, Some(b"text/plain"), b"me\n")?;
    Ok(())
}

/// A failure whose message quotes the client's parameter, decoded.
async fn fail(_: &App, req: &mut Routed<'_, '_>, _: Res<'_, '_>) -> io::Result<()> {
    let what = req.param_str("what")?;
    Err(HttpError::new(500, format!("cannot find {what}")).into())
}

async fn deleted(_: &App, req: &mut Routed<'_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let id: u64 = req.param("id")?;
    res.send(200, None, format!("deleted {id}").as_bytes())?;
    Ok(())
}

async fn file(_: &App, req: &mut Routed<'_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let path = req.param_str("rest")?;
    let raw = req.param_raw("rest").unwrap_or_default();
    res.send(200, None, format!("{path}|{raw}").as_bytes())?;
    Ok(())
}

async fn pair(_: &App, req: &mut Routed<'_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let a: u32 = req.param("a")?;
    let b: u32 = req.param("b")?;
    write!(res.body_mut(), "{}", a + b)?;
    Ok(())
}

async fn echo(_: &App, req: &mut Routed<'_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let body = req.body().await?.to_vec();
    res.send(200, None, &body)?;
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

async fn search(_: &App, req: &mut Routed<'_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let limit: u32 = req.query_as("limit")?.unwrap_or(10);
    let q = req.query_value("q").unwrap_or_default();
    res.send(200, None, format!("{q}|{limit}").as_bytes())?;
    Ok(())
}

/// Every decoded query pair, one `name=value` line each.
async fn pairs(_: &App, req: &mut Routed<'_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let mut out = String::new();
    for (n, v) in req.query_pairs() {
        out.push_str(&format!("{n}={v}\n"));
    }
    res.send(200, None, out.as_bytes())?;
    Ok(())
}

async fn form(_: &App, req: &mut Routed<'_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let mut out = String::new();
    for (n, v) in req.form_pairs().await? {
        out.push_str(&format!("{n}={v};"));
    }
    res.send(200, None, out.as_bytes())?;
    Ok(())
}

async fn no_such_param(_: &App, req: &mut Routed<'_, '_>, _: Res<'_, '_>) -> io::Result<()> {
    let _: u32 = req.param("nope")?;
    Ok(())
}

/// An error of the application's own, with a cause.
#[derive(Debug)]
struct PageError(io::Error);

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("cannot load the page")
    }
}

impl std::error::Error for PageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

fn load_page(what: &str) -> Result<String, PageError> {
    Err(PageError(io::Error::other(format!("no disk for {what}"))))
}

/// `?` on every kind of error in one handler: the path parameter's
/// `HttpError`, an `HttpError` of its own, an I/O error, an error of the
/// application's, a standard library one and, with `json`, serde_json's.
async fn page(_: &App, req: &mut Routed<'_, '_>, res: Res<'_, '_>) -> http::Result {
    let what = req.param_str("what")?;
    match &*what {
        "gone" => Err(HttpError::new(410, "deleted yesterday"))?,
        "io" => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "notes.txt: access denied",
        ))?,
        "number" => {
            let n: u32 = "12x".parse()?;
            res.send(200, None, n.to_string().as_bytes())?;
        }
        #[cfg(feature = "json")]
        "json" => {
            let v: u32 = serde_json::from_str("{not json")?;
            res.send(200, None, v.to_string().as_bytes())?;
        }
        _ => {
            let text = load_page(&what)?;
            res.send(200, None, text.as_bytes())?;
        }
    }
    Ok(())
}

fn routes() -> Routes<App, impl percore_handlers::http::router::Chain<App>> {
    Router::new(App::default())
        .get("/users/{id}", user)
        .delete("/users/{id}", deleted)
        .get("/users/me", me)
        .get("/files/{*rest}", file)
        .get("/pair/{a}/{b}", pair)
        .get("/fail/{what}", fail)
        .post("/small", echo)
        .body_limit(10)
        .post("/big", count)
        .body_limit(3 << 20)
        .post("/default", count)
        .get("/search", search)
        .get("/pairs", pairs)
        .post("/form", form)
        .get("/broken", no_such_param)
        .nest("/api/v1/", |api| {
            api.get("/users/{id}", user)
                .nest("/admin", |admin| admin.get("/", me))
        })
        .get(
            "/closure",
            async |app: &App, _: &mut Routed<'_, '_>, res: Res<'_, '_>| -> io::Result<()> {
                res.send(200, None, format!("{}", app.served.get()).as_bytes())?;
                Ok(())
            },
        )
        .get("/page/{what}", page)
        .get("/short-closure", async |app, _, res| -> http::Result {
            res.send(200, None, format!("{}", app.served.get()).as_bytes())?;
            Ok(())
        })
        .trace(true)
        .build()
        .expect("the test routes do not conflict")
}

fn server(backend: Backend) -> TestServer {
    TestServer::start(backend, Config::default(), routes)
}

fn chunked_post(path: &str, size: usize) -> Vec<u8> {
    let mut v = format!("POST {path} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        .into_bytes();
    let piece = vec![b'x'; 64 * 1024];
    let mut left = size;
    while left > 0 {
        let n = left.min(piece.len());
        v.extend_from_slice(format!("{n:x}\r\n").as_bytes());
        v.extend_from_slice(&piece[..n]);
        v.extend_from_slice(b"\r\n");
        left -= n;
    }
    v.extend_from_slice(b"0\r\n\r\n");
    v
}

backend_tests! {
    /// Parameters, a static segment beside a parameter, per-core state,
    /// another method on the same pattern, nested prefixes, a closure.
    fn routes_reach_their_handlers(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/users/42"));
        assert_eq!((r.status, r.body.as_slice()), (200, &b"user 42 on /users/{id} (1 served)\n"[..]));
        assert_eq!(c.roundtrip(&get("/users/me")).body, b"me\n");
        let r = c.roundtrip(b"DELETE /users/7 HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(r.body, b"deleted 7");
        let r = c.roundtrip(&get("/api/v1/users/9"));
        assert_eq!(r.body, b"user 9 on /api/v1/users/{id} (2 served)\n");
        assert_eq!(c.roundtrip(&get("/api/v1/admin/")).body, b"me\n");
        assert_eq!(c.roundtrip(&get("/pair/40/2")).body, b"42");
        assert_eq!(c.roundtrip(&get("/closure")).body, b"2");
        // An absolute-form target routes by its path.
        let r = c.roundtrip(b"GET http://example.com/users/5?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
        assert_eq!(r.status, 200);
    }

    /// 404 for unknown paths (a trailing slash is another path), 405 with
    /// `Allow` for a known path, `OPTIONS` answered with `Allow`, `HEAD`
    /// served by `GET`; the connection is kept throughout.
    fn the_router_answers_404_405_options_and_head(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/nowhere"));
        assert_eq!((r.status, r.body.as_slice(), r.closes()), (404, &b"Not Found\n"[..], false));
        assert_eq!(c.roundtrip(&get("/users/")).status, 404);
        assert_eq!(c.roundtrip(&get("/users/42/")).status, 404);
        assert_eq!(c.roundtrip(&get("/files")).status, 404);
        let r = c.roundtrip(b"PUT /users/42 HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
        assert_eq!(r.status, 405);
        assert_eq!(r.header("allow"), Some("GET, DELETE, HEAD"));
        assert_eq!(r.body, b"Method Not Allowed\n");
        assert!(!r.closes());
        let r = c.roundtrip(b"OPTIONS /users/42 HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!((r.status, r.header("allow")), (204, Some("GET, DELETE, HEAD")));
        c.send(b"HEAD /users/42 HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.response_to(true);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), Some("34"));
        assert!(r.body.is_empty());
        assert_eq!(c.roundtrip(&get("/users/me")).body, b"me\n");
    }

    /// The router's own 404, 405 and 413 in an API's JSON: each error
    /// given to `error_body` carries its status's reason phrase.
    fn the_routers_answers_carry_their_reason(backend) {
        fn json(error: &HttpError, body: &mut Vec<u8>) -> &'static str {
            body.extend_from_slice(format!(r#"{{"error":"{}","status":{}}}"#, error.reason, error.status).as_bytes());
            "application/json"
        }
        let routes = || Router::new(App::default()).get("/users/{id}", user).post("/small", echo).body_limit(4).error_body(json).build().expect("routes");
        let server = TestServer::start(backend, Config::default(), routes);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/nowhere"));
        assert_eq!((r.status, r.header("content-type")), (404, Some("application/json")));
        assert_eq!(String::from_utf8_lossy(&r.body), r#"{"error":"Not Found","status":404}"#);
        let r = c.roundtrip(b"PUT /users/1 HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(String::from_utf8_lossy(&r.body), r#"{"error":"Method Not Allowed","status":405}"#);
        let r = c.roundtrip(&get("/users/1"));
        assert_eq!(r.status, 200);
        let r = one(server.addr, &post("/small", "text/plain", b"too long"));
        assert_eq!(r.status, 413);
        assert_eq!(String::from_utf8_lossy(&r.body), r#"{"error":"Content-Length over limit","status":413}"#);
    }

    /// Path parameters are percent-decoded when read; the catch-all takes
    /// the rest of the path, slashes included.
    fn parameters_are_decoded(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/files/a%20b/c%2Fd.txt"));
        assert_eq!(r.body, b"a b/c/d.txt|a%20b/c%2Fd.txt");
        let r = c.roundtrip(&get("/users/%34%32"));
        assert_eq!(r.body, b"user 42 on /users/{id} (1 served)\n");
        let r = c.roundtrip(&get("/files/%FF"));
        assert_eq!(r.status, 400);
        assert_eq!(r.body, b"Bad Request: path parameter `rest` is not UTF-8\n");
    }

    /// A parameter that does not parse is a 400 naming it, and keeps the
    /// connection; an owned reason reaches the client; a handler asking
    /// for a parameter its route lacks is a 500.
    fn parameter_failures_and_owned_reasons(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/users/x1"));
        assert_eq!(r.status, 400);
        assert_eq!(r.body, b"Bad Request: path parameter `id`: invalid digit found in string\n");
        assert!(!r.closes());
        let r = c.roundtrip(&get("/users/0"));
        assert_eq!((r.status, r.body.as_slice()), (404, &b"Not Found: no user 0\n"[..]));
        let r = c.roundtrip(&get("/pair/1/99999999999"));
        assert_eq!(r.body, b"Bad Request: path parameter `b`: number too large to fit in target type\n");
        let r = c.roundtrip(&get("/broken"));
        assert_eq!(r.status, 500);
        let mut c = Client::connect(server.addr);
        assert_eq!(c.roundtrip(&get("/users/1")).status, 200);
    }

    /// Each route's body limit: a `Content-Length` over it is a 413
    /// before the handler runs; a 2 MiB chunked body streams through a
    /// route that declared 3 MiB, and is refused (413, not a truncated
    /// 200) by the default 1 MiB.
    fn body_limits_are_per_route(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        assert_eq!(c.roundtrip(&post("/small", "text/plain", b"0123456789")).body, b"0123456789");
        let r = c.roundtrip(&post("/small", "text/plain", b"0123456789a"));
        assert_eq!((r.status, r.closes()), (413, true));
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&chunked_post("/big", 2 << 20));
        assert_eq!((r.status, r.body.as_slice()), (200, format!("{}", 2 << 20).as_bytes()));
        let mut c = Client::connect(server.addr);
        c.send(&chunked_post("/default", 2 << 20));
        assert_eq!(c.response().status, 413);
    }

    /// Queries are decoded (`%XX`, `+` as a space); a typed value that
    /// does not parse is a 400 naming it; a form body the same way, and
    /// another content type a 415.
    fn queries_and_forms_are_decoded(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/search?q=caf%C3%A9+au+lait&limit=3"));
        assert_eq!(r.body, "café au lait|3".as_bytes());
        assert_eq!(c.roundtrip(&get("/search")).body, b"|10");
        let r = c.roundtrip(&get("/search?limit=ten"));
        assert_eq!(r.status, 400);
        assert_eq!(r.body, b"Bad Request: query parameter `limit`: invalid digit found in string\n");
        let r = c.roundtrip(&post("/form", "application/x-www-form-urlencoded", b"a=1+2&b=%26"));
        assert_eq!(r.body, b"a=1 2;b=&;");
        let r = c.roundtrip(&post("/form", "text/plain", b"a=1"));
        assert_eq!(r.status, 415);
        assert_eq!(r.body, b"Unsupported Media Type: expected Content-Type: application/x-www-form-urlencoded\n");
    }

    /// The server's decoding of a corpus of queries matches
    /// `form_urlencoded`'s (the `url` crate's) on the client's side.
    fn query_decoding_matches_the_url_crate(backend) {
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        let corpus = [
            "a=1&b=2", "a=%41%42", "sp=a+b%20c", "empty=&=v&bare", "utf8=%E2%82%AC",
            "bad=%ZZ%4", "invalid=%FF%FE", "plus=%2B+", "dup=1&dup=2", "semi=a;b",
            "eq=a=b=c", "&&a=1&&", "k%20ey=v", "%",
        ];
        for query in corpus {
            let r = c.roundtrip(&get(&format!("/pairs?{query}")));
            let want: String = form_urlencoded::parse(query.as_bytes())
                .map(|(n, v)| format!("{n}={v}\n"))
                .collect();
            assert_eq!(String::from_utf8_lossy(&r.body), want, "query {query}");
        }
    }

    /// With tracing on, a request's span names its method and route,
    /// and records its status when it ends.
    fn each_request_runs_in_a_span(backend) {
        log_capture::install();
        let server = server(backend);
        // The log is the process's: this server's lines are those with
        // its address.
        let addr = server.addr.to_string();
        let mut c = Client::connect(server.addr);
        assert_eq!(c.roundtrip(&get("/users/31337")).status, 200);
        assert_eq!(c.roundtrip(&get("/users/x31338")).status, 400);
        drop(c);
        drop(server);
        let span = "request{method=\"GET\" route=\"/users/{id}\"";
        let inside = log_capture::lines_with(&[&addr, "looking up user 31337", span]);
        assert_eq!(inside.len(), 1, "{inside:?}");
        let closed = log_capture::lines_with(&[&addr, span, "status=200", "close"]);
        assert_eq!(closed.len(), 1, "{closed:?}");
        let closed = log_capture::lines_with(&[&addr, span, "status=400", "close"]);
        assert_eq!(closed.len(), 1, "{closed:?}");
    }

    /// `?` in a handler returning `http::Result`, on any error: an
    /// `HttpError` keeps its status and reason (the client's to read);
    /// any other error is a bare 500 whose message and causes reach the
    /// log alone, at WARN with the method and target.
    fn question_mark_takes_any_error(backend) {
        log_capture::install();
        let server = server(backend);
        let mut c = Client::connect(server.addr);
        let r = c.roundtrip(&get("/page/gone"));
        assert_eq!((r.status, r.body.as_slice()), (410, &b"Gone: deleted yesterday\n"[..]));
        assert_eq!(c.roundtrip(&get("/short-closure")).status, 200);
        // Each backend's paths its own: the log is the process's.
        let mut cases = vec![
            (format!("/page/io?b={backend:?}"), "notes.txt: access denied".to_string()),
            (format!("/page/lost-{backend:?}"), format!("cannot load the page: no disk for lost-{backend:?}")),
        ];
        if cfg!(feature = "json") {
            cases.push((format!("/page/json?b={backend:?}"), "invalid type: map, expected u32".to_string()));
        }
        cases.push((format!("/page/number?b={backend:?}"), "invalid digit found in string".to_string()));
        for (path, cause) in &cases {
            // A server each: a core logs one failure a second.
            let server = self::server(backend);
            let r = one(server.addr, &get(path));
            assert_eq!(r.status, 500, "{path}");
            assert_eq!(r.body, b"Internal Server Error\n", "{path}: the cause is not the client's");
            drop(server);
            let logged = log_capture::lines_with(&["WARN", "service failed", "GET", path, cause]);
            assert_eq!(logged.len(), 1, "{path}: {cause}: {logged:?}");
        }
    }

    /// A failure's message that quotes a parameter holding CR LF (sent
    /// as `%0D%0A`) is logged on one line: the client cannot forge a
    /// line of the log.
    fn a_logged_failure_stays_one_line(backend) {
        log_capture::install();
        let server = server(backend);
        let forged = format!("FORGED-{backend:?} level=INFO all is well");
        let path = format!("/fail/x%0D%0A{}", forged.replace(' ', "%20"));
        assert_eq!(one(server.addr, &get(&path)).status, 500);
        drop(server);
        let failed = log_capture::lines_with(&["service failed", &forged]);
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert!(failed[0].contains("cannot find x\\r\\nFORGED"), "{failed:?}");
        let forged_lines = log_capture::lines_with(&[&forged]);
        assert!(
            forged_lines.iter().all(|l| l.contains("service failed")),
            "a line of the client's: {forged_lines:?}"
        );
    }
}

/// Conflicting routes are refused when the router is built.
#[test]
fn conflicting_routes_are_refused_at_build() {
    let e = Router::new(App::default())
        .get("/users/{id}", user)
        .get("/users/{name}", me)
        .build()
        .expect_err("a conflict");
    assert!(
        e.to_string().starts_with("route GET /users/{name}: "),
        "{e}"
    );
    let e = Router::new(App::default())
        .get("/a", me)
        .nest("/x", |x| x.get("/a", me).get("/a", user))
        .build()
        .expect_err("a route defined twice");
    assert_eq!(e.to_string(), "route GET /x/a: defined twice");
    let e = Router::new(())
        .body_limit(1)
        .build()
        .expect_err("a limit before any route");
    assert_eq!(e.to_string(), "route body_limit: comes after a route");
}
